package faults

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// stillDead checks that token stays 401 over a few reload intervals.
func stillDead(t *testing.T, base, token, why string) {
	t.Helper()
	for range 10 {
		if code, body := servertest.GetInfo(t, base, token, ""); code != 401 {
			t.Fatalf("%s: info = %d %s; want 401: dead stays dead", why, code, body)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// TestDeadStaysDead: once a token has died, no later change of its user
// brings it back: not enable, not a re-add, not an older users file put
// back; and user logout ends every token of a user.
func TestDeadStaysDead(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	base, _, stop := harness.StartServer(t, nil, "--cost", "4", "--users", usersPath, "--reload-interval", "20ms")
	defer stop()
	cli := func(stdin string, args ...string) {
		t.Helper()
		if code, _, stderr := harness.RunCLI(t, stdin, nil, append(append([]string{"user"}, args...), "--users", usersPath)...); code != 0 {
			t.Fatalf("authsvc user %v = exit %d, %s", args, code, stderr)
		}
	}

	t.Run("disable then enable", func(t *testing.T) {
		tok := servertest.LoginToken(t, base, "alice", "alice-pw")
		cli("", "disable", "alice")
		harness.WaitInfo(t, base, tok, 401, "after user disable")
		cli("", "enable", "alice")
		stillDead(t, base, tok, "after user enable")
		harness.WaitLogin(t, base, "alice", "alice-pw") // alice herself is back
	})

	t.Run("disable and enable between two reloads", func(t *testing.T) {
		tok := harness.WaitLogin(t, base, "alice", "alice-pw")
		cli("", "disable", "alice")
		cli("", "enable", "alice")
		harness.WaitInfo(t, base, tok, 401, "after disable and enable in a row") // whether or not the server saw alice disabled
		stillDead(t, base, tok, "after disable and enable in a row")
	})

	t.Run("delete then add again", func(t *testing.T) {
		tok := servertest.LoginToken(t, base, "bob", "bob-pw")
		cli("", "del", "bob")
		harness.WaitInfo(t, base, tok, 401, "after user del")
		cli("bob-pw\n", "add", "--admin", "--cost", "4", "bob")
		harness.WaitInfo(t, base, harness.WaitLogin(t, base, "bob", "bob-pw"), 200, "a new token of the re-added bob")
		stillDead(t, base, tok, "after the same bob is added again")
	})

	t.Run("an older file put back after passwd", func(t *testing.T) {
		tok := harness.WaitLogin(t, base, "alice", "alice-pw")
		backup, err := os.ReadFile(usersPath)
		if err != nil {
			t.Fatal(err)
		}
		cli("alice-pw2\n", "passwd", "--cost", "4", "alice")
		harness.WaitInfo(t, base, tok, 401, "after user passwd")
		if err := os.WriteFile(usersPath, backup, 0o600); err != nil {
			t.Fatal(err)
		}
		harness.WaitInfo(t, base, harness.WaitLogin(t, base, "alice", "alice-pw"), 200, "the restored file's password")
		stillDead(t, base, tok, "after the older users file is put back")
	})

	t.Run("user logout", func(t *testing.T) {
		tok1 := harness.WaitLogin(t, base, "alice", "alice-pw")
		tok2 := harness.WaitLogin(t, base, "alice", "alice-pw")
		cli("", "logout", "alice")
		harness.WaitInfo(t, base, tok1, 401, "the first token after user logout")
		harness.WaitInfo(t, base, tok2, 401, "the second token after user logout")
		harness.WaitInfo(t, base, harness.WaitLogin(t, base, "alice", "alice-pw"), 200, "a token issued after user logout")
	})
}

// TestDeadStaysDeadAcrossInstances: two instances share Redis but read
// their own copies of the users file. A token that dies on A (its user
// disabled in A's file, then enabled again) is refused by B at once,
// though B's file never changed.
func TestDeadStaysDeadAcrossInstances(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	dir := t.TempDir()
	pathA, pathB := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	list := servertest.TestUsers(t)
	for _, p := range []string{pathA, pathB} {
		if err := usersfile.Write(p, list); err != nil {
			t.Fatal(err)
		}
	}
	prefix := testservers.UniquePrefix()
	baseA, _, stopA := harness.StartServer(t, nil, "--cost", "4", "--users", pathA, "--store", redisURL, "--store-prefix", prefix, "--reload-interval", "20ms")
	defer stopA()
	baseB, _, stopB := harness.StartServer(t, nil, "--cost", "4", "--users", pathB, "--store", redisURL, "--store-prefix", prefix, "--reload-interval", "20ms")
	defer stopB()
	tok := servertest.LoginToken(t, baseA, "alice", "alice-pw")
	harness.WaitInfo(t, baseB, tok, 200, "B, before anything happened")
	if code, _, stderr := harness.RunCLI(t, "", nil, "user", "disable", "alice", "--users", pathA); code != 0 {
		t.Fatalf("user disable = %d %s", code, stderr)
	}
	harness.WaitInfo(t, baseA, tok, 401, "A, after user disable in A's file")
	harness.WaitInfo(t, baseB, tok, 401, "B, whose file still has alice enabled")
	if code, _, stderr := harness.RunCLI(t, "", nil, "user", "enable", "alice", "--users", pathA); code != 0 {
		t.Fatalf("user enable = %d %s", code, stderr)
	}
	stillDead(t, baseA, tok, "A, after user enable")
	stillDead(t, baseB, tok, "B")
}
