package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
)

// TestImportDryRun: `user import --dry-run` writes nothing (no users
// file, lock, row or schema), prints what the import would do, and exits as
// the real run does, with the same lines on stderr (issue 20, point 3).
func TestImportDryRun(t *testing.T) {
	t.Parallel()
	importFixture := func(usersPath string, dryRun bool, extra ...string) (int, string, string) {
		args := append([]string{"user", "import", "--users", usersPath, "--from", "django"}, extra...)
		if dryRun {
			args = append(args, "--dry-run")
		}
		return runCLI(t, "", nil, append(args, djangoFixture)...)
	}
	t.Run("a users file that does not exist", func(t *testing.T) {
		dir := t.TempDir()
		usersPath := filepath.Join(dir, "users.json")
		code, stdout, stderr := importFixture(usersPath, true)
		if code != 0 || importedUsers(stdout, true) != 7 || !strings.HasPrefix(stderr, "authsvc: user import: would create the secret key file ") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("user import --dry-run = exit %d, %q, %q; want 0, would import 7 users, would create the key", code, stdout, stderr)
		}
		if names := servertest.DirNames(t, dir); len(names) != 0 {
			t.Errorf("files after user import --dry-run = %v; want none", names)
		}
	})
	t.Run("a users file", func(t *testing.T) {
		usersPath := writeTestUsers(t)
		before, err := os.ReadFile(usersPath)
		if err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := importFixture(usersPath, true)
		if code != 0 || importedUsers(stdout, true) != 7 || !strings.HasPrefix(stderr, "authsvc: user import: would create the secret key file ") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("user import --dry-run = exit %d, %q, %q; want 0, would import 7 users, would create the key", code, stdout, stderr)
		}
		if after, err := os.ReadFile(usersPath); err != nil || !bytes.Equal(after, before) {
			t.Errorf("users file after user import --dry-run changed (%v)", err)
		}
		if code, stdout, _ := importFixture(usersPath, false); code != 0 || importedUsers(stdout, false) != 7 {
			t.Fatalf("user import = exit %d, %q; want 0, 7 users", code, stdout)
		}
		// Again: every name is taken now. The dry run says so as the real run does, and exits 1 as it does.
		dryCode, dryOut, dryErr := importFixture(usersPath, true)
		code, _, stderr = importFixture(usersPath, false)
		if dryCode != 1 || dryCode != code || dryErr != stderr || strings.Count(dryErr, "left alone") != 7 || importedUsers(dryOut, true) != 0 {
			t.Errorf("user import --dry-run of taken names = exit %d, %q, %q; want the real run's exit %d and stderr %q, and 0 users", dryCode, dryOut, dryErr, code, stderr)
		}
	})
	t.Run("a database no authsvc has set up", func(t *testing.T) {
		pgURL := testservers.SharedPostgres(t)
		url := testservers.NewDatabase(t, pgURL)
		keyPath := filepath.Join(t.TempDir(), "authsvc.key")
		code, stdout, stderr := importFixture(url, true, "--secret-key-file", keyPath)
		if code != 0 || importedUsers(stdout, true) != 7 || stderr != "authsvc: user import: would create the secret key file "+keyPath+"; every later import of these users needs it\n" {
			t.Errorf("user import --dry-run into an empty database = exit %d, %q, %q; want 0, would import 7 users, would create the key", code, stdout, stderr)
		}
		if _, err := os.Stat(keyPath); err == nil {
			t.Errorf("user import --dry-run created the key file")
		}
		if code, _, stderr := importFixture(url, true); code != 2 || !strings.Contains(stderr, "--secret-key-file is needed with PostgreSQL") {
			t.Errorf("user import --dry-run into PostgreSQL without --secret-key-file = exit %d, %q; want 2, the flag named", code, stderr)
		}
		if code, _, stderr := runCLI(t, "", nil, "user", "list", "--users", url); code != 1 || !strings.Contains(stderr, "no authsvc schema") {
			t.Errorf("user list after the dry run = exit %d, %q; want 1, no authsvc schema (the dry run created none)", code, stderr)
		}
	})
}

// importSummaryRE matches user import's summary line.
var importSummaryRE = regexp.MustCompile(`^(dry run: would import|imported) .* into .*: users (\d+) imported, (\d+) updated, (\d+) unchanged, (\d+) skipped; tokens (\d+) imported, (\d+) updated, (\d+) left dead, (\d+) skipped; factors \d+ imported, \d+ updated, \d+ unchanged, \d+ skipped(; nothing written)?\n$`)

// importSummary parses user import's stdout, its one summary line: whether
// it was a dry run, and the users' and tokens' tallies. ok is false when
// stdout is anything else.
func importSummary(stdout string) (dryRun bool, users, tokens importTally, ok bool) {
	m := importSummaryRE.FindStringSubmatch(stdout)
	if m == nil || (m[1] == "imported") == (m[10] != "") {
		return false, users, tokens, false
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return m[10] != "", importTally{imported: n(2), updated: n(3), unchanged: n(4), skipped: n(5)}, importTally{imported: n(6), updated: n(7), dead: n(8), skipped: n(9)}, true
}

// importedUsers is how many users stdout's summary line says an import
// (dry run or not, as dryRun says) imported; -1 when it is no such line.
func importedUsers(stdout string, dryRun bool) int {
	dry, u, _, ok := importSummary(stdout)
	if !ok || dry != dryRun {
		return -1
	}
	return u.imported
}
