package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"authsvc/internal/password/passwordtest"
)

// Users-file fixtures of the tests here, as internal/users has its own.

// usersJSON returns a users file holding the given entries, each a JSON object.
func usersJSON(entries ...string) string {
	return `{"users": [` + strings.Join(entries, ",\n") + `]}`
}

// entry returns a users file entry for username with the given extra fields.
func entry(username string, extra ...string) string {
	fields := append([]string{fmt.Sprintf("%q: %q", "username", username)}, extra...)
	return "{" + strings.Join(fields, ", ") + "}"
}

func hashField(h string) string { return fmt.Sprintf(`"password_hash": %q`, h) }

var okAlice = entry("alice", hashField(passwordtest.Hash))

// checkMode fails t unless the file at path has permission bits mode.
func checkMode(t *testing.T, path string, mode os.FileMode) {
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

// dirNames returns the sorted names in dir.
func dirNames(t *testing.T, dir string) []string {
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
