package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"authsvc/internal/secret"
	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// TestImportFileFactorsKey (issue 28, point 9): user import --from file
// copies second factors only when the destination's key opens them: its
// --secret-key-file (by default authsvc.key beside a destination users
// file; none with PostgreSQL unless given), the key serve there will be
// given. Otherwise it writes no user and no factor, and stops with one
// line naming both key IDs (exit 1), dry run or not; it never creates a
// key. With the right key, the factors are counted, and user check and
// serve accept the destination.
func TestImportFileFactorsKey(t *testing.T) {
	t.Parallel()
	srcDir := t.TempDir()
	src := filepath.Join(srcDir, "users.json")
	if err := usersfile.Write(src, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	a, aPath := newKeyFile(t, srcDir, defaultKeyFile)
	f, _ := testFactors(t, a, "alice", mustSecret(t), nil, 10)
	setFactors(t, src, "alice", f)
	b, bPath := newKeyFile(t, t.TempDir(), "b.key")

	// refused runs an import that must stop with one line naming key A
	// and want (key B, or the missing key's file), and leave the
	// destination without a user.
	refused := func(t *testing.T, what, dest string, want string, args ...string) {
		t.Helper()
		for _, dry := range []bool{false, true} {
			call := append([]string{"user", "import", "--users", dest, "--from", "file"}, args...)
			if dry {
				call = append(call, "--dry-run")
			}
			code, stdout, stderr := runCLI(t, "", nil, append(call, src)...)
			if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "key "+a.ID()) || !strings.Contains(stderr, want) {
				t.Errorf("user import --from file into %s (dry run %v) = exit %d, stdout %q, stderr %q; want exit 1, one line naming key %s and %s", what, dry, code, stdout, stderr, a.ID(), want)
			}
		}
		if _, err := os.Stat(dest); errors.Is(err, os.ErrNotExist) {
			return // a users file never written
		}
		if got := listUsersIn(t, dest); len(got) != 0 {
			t.Errorf("after the refused imports into %s: users %v; want none written", what, got)
		}
	}
	// accepted imports with args, and checks the destination as serve
	// (given serveArgs) would load it.
	accepted := func(t *testing.T, what, dest string, args, serveArgs []string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, "", nil, append([]string{"user", "import", "--users", dest, "--from", "file"}, append(args, src)...)...)
		if code != 0 || importedUsers(stdout, false) != 3 || !strings.Contains(stdout, "factors 2 imported") {
			t.Fatalf("user import --from file into %s = exit %d, %q, %q; want 0, 3 users, alice's authenticator and recovery codes counted", what, code, stdout, stderr)
		}
		if got := listUsersIn(t, dest)["alice"]; !got.HasSecondFactor() || got.MFA.RecoveryKeyID != a.ID() {
			t.Errorf("alice in %s = %+v; want her factors, under key %s", what, got.MFA, a.ID())
		}
		if code, stdout, stderr := runCLI(t, "", nil, append([]string{"user", "check", "--users", dest}, serveArgs...)...); code != 0 {
			t.Errorf("user check of %s = exit %d, %q, %q; want 0", what, code, stdout, stderr)
		}
		_, _, stop := startServer(t, nil, append([]string{"--users", dest}, serveArgs...)...)
		if err := stop(); err != nil {
			t.Errorf("serve over %s: %v", what, err)
		}
	}

	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		dest := filepath.Join(dir, "users.json")
		destKey := filepath.Join(dir, defaultKeyFile)
		refused(t, "a users file without a key file", dest, destKey)
		if _, err := os.Stat(destKey); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the refused imports made %s (%v); want no key file", destKey, err)
		}
		refused(t, "a users file under another key, by --secret-key-file", dest, "key "+b.ID(), "--secret-key-file", bPath)
		if err := secret.Write(destKey, b); err != nil {
			t.Fatal(err)
		}
		refused(t, "a users file under another key, beside it", dest, "key "+b.ID())
		os.Remove(destKey)
		copyFile(t, aPath, destKey)
		accepted(t, "a users file with the source's key beside it", dest, nil, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		pgURL := testservers.SharedPostgres(t)
		dest := testservers.NewDatabase(t, pgURL)
		refused(t, "PostgreSQL without --secret-key-file", dest, "--secret-key-file")
		refused(t, "PostgreSQL under another key", dest, "key "+b.ID(), "--secret-key-file", bPath)
		accepted(t, "PostgreSQL with the source's key", dest, []string{"--secret-key-file", aPath}, []string{"--secret-key-file", aPath})
	})
}

// copyFile copies the file at from to a new file at to, mode 0600.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if d, _ := os.ReadFile(to); !bytes.Equal(d, data) {
		t.Fatal("copy differs")
	}
}
