package harness

import (
	"os"
	"syscall"
	"testing"

	"authsvc/internal/servertest"
	"authsvc/internal/users/usersfile"
)

// WriteTestUsers writes TestUsers to a users file in a temporary directory.
func WriteTestUsers(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/users.json"
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	return path
}

// Owner returns the uid and gid of the file at path.
func Owner(t *testing.T, path string) (uid, gid int) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("os.Stat(%q) = %v", path, err)
	}
	st := info.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}
