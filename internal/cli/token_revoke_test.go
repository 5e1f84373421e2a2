package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLITokenRevokeRefused: token revoke takes exactly one ID, and one
// that names no live token is an error that changes nothing.
func TestCLITokenRevokeRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	addExpiredToken(t, path, "alice")
	_, id := createToken(t, path, nil, "--name", "ci", "alice")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "authsvc: token revoke: want exactly one ID\n"},
		{[]string{id, id}, 2, "authsvc: token revoke: want exactly one ID\n"},
		{[]string{"feedfacefeedface"}, 1, `authsvc: token revoke: no such personal access token "feedfacefeedface"` + "\n"},
		{[]string{"0123456789abcdef"}, 1, `authsvc: token revoke: no such personal access token "0123456789abcdef"` + "\n"}, // expired
		{[]string{"ci"}, 1, `authsvc: token revoke: no such personal access token "ci"` + "\n"},                             // a name is not an id
		{[]string{"\x1b[2J"}, 1, `authsvc: token revoke: no such personal access token "\x1b[2J"` + "\n"},
	} {
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, "", nil, append([]string{"token", "revoke", "--users", path}, tt.args...)...)
		if code != tt.code || stdout != "" || stderr != tt.want {
			t.Errorf("token revoke %q = exit %d, stdout %q, stderr %q; want %d, %q", tt.args, code, stdout, stderr, tt.code, tt.want)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
			t.Errorf("token revoke %q failed, but changed the users file", strings.Join(tt.args, " "))
		}
	}
	checkTokenTable(t, path, []string{id + " alice ci"})
}
