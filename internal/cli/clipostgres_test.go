package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"authsvc/internal/testservers"
)

// TestCLIPostgresNeverPrintsPassword: every user command against a
// postgres:// URL names the database without the URL's password, on
// stdout and stderr alike, and a connection error is one line (issue 19,
// point 5: user add and user del printed the whole URL).
func TestCLIPostgresNeverPrintsPassword(t *testing.T) {
	t.Parallel()
	pgURL := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, pgURL)
	// The test server trusts local connections: a password in the URL is
	// sent only if asked for, and must never be printed.
	const secret = "S3cret-pass"
	user, rest, _ := strings.Cut(strings.TrimPrefix(db, "postgres://"), "@")
	user, _, _ = strings.Cut(user, ":")
	url := "postgres://" + user + ":" + secret + "@" + rest

	for _, args := range [][]string{
		{"user", "add", "--users", url, "--cost", "4", "alice"},
		{"user", "passwd", "--users", url, "--cost", "4", "alice"},
		{"user", "list", "--users", url},
		{"user", "check", "--users", url},
		{"user", "disable", "--users", url, "alice"},
		{"user", "enable", "--users", url, "alice"},
		{"user", "logout", "--users", url, "alice"},
		{"user", "del", "--users", url, "alice"},
		{"user", "del", "--users", url, "alice"}, // no such user now: an error
	} {
		code, stdout, stderr := runCLI(t, "a long enough passphrase\n", nil, args...)
		call := strings.Join(args, " ")
		if strings.Contains(stdout+stderr, secret) {
			t.Errorf("authsvc %s (exit %d) printed the database password: stdout %q, stderr %q", call, code, stdout, stderr)
		}
		if code == 0 && !strings.Contains(stdout, "postgres://"+user+"@") && args[1] != "list" {
			t.Errorf("authsvc %s: stdout %q; want the database named without its password", call, stdout)
		}
	}

	code, stdout, stderr := runCLI(t, "", nil, "user", "list", "--users", "postgres://"+user+":"+secret+"@127.0.0.1:1/nothing?connect_timeout=2")
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, secret) {
		t.Errorf("user list on a closed port = exit %d, stdout %q, stderr %q; want exit 1, one line without the password", code, stdout, stderr)
	}
}

// TestCLIPostgresReadOnlyCommandsDoNotMigrate: user list and user check on
// a database no authsvc has set up fail, and leave it as it was; a
// command that writes sets it up.
func TestCLIPostgresReadOnlyCommandsDoNotMigrate(t *testing.T) {
	t.Parallel()
	pgURL := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, pgURL)
	tables := func() int {
		t.Helper()
		conn, err := pgx.Connect(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var n int
		if err := conn.QueryRow(context.Background(), `select count(*) from information_schema.tables where table_schema = 'public'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, sub := range []string{"list", "check"} {
		code, _, stderr := runCLI(t, "", nil, "user", sub, "--users", db)
		if code != 1 || strings.Count(stderr, "\n") != 1 {
			t.Errorf("user %s on an empty database = exit %d, stderr %q; want exit 1, one line", sub, code, stderr)
		}
		if n := tables(); n != 0 {
			t.Fatalf("user %s on an empty database left %d tables; want none", sub, n)
		}
	}
	if code, _, stderr := runCLI(t, "a long enough passphrase\n", nil, "user", "add", "--users", db, "--cost", "4", "alice"); code != 0 {
		t.Fatalf("user add = exit %d, %s", code, stderr)
	}
	if code, stdout, stderr := runCLI(t, "", nil, "user", "list", "--users", db); code != 0 || !strings.Contains(stdout, "alice") {
		t.Errorf("user list after user add = exit %d, %q, %q; want alice", code, stdout, stderr)
	}
}
