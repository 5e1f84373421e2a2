package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// waitInfo polls info with token until it answers want, or fails after 5 s
// (API.md: changes reach the server within 5 s).
func waitInfo(t *testing.T, base, token string, want int, why string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := getInfo(t, base, token, "")
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: info = %d %s; want %d within 5 s", why, code, body, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLogin logs in until it succeeds, or fails after 5 s, and returns the token.
func waitLogin(t *testing.T, base, username, password string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, body := postJSON(t, base+"/api/auth/login/", `{"username":"`+username+`","password":"`+password+`"}`)
		if resp.StatusCode == 200 {
			var reply struct{ Token string }
			if err := json.Unmarshal([]byte(body), &reply); err != nil {
				t.Fatal(err)
			}
			return reply.Token
		}
		if time.Now().After(deadline) {
			t.Fatalf("login(%s) = %d %s; want 200 within 5 s", username, resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stillDead checks that token stays 401 over a few reload intervals.
func stillDead(t *testing.T, base, token, why string) {
	t.Helper()
	for range 10 {
		if code, body := getInfo(t, base, token, ""); code != 401 {
			t.Fatalf("%s: info = %d %s; want 401: dead stays dead", why, code, body)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// TestDeadStaysDead: once a token has died, no later change of its user
// brings it back: not enable, not a re-add, not an older users file put
// back; and user logout ends every token of a user.
func TestDeadStaysDead(t *testing.T) {
	t.Parallel()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	base, _, stop := startServer(t, nil, "--users", usersPath, "--reload-interval", "20ms")
	defer stop()
	cli := func(stdin string, args ...string) {
		t.Helper()
		if code, _, stderr := runCLI(t, stdin, nil, append(append([]string{"user"}, args...), "--users", usersPath)...); code != 0 {
			t.Fatalf("authsvc user %v = exit %d, %s", args, code, stderr)
		}
	}

	t.Run("disable then enable", func(t *testing.T) {
		tok := loginToken(t, base, "alice", "alice-pw")
		cli("", "disable", "alice")
		waitInfo(t, base, tok, 401, "after user disable")
		cli("", "enable", "alice")
		stillDead(t, base, tok, "after user enable")
		waitLogin(t, base, "alice", "alice-pw") // alice herself is back
	})

	t.Run("disable and enable between two reloads", func(t *testing.T) {
		tok := waitLogin(t, base, "alice", "alice-pw")
		cli("", "disable", "alice")
		cli("", "enable", "alice")
		waitInfo(t, base, tok, 401, "after disable and enable in a row") // whether or not the server saw alice disabled
		stillDead(t, base, tok, "after disable and enable in a row")
	})

	t.Run("delete then add again", func(t *testing.T) {
		tok := loginToken(t, base, "bob", "bob-pw")
		cli("", "del", "bob")
		waitInfo(t, base, tok, 401, "after user del")
		cli("bob-pw\n", "add", "--admin", "--cost", "4", "bob")
		waitInfo(t, base, waitLogin(t, base, "bob", "bob-pw"), 200, "a new token of the re-added bob")
		stillDead(t, base, tok, "after the same bob is added again")
	})

	t.Run("an older file put back after passwd", func(t *testing.T) {
		tok := waitLogin(t, base, "alice", "alice-pw")
		backup, err := os.ReadFile(usersPath)
		if err != nil {
			t.Fatal(err)
		}
		cli("alice-pw2\n", "passwd", "--cost", "4", "alice")
		waitInfo(t, base, tok, 401, "after user passwd")
		if err := os.WriteFile(usersPath, backup, 0o600); err != nil {
			t.Fatal(err)
		}
		waitInfo(t, base, waitLogin(t, base, "alice", "alice-pw"), 200, "the restored file's password")
		stillDead(t, base, tok, "after the older users file is put back")
	})

	t.Run("user logout", func(t *testing.T) {
		tok1 := waitLogin(t, base, "alice", "alice-pw")
		tok2 := waitLogin(t, base, "alice", "alice-pw")
		cli("", "logout", "alice")
		waitInfo(t, base, tok1, 401, "the first token after user logout")
		waitInfo(t, base, tok2, 401, "the second token after user logout")
		waitInfo(t, base, waitLogin(t, base, "alice", "alice-pw"), 200, "a token issued after user logout")
	})
}

// TestDeadStaysDeadAcrossInstances: two instances share Redis but read
// their own copies of the users file. A token that dies on A (its user
// disabled in A's file, then enabled again) is refused by B at once,
// though B's file never changed.
func TestDeadStaysDeadAcrossInstances(t *testing.T) {
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	dir := t.TempDir()
	pathA, pathB := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	list := testUsers(t)
	for _, p := range []string{pathA, pathB} {
		if err := usersfile.Write(p, list); err != nil {
			t.Fatal(err)
		}
	}
	prefix := testservers.UniquePrefix()
	baseA, _, stopA := startServer(t, nil, "--users", pathA, "--store", redisURL, "--store-prefix", prefix, "--reload-interval", "20ms")
	defer stopA()
	baseB, _, stopB := startServer(t, nil, "--users", pathB, "--store", redisURL, "--store-prefix", prefix, "--reload-interval", "20ms")
	defer stopB()
	tok := loginToken(t, baseA, "alice", "alice-pw")
	waitInfo(t, baseB, tok, 200, "B, before anything happened")
	if code, _, stderr := runCLI(t, "", nil, "user", "disable", "alice", "--users", pathA); code != 0 {
		t.Fatalf("user disable = %d %s", code, stderr)
	}
	waitInfo(t, baseA, tok, 401, "A, after user disable in A's file")
	waitInfo(t, baseB, tok, 401, "B, whose file still has alice enabled")
	if code, _, stderr := runCLI(t, "", nil, "user", "enable", "alice", "--users", pathA); code != 0 {
		t.Fatalf("user enable = %d %s", code, stderr)
	}
	stillDead(t, baseA, tok, "A, after user enable")
	stillDead(t, baseB, tok, "B")
}
