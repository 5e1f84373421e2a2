package harness

import (
	"os"
	"syscall"
	"testing"

	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"

	"golang.org/x/crypto/bcrypt"
)

// TestCost keeps bcrypt fast in tests.
const TestCost = bcrypt.MinCost

// TestUsers: alice (dev), bob (admin), carol (disabled). Each password is
// the username + "-pw".
func TestUsers(t testing.TB) []users.User {
	t.Helper()
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), TestCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	return []users.User{
		{Username: "alice", PasswordHash: hash("alice-pw"), Name: "Alice", Email: "alice@example.com", Groups: []string{"dev"}},
		{Username: "bob", PasswordHash: hash("bob-pw"), Name: "Bob", Groups: []string{}, Admin: true},
		{Username: "carol", PasswordHash: hash("carol-pw"), Groups: []string{}, Disabled: true},
	}
}

// WriteTestUsers writes TestUsers to a users file in a temporary directory.
func WriteTestUsers(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/users.json"
	if err := usersfile.Write(path, TestUsers(t)); err != nil {
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
