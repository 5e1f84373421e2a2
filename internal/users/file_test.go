package users

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
)

// TestFileDirectoryRewrittenWhileRead: a file rewritten in place while a
// reload reads it (a hand edit, or cat >) is refused half-written, and the
// finished file is then picked up within 5 s, with no SIGHUP.
func TestFileDirectoryRewrittenWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	alice := User{Username: "alice", PasswordHash: mustHash(t, "alice-pw", passwordtest.Cost), Groups: []string{}}
	bob := User{Username: "bob", PasswordHash: mustHash(t, "bob-pw", passwordtest.Cost), Groups: []string{}}
	if err := WriteFile(path, []User{alice}); err != nil {
		t.Fatal(err)
	}
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path+".full", []User{alice, bob}); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(path + ".full")
	if err != nil {
		t.Fatal(err)
	}
	// The reload reads the first half; the writer finishes before the parse.
	if err := os.WriteFile(path, full[:len(full)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	d.afterRead = func() {
		d.afterRead = nil
		if err := os.WriteFile(path, full, 0o600); err != nil {
			t.Error(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Watch(ctx, 10*time.Millisecond, nil, WatchHooks{})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := d.Lookup(ctx, "bob"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob, in the finished file, not loaded 5 s after the write completed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
