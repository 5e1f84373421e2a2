package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestLoadServersAuthorization: a servers line may end with the
// Authorization value its /info requests send; without one they send
// "Token " + the token.
func TestLoadServersAuthorization(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "servers.txt")
	lines := "baseline http://127.0.0.1:1 aaaa\n" +
		"authsvc http://127.0.0.1:2 bbbb\n" +
		"authsvc-pat http://127.0.0.1:2 authsvc_pat_x Bearer authsvc_pat_x\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &driver{cfg: config{serversFile: path, only: "info"}}
	if err := d.loadServers(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, want string }{
		{"baseline", "Token aaaa"},
		{"authsvc", "Token bbbb"},
		{"authsvc-pat", "Bearer authsvc_pat_x"},
	} {
		if got := d.targets[tt.name].authorization(); got != tt.want {
			t.Errorf("%s: authorization() = %q; want %q", tt.name, got, tt.want)
		}
	}
	if want := []string{"baseline", "authsvc", "authsvc-pat"}; len(d.order) != len(want) || d.order[0] != want[0] || d.order[2] != want[2] {
		t.Errorf("order = %q; want %q (the file's)", d.order, want)
	}
}
