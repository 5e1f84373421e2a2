package cli

import (
	"os"
	"strings"
	"testing"

	"authsvc/internal/users/usersfile"
)

// TestCLICheckReadsCutoffs: `user check` validates the cut-offs file as
// the server loads it: a line that is not a record is exit 1, naming it,
// on one line; a record cut short at the end is not an error.
func TestCLICheckReadsCutoffs(t *testing.T) {
	t.Parallel()
	path := writeTestUsers(t)
	mustRunCLI(t, "", "user", "logout", "--users", path, "alice")
	cuts := usersfile.CutoffsPath(path)
	good, err := os.ReadFile(cuts)
	if err != nil {
		t.Fatalf("`user logout` left no cut-offs file: %v", err)
	}
	if err := os.WriteFile(cuts, append(good, `{"username":"bo`...), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := runCLI(t, "", nil, "user", "check", "--users", path); code != 0 || !strings.Contains(stdout, "valid") {
		t.Errorf("user check with a record cut short at the end = exit %d, %q, %q; want 0, valid", code, stdout, stderr)
	}
	if err := os.WriteFile(cuts, append([]byte("{}\n"), good...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "", nil, "user", "check", "--users", path)
	if code != 1 || !strings.Contains(stderr, "users.json.cutoffs: line 1") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("user check with a bad line in the cut-offs file = exit %d, %q; want 1 and one line naming line 1", code, stderr)
	}
}
