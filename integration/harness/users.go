package harness

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"authsvc/internal/password/passwordtest"
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

// UsersJSON returns a users file holding the given entries, each a JSON object.
func UsersJSON(entries ...string) string {
	return `{"users": [` + strings.Join(entries, ",\n") + `]}`
}

// Entry returns a users file entry for username with the given extra fields.
func Entry(username string, extra ...string) string {
	fields := append([]string{fmt.Sprintf("%q: %q", "username", username)}, extra...)
	return "{" + strings.Join(fields, ", ") + "}"
}

// HashField is a users file entry's password_hash field of h.
func HashField(h string) string { return fmt.Sprintf(`"password_hash": %q`, h) }

// OKAlice is a users file entry of alice with a valid hash.
var OKAlice = Entry("alice", HashField(passwordtest.Hash))

// CheckMode fails t unless the file at path has permission bits mode.
func CheckMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Errorf("os.Stat(%q) = %v", path, err)
		return
	}
	if got := info.Mode().Perm(); got != mode {
		t.Errorf("mode of %s = %v; want %v", path, got, mode)
	}
}

// DirNames returns the sorted names in dir.
func DirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
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
