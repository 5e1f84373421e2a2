package faults

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"authsvc/internal/password/passwordtest"
)

// TestCLIWarnsOfSlowHashes: user check and user import name, on stderr,
// every user whose hash checks far slower than the default policy's (every
// failed login waits as long as the slowest hash in the directory), and
// still succeed (issue 19, point 2). The commands are processes of the
// binary (runBinary): user check loads the file as serve does, hashing a
// dummy as slow as its slowest hash, a second's work that the race
// detector makes a minute.
func TestCLIWarnsOfSlowHashes(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow.json")
	doc := servertest.UsersJSON(servertest.OKAlice,
		servertest.Entry("bob", servertest.HashField("pbkdf2_sha256$4000000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=")),
		servertest.Entry("carol", servertest.HashField("$2a$14"+passwordtest.Hash[6:])))
	if err := os.WriteFile(slow, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := harness.RunBinary(t, "", nil, "user", "check", "--users", slow)
	if code != 0 || !strings.Contains(stdout, "3 users, valid") {
		t.Fatalf("user check = exit %d, %q, %q; want exit 0, valid", code, stdout, stderr)
	}
	for _, want := range []string{`user check: warning: user "bob": its pbkdf2_sha256 hash takes about 0.8 s a check`, `user check: warning: user "carol": its bcrypt hash takes about 0.9 s a check`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("user check stderr = %q; want a line with %q", stderr, want)
		}
	}
	if strings.Contains(stderr, `"alice"`) || strings.Count(stderr, "\n") != 2 {
		t.Errorf("user check stderr = %q; want exactly bob's and carol's warnings", stderr)
	}

	into := filepath.Join(dir, "into.json")
	code, _, stderr = harness.RunBinary(t, "", nil, "user", "import", "--users", into, "--from", "file", slow)
	if code != 0 || !strings.Contains(stderr, `user import: warning: user "bob"`) || !strings.Contains(stderr, `user import: warning: user "carol"`) {
		t.Errorf("user import of slow hashes = exit %d, stderr %q; want exit 0 and a warning naming bob and carol", code, stderr)
	}
	code, _, stderr = harness.RunBinary(t, "", nil, "user", "check", "--users", into)
	if code != 0 || strings.Count(stderr, "warning") != 2 {
		t.Errorf("user check after the import = exit %d, %q; want the same two warnings", code, stderr)
	}
	if code, _, stderr := harness.RunBinary(t, "", nil, "user", "check", "--users", harness.WriteTestUsers(t)); code != 0 || stderr != "" {
		t.Errorf("user check of cheap hashes = exit %d, stderr %q; want no warning", code, stderr)
	}
}
