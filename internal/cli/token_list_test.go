package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// TestCLITokenLifecycle: create, list, revoke and list again, on a users
// file (TestCLITokenPostgres: the same on PostgreSQL).
func TestCLITokenLifecycle(t *testing.T) {
	t.Parallel()
	testTokenLifecycle(t, filepath.Join(t.TempDir(), "users.json"))
}

// testTokenLifecycle runs token create, list and revoke on the directory
// spec, checking list and user list after each.
func testTokenLifecycle(t *testing.T, spec string) {
	addUser(t, spec, "alice", "a long enough passphrase")
	addUser(t, spec, "bob", "a long enough passphrase")
	addExpiredToken(t, spec, "bob")
	checkTokenTable(t, spec, nil)
	checkTokenCounts(t, spec, map[string]int{"alice": 0, "bob": 0})

	ci, ciID := createToken(t, spec, nil, "--name", "ci", "--scope", "info", "--scope", "introspect", "alice")
	time.Sleep(10 * time.Millisecond) // newest first: their creation times differ
	ops, opsID := createToken(t, spec, nil, "--name", "ops", "--expires", "2h", "bob")
	time.Sleep(10 * time.Millisecond)
	_, deployID := createToken(t, spec, nil, "--name", "deploy", "alice")
	checkTokenCounts(t, spec, map[string]int{"alice": 2, "bob": 1})
	stored := storedToken(t, spec, "alice", ciID)
	checkTokenTable(t, spec, []string{
		deployID + " alice deploy info",
		opsID + " bob ops info",
		ciID + " alice ci info,introspect " + listTime(stored.CreatedAt) + " " + listTime(stored.ExpiresAt) + " - " + ci[:tokens.PATShownPrefix],
	})
	checkTokenTable(t, spec, []string{deployID + " alice deploy", ciID + " alice ci"}, "alice")
	checkTokenTable(t, spec, []string{opsID + " bob ops info"}, "bob")
	if _, stdout, _ := runCLI(t, "", nil, "token", "list", "--users", spec); strings.Contains(stdout, stored.Digest) || strings.Contains(stdout, ops[tokens.PATShownPrefix:]) {
		t.Errorf("token list printed a digest or a token:\n%s", stdout)
	}

	code, stdout, stderr := runCLI(t, "", nil, "token", "revoke", "--users", spec, ciID)
	if want := fmt.Sprintf("revoked personal access token %s (%q) of user %q in ", ciID, "ci", "alice"); code != 0 || !strings.HasPrefix(stdout, want) || stderr != "" {
		t.Errorf("token revoke %s = exit %d, stdout %q, stderr %q; want 0, %q…", ciID, code, stdout, stderr, want)
	}
	checkTokenTable(t, spec, []string{deployID + " alice deploy"}, "alice")
	mustRunCLI(t, "", "token", "revoke", "--users", spec, deployID)
	checkTokenTable(t, spec, nil, "alice")
	checkTokenCounts(t, spec, map[string]int{"alice": 0, "bob": 1})

	// A revoked token stays revoked: a second revoke finds nothing.
	code, stdout, stderr = runCLI(t, "", nil, "token", "revoke", "--users", spec, ciID)
	if want := fmt.Sprintf("authsvc: token revoke: no such personal access token %q\n", ciID); code != 1 || stdout != "" || stderr != want {
		t.Errorf("token revoke %s again = exit %d, stdout %q, stderr %q; want 1, %q", ciID, code, stdout, stderr, want)
	}
}

// addExpiredToken gives username in spec a personal access token that
// expired an hour ago: neither token list nor user list counts it.
func addExpiredToken(t *testing.T, spec, username string) {
	t.Helper()
	dir, done, err := openCLIDirectory(context.Background(), spec, false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	_, digest := tokens.NewPAT()
	now := time.Now().UTC()
	old := users.AccessToken{ID: "0123456789abcdef", Name: "old", Digest: fmt.Sprintf("%x", digest[:]), Prefix: "authsvc_pat_abcd",
		Scopes: []string{"info"}, CreatedAt: now.Add(-48 * time.Hour), ExpiresAt: now.Add(-time.Hour)}
	err = users.Update(context.Background(), dir, username, func(u *users.User) error {
		u.AccessTokens = append(u.AccessTokens, old)
		return nil
	})
	if err != nil {
		t.Fatalf("Update(%s, access_tokens) = %v", username, err)
	}
}

// checkTokenTable fails t unless token list (of the users in args) on
// spec prints its header and then rows, in order, each row's fields
// beginning with the fields of rows[i].
func checkTokenTable(t *testing.T, spec string, rows []string, args ...string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", nil, append([]string{"token", "list", "--users", spec}, args...)...)
	if code != 0 || stderr != "" {
		t.Fatalf("token list %v = exit %d, stderr %q; want 0, nothing on stderr", args, code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	header := regexp.MustCompile(`^ID +USER +NAME +SCOPES +CREATED +EXPIRES +LAST USED +PREFIX$`)
	if !header.MatchString(lines[0]) || len(lines) != 1+len(rows) {
		t.Fatalf("token list %v:\n%s\nwant the header and %d rows: %q", args, stdout, len(rows), rows)
	}
	for i, want := range rows {
		if got := strings.Join(strings.Fields(lines[1+i]), " "); !strings.HasPrefix(got+" ", want+" ") {
			t.Errorf("token list %v: row %d = %q; want it to begin %q", args, i, got, want)
		}
	}
}

// checkTokenCounts fails t unless user list on spec shows, in its TOKENS
// column, want's count for each user.
func checkTokenCounts(t *testing.T, spec string, want map[string]int) {
	t.Helper()
	stdout := mustRunCLI(t, "", "user", "list", "--users", spec)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	col := slices.Index(strings.Fields(lines[0]), "TOKENS")
	if col < 0 {
		t.Fatalf("user list: no TOKENS column:\n%s", stdout)
	}
	got := make(map[string]int)
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		var n int
		fmt.Sscan(f[col], &n)
		got[f[0]] = n
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("user list TOKENS = %v; want %v\n%s", got, want, stdout)
	}
}

// TestCLITokenListArguments: token list takes one USERNAME at most, and
// an unknown one is an error.
func TestCLITokenListArguments(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"alice", "bob"}, 2, `authsvc: token list: unexpected argument "bob"; want at most one USERNAME` + "\n"},
		{[]string{"nobody"}, 1, `authsvc: token list: no user "nobody"` + "\n"},
		{[]string{"--bogus"}, 2, "authsvc: token list: flag provided but not defined: -bogus\n"},
	} {
		code, stdout, stderr := runCLI(t, "", nil, append([]string{"token", "list", "--users", path}, tt.args...)...)
		if code != tt.code || stdout != "" || stderr != tt.want {
			t.Errorf("token list %v = exit %d, stdout %q, stderr %q; want %d, %q", tt.args, code, stdout, stderr, tt.code, tt.want)
		}
	}
}

// TestCLITokenSubcommand: token without a subcommand, or with one it does
// not have, is a usage error naming the ones it has (TestCLIHelp: their
// --help).
func TestCLITokenSubcommand(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ args, want string }{
		{"token", "authsvc: token: missing subcommand (create, list, revoke)\n"},
		{"token mint", `authsvc: token: unknown subcommand "mint" (create, list, revoke)` + "\n"},
		{"token add", `authsvc: token: unknown subcommand "add" (create, list, revoke)` + "\n"},
		{"token create-x", `authsvc: token: unknown subcommand "create-x" (create, list, revoke)` + "\n"},
	} {
		code, stdout, stderr := runCLI(t, "", nil, strings.Fields(tt.args)...)
		if code != 2 || stdout != "" || stderr != tt.want {
			t.Errorf("authsvc %s = exit %d, stdout %q, stderr %q; want 2, %q", tt.args, code, stdout, stderr, tt.want)
		}
	}
}
