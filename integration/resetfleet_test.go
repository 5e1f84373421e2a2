package integration

import (
	"authsvc/integration/harness"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// TestResetFleet: a password reset link across two instances that share a
// directory (API.md, "Password reset"), on a users file and on PostgreSQL
// with a shared Redis: a link the CLI prints is confirmed on B at once (B
// reads the record under the directory's lock, whatever its copy); a
// weak password does not spend it and a superseded link is refused; the
// confirm ends the session and the personal access token made on A
// before it (B at once, A within the store's bound where they share
// Redis, the directory's otherwise); the new password logs in on A, the
// old one no more; the used link is refused on both; a user with a second
// factor still gets mfa_required after a reset.
func TestResetFleet(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	harness.RequireBinary(t)
	for _, tc := range []struct {
		name string
		// directory returns the --users value and the store's flags.
		directory func(t *testing.T, dir string) (string, []string)
		shared    bool // the instances share a token store (else each has its memory store)
	}{
		{"users file", func(_ *testing.T, dir string) (string, []string) { return filepath.Join(dir, "users.json"), nil }, false},
		{"postgres+redis", func(t *testing.T, _ string) (string, []string) {
			pgURL := testservers.SharedPostgres(t)
			redisURL, _, _ := testservers.Redis(t)
			return testservers.NewDatabase(t, pgURL), []string{"--store", redisURL, "--store-prefix", testservers.UniquePrefix()}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			usersArg, store := tc.directory(t, dir)
			harness.WriteKeyFile(t, filepath.Join(dir, "fleet.key"))
			for _, name := range []string{"alice", "bob"} {
				harness.AddUser(t, usersArg, name, name+"-reset-fleet-passphrase")
			}
			args := append([]string{"--users", usersArg, "--secret-key-file", filepath.Join(dir, "fleet.key"), "--cost", "4"}, store...)
			a, b := startPATServer(t, "A", args), startPATServer(t, "B", args)
			bound := directoryBound
			if tc.shared {
				bound = storeBound
			}
			r := resetFleet{a: a, b: b, users: usersArg, bound: bound}
			r.testConfirm(t)
			r.testSecondFactor(t)
		})
	}
}

// A resetFleet is the two instances of TestResetFleet, their directory,
// and how soon a death on B reaches A.
type resetFleet struct {
	a, b  *patServer
	users string
	bound time.Duration
}

// resetLink runs `authsvc user reset-link` for username and returns the
// link's uid and token, checking their form: the username in base64url,
// 32 bytes in base64url, the default pattern {uid}/{token}.
func (f resetFleet) resetLink(t *testing.T, username string) (uid, token string) {
	t.Helper()
	code, stdout, stderr := harness.RunBinary(t, "", nil, "user", "reset-link", "--users", f.users, username)
	uid, token, ok := strings.Cut(strings.TrimSuffix(stdout, "\n"), "/")
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if code != 0 || !ok || uid != base64.RawURLEncoding.EncodeToString([]byte(username)) || err != nil || len(raw) != 32 {
		t.Fatalf("authsvc user reset-link %s = exit %d, stdout %q, stderr %q; want exit 0 and {uid}/{token} on stdout", username, code, stdout, stderr)
	}
	return uid, token
}

// confirm sends a reset confirm to s and returns the reply.
func confirm(t *testing.T, s *patServer, uid, token, password string) harness.Reply {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"uid": uid, "token": token, "new_password": password})
	return harness.Do(t, "POST", s.base()+"/api/auth/password/reset/confirm/", "", string(body))
}

// wantConfirm sends a reset confirm to s and wants status (and code, for
// an error).
func wantConfirm(t *testing.T, what string, s *patServer, uid, token, password string, status int, code string) {
	t.Helper()
	if r := confirm(t, s, uid, token, password); r.Status != status || r.Code() != code {
		t.Fatalf("%s: POST /api/auth/password/reset/confirm/ on %s = %v; want %d %s", what, s.name, r, status, code)
	}
}

// refusedWithin polls s with token until it answers 401 invalid_token,
// and fails t after bound (and the grace); bound 0 is at once: the first
// answer.
func refusedWithin(t *testing.T, what string, s *patServer, token string, since time.Time, bound time.Duration) {
	t.Helper()
	for {
		r := harness.Do(t, "GET", s.base()+"/api/auth/info", token, "")
		if r.Status == 401 && r.Code() == "invalid_token" {
			t.Logf("%s: refused by %s %v after the confirm (bound %v)", what, s.name, time.Since(since).Round(time.Millisecond), bound)
			return
		}
		if bound == 0 || time.Since(since) > bound+grace {
			t.Fatalf("%s on %s: GET /api/auth/info = %v %v after the confirm; want 401 invalid_token within %v", what, s.name, r, time.Since(since).Round(time.Millisecond), bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// loginReply logs username in on s with password.
func loginReply(t *testing.T, s *patServer, username, password string) harness.Reply {
	t.Helper()
	return harness.Do(t, "POST", s.base()+"/api/auth/login/", "", fmt.Sprintf(`{"username":%q,"password":%q}`, username, password))
}

// waitLoginOutcome logs username in on s with password until the reply
// has status and code, and fails t after the directory's bound.
func waitLoginOutcome(t *testing.T, what string, s *patServer, username, password string, status int, code string) {
	t.Helper()
	start := time.Now()
	for {
		r := loginReply(t, s, username, password)
		if r.Status == status && r.Code() == code {
			return
		}
		if time.Since(start) > directoryBound+grace {
			t.Fatalf("%s: login of %s on %s = %v %v on; want %d %s within %v", what, username, s.name, r, time.Since(start).Round(time.Millisecond), status, code, directoryBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testConfirm: alice's link, printed by the CLI, confirmed on B.
func (f resetFleet) testConfirm(t *testing.T) {
	oldPW, newPW := "alice-reset-fleet-passphrase", "alice-reset-fleet-new-one"
	sessA := harness.WaitLogin(t, f.a.base(), "alice", oldPW)
	pat := mintPAT(t, f.a, sessA, `{"name":"ci","password":"`+oldPW+`"}`)

	uid, older := f.resetLink(t, "alice")
	_, token := f.resetLink(t, "alice")
	wantConfirm(t, "a link superseded by a newer one", f.b, uid, older, newPW, 400, "invalid_token")
	wantConfirm(t, "the live link with a weak password", f.b, uid, token, "short", 400, "weak_password")
	harness.WantInfo(t, "A, after a refused confirm, with alice's session", f.a.base(), sessA, aliceInfo)
	wantConfirm(t, "the link the CLI printed, on B at once, after a weak password", f.b, uid, token, newPW, 204, "")
	done := time.Now()

	refusedWithin(t, "alice's session from A", f.b, sessA, done, 0)
	refusedWithin(t, "alice's personal access token from A", f.b, pat.Token, done, 0)
	refusedWithin(t, "alice's session from A", f.a, sessA, done, f.bound)
	refusedWithin(t, "alice's personal access token from A", f.a, pat.Token, done, f.bound)

	harness.TokenOf(t, "alice on B with the new password", loginReply(t, f.b, "alice", newPW))
	if r := loginReply(t, f.b, "alice", oldPW); r.Status != 401 || r.Code() != "invalid_credentials" {
		t.Errorf("login of alice on B with the old password, after the confirm = %v; want 401 invalid_credentials", r)
	}
	waitLoginOutcome(t, "the new password", f.a, "alice", newPW, 200, "")
	waitLoginOutcome(t, "the old password", f.a, "alice", oldPW, 401, "invalid_credentials")

	for _, s := range []*patServer{f.b, f.a} {
		wantConfirm(t, "the used link", s, uid, token, "alice-reset-fleet-third-one", 400, "invalid_token")
	}
	harness.TokenOf(t, "alice on A with the new password, after the used link", loginReply(t, f.a, "alice", newPW))
}

// testSecondFactor: bob, with an authenticator enrolled on A, resets his
// password on B: the next login, on either, still asks for a code.
func (f resetFleet) testSecondFactor(t *testing.T) {
	oldPW, newPW := "bob-reset-fleet-passphrase", "bob-reset-fleet-new-one"
	sess := harness.WaitLogin(t, f.a.base(), "bob", oldPW)
	st, enrol := harness.MFACall(t, "POST", f.a.base()+"/api/auth/mfa/totp/", sess, `{"password":"`+oldPW+`"}`)
	secret, _ := enrol["secret"].(string)
	if st != 200 || secret == "" {
		t.Fatalf("POST /api/auth/mfa/totp/ on A = %d %v; want 200 with a secret", st, enrol)
	}
	st, body := harness.MFACall(t, "POST", f.a.base()+"/api/auth/mfa/totp/confirm/", sess, `{"code":"`+harness.TOTPCode(t, secret, time.Now())+`"}`)
	if st != 200 {
		t.Fatalf("POST /api/auth/mfa/totp/confirm/ on A = %d %v; want 200", st, body)
	}
	uid, token := f.resetLink(t, "bob")
	wantConfirm(t, "bob's link, with a second factor", f.b, uid, token, newPW, 204, "")
	if r := loginReply(t, f.b, "bob", newPW); r.Status != 401 || r.Code() != "mfa_required" || !strings.Contains(r.Body, "mfa_token") {
		t.Errorf("login of bob on B with the new password, after the reset = %v; want 401 mfa_required with an mfa_token (second factors stay)", r)
	}
	waitLoginOutcome(t, "bob's new password, second factor kept", f.a, "bob", newPW, 401, "mfa_required")
}
