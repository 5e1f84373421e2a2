package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/resetmail"
	"authsvc/internal/servertest"
	"authsvc/internal/users"
)

// resetLink makes a reset link of username at the env's clock, as `authsvc
// user reset-link` does, and returns its uid and token.
func (e *testEnv) resetLink(username string, ttl time.Duration) (uid, token string) {
	e.t.Helper()
	uid, token, err := users.NewResetLink(context.Background(), e.users, username, ttl, e.clock.Now())
	if err != nil {
		e.t.Fatalf("NewResetLink(%s) = %v", username, err)
	}
	return uid, token
}

// confirm posts a reset confirm of uid, token and password.
func (e *testEnv) confirm(uid, token, password string) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do("POST", "/api/auth/password/reset/confirm/", `{"uid":"`+uid+`","token":"`+token+`","new_password":"`+password+`"}`, jsonCT)
}

// TestResetConfirm: a link sets the password once; the old sessions and
// personal access tokens die, the new password logs in, and every wrong,
// used, expired or superseded link is 400 invalid_token; a weak password
// does not spend the link.
func TestResetConfirm(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: 24 * time.Hour})
	session := e.login("alice")
	pat := e.mintPAT("alice", session, `"name":"ci"`).Token
	uid, token := e.resetLink("alice", time.Hour)
	if w := e.confirm(uid, token, "short"); w.Code != 400 || errorCode(t, w) != "weak_password" {
		t.Fatalf("confirm with a weak password = %d %s; want 400 weak_password", w.Code, w.Body)
	}
	if w := e.confirm(uid, token, newPassphrase); w.Code != http.StatusNoContent {
		t.Fatalf("confirm after a weak try = %d %s; want 204: a weak password does not spend the link", w.Code, w.Body)
	}
	for name, tok := range map[string]string{"a session": session, "a personal access token": pat} {
		if got := e.infoStatus(tok); got != 401 {
			t.Errorf("after the reset, info with %s = %d; want 401", name, got)
		}
	}
	if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"`+newPassphrase+`"}`, jsonCT); w.Code != 200 {
		t.Errorf("login with the new password = %d %s; want 200", w.Code, w.Body)
	}
	if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT); w.Code != 401 {
		t.Errorf("login with the old password = %d; want 401", w.Code)
	}
	if w := e.confirm(uid, token, "another new passphrase"); w.Code != 400 || errorCode(t, w) != "invalid_token" {
		t.Errorf("the link used again = %d %s; want 400 invalid_token", w.Code, w.Body)
	}

	uidB, tokB := e.resetLink("bob", time.Hour)
	_, live := e.resetLink("bob", time.Hour) // newer: tokB is superseded
	for name, c := range map[string][2]string{
		"superseded":        {uidB, tokB},
		"another user's":    {users.ResetUID("carol"), live},
		"not base64":        {uidB, "!!!"},
		"of no user":        {users.ResetUID("nobody"), live},
		"a uid not base64":  {"%%%", live},
		"a truncated token": {uidB, live[:20]},
	} {
		if w := e.confirm(c[0], c[1], newPassphrase); w.Code != 400 || errorCode(t, w) != "invalid_token" {
			t.Errorf("a %s link = %d %s; want 400 invalid_token", name, w.Code, w.Body)
		}
	}
	e.clock.Advance(2 * time.Hour)
	if w := e.confirm(uidB, live, newPassphrase); w.Code != 400 || errorCode(t, w) != "invalid_token" {
		t.Errorf("an expired link = %d %s; want 400 invalid_token", w.Code, w.Body)
	}
}

// TestResetConfirmRequests: malformed requests are refused before any
// link is judged, and none spends a link.
func TestResetConfirmRequests(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	uid, token := e.resetLink("alice", time.Hour)
	for _, c := range []struct {
		name, ct, body string
		status         int
		code           string
	}{
		{"no token", jsonCT, `{"uid":"` + uid + `","new_password":"` + newPassphrase + `"}`, 400, "invalid_request"},
		{"no password", jsonCT, `{"uid":"` + uid + `","token":"` + token + `"}`, 400, "invalid_request"},
		{"not JSON", jsonCT, `{"uid":`, 400, "invalid_request"},
		{"a form", "Content-Type: application/x-www-form-urlencoded", "uid=" + uid + "&token=" + token, 415, "unsupported_media_type"},
		{"17 KiB", jsonCT, `{"uid":"` + uid + `","token":"` + token + `","new_password":"` + strings.Repeat("a", 17<<10) + `"}`, 413, "request_too_large"},
	} {
		if w := e.do("POST", "/api/auth/password/reset/confirm/", c.body, c.ct); w.Code != c.status || errorCode(t, w) != c.code {
			t.Errorf("%s = %d %s; want %d %s", c.name, w.Code, w.Body, c.status, c.code)
		}
	}
	if w := e.do("GET", "/api/auth/password/reset/confirm/", ""); w.Code != 405 || w.Header().Get("Allow") != "POST" {
		t.Errorf("GET = %d, Allow %q; want 405, Allow POST", w.Code, w.Header().Get("Allow"))
	}
	if w := e.confirm(uid, token, newPassphrase); w.Code != 204 {
		t.Errorf("the link after the refused requests = %d %s; want 204", w.Code, w.Body)
	}
}

// TestResetKeepsFactorsLiftsLockout: a reset keeps the user's second
// factor (the next login still asks for it) and lifts the lockout that
// wrong passwords made; wrong links are throttled per client.
func TestResetKeepsFactorsLiftsLockout(t *testing.T) {
	t.Parallel()
	var logged servertest.SyncBuffer
	e := newTestEnvConfig(t, slog.New(slog.NewTextHandler(&logged, nil)), func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.throttle.UserFailures = 3 // the per-user ceiling: a lockout from every client
	})
	e.enrol("alice", e.login("alice"))
	for range 3 {
		e.do("POST", "/api/auth/login/", `{"username":"alice","password":"wrong"}`, jsonCT)
	}
	if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT); w.Code != 429 {
		t.Fatalf("login after 3 wrong passwords = %d %s; want 429 (the lockout this test lifts)", w.Code, w.Body)
	}
	uid, token := e.resetLink("alice", time.Hour)
	if w := e.confirm(uid, token, newPassphrase); w.Code != 204 {
		t.Fatalf("confirm = %d %s; want 204", w.Code, w.Body)
	}
	w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"`+newPassphrase+`"}`, jsonCT)
	if w.Code != 401 || reply(t, w)["code"] != "mfa_required" {
		t.Errorf("login after the reset = %d %s; want 401 mfa_required: the lockout lifted, the second factor kept", w.Code, w.Body)
	}
	codes := []int{}
	for range 12 {
		codes = append(codes, e.confirm(uid, token, newPassphrase).Code)
	}
	if !slices.Contains(codes, 429) {
		t.Errorf("12 confirms of a spent link answered %v; want 429 among them: wrong links are throttled", codes)
	}
	text := logged.String()
	if !strings.Contains(text, `msg="password reset confirm" outcome=success username=alice`) ||
		!strings.Contains(text, `msg="password reset confirm" outcome=invalid_token`) {
		t.Errorf("the log lacks the confirms' audit lines:\n%s", text)
	}
	if strings.Contains(text, token) || strings.Contains(text, newPassphrase) {
		t.Errorf("the log holds the link or the password:\n%s", text)
	}
}

// newMailEnv is a test env whose reset requests go to a real
// resetmail.Service on its users file, handing messages to out.
func newMailEnv(t testing.TB, change func(c *envConfig), out func(resetmail.Message) bool) *testEnv {
	t.Helper()
	e := newTestEnvConfig(t, nil, change)
	svc := resetmail.New(e.users, resetmail.Config{URL: "{uid}/{token}", TTL: time.Hour, Send: out,
		Render: func(d resetmail.Data) (string, string, error) { return "Reset", d.URL, nil }}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { svc.Close() })
	e.deps.ResetRequester = svc
	e.handler = httpapi.NewServer(e.deps)
	return e
}

// TestResetRequests: asking for a link is 204 for anyone, a known user's
// address or not; the body's errors are 400, 413 and 415; a client that
// asks too often is 429 with Retry-After.
func TestResetRequests(t *testing.T) {
	t.Parallel()
	e := newMailEnv(t, func(c *envConfig) { c.tokenTTL = time.Hour }, func(resetmail.Message) bool { return true })
	for _, c := range []struct {
		name, ct, body string
		status         int
		code           string
	}{
		{"a user's address", jsonCT, `{"email":"alice@example.com"}`, 204, ""},
		{"no one's address", jsonCT, `{"email":"nobody@example.com"}`, 204, ""},
		{"a username", jsonCT, `{"username":"bob"}`, 204, ""},
		{"neither", jsonCT, `{}`, 400, "invalid_request"},
		{"both", jsonCT, `{"email":"alice@example.com","username":"alice"}`, 400, "invalid_request"},
		{"not JSON", jsonCT, `{"email":`, 400, "invalid_request"},
		{"a form", "Content-Type: application/x-www-form-urlencoded", "email=alice%40example.com", 415, "unsupported_media_type"},
		{"17 KiB", jsonCT, `{"email":"` + strings.Repeat("a", 17<<10) + `"}`, 413, "request_too_large"},
	} {
		w := e.do("POST", "/api/auth/password/reset/", c.body, c.ct)
		if w.Code != c.status || c.code != "" && errorCode(t, w) != c.code {
			t.Errorf("%s = %d %s; want %d %s", c.name, w.Code, w.Body, c.status, c.code)
		}
	}
	var last *httptest.ResponseRecorder
	for range 10 {
		last = e.do("POST", "/api/auth/password/reset/", `{"email":"carol@example.com"}`, jsonCT)
	}
	if last.Code != 429 || last.Header().Get("Retry-After") == "" {
		t.Errorf("the 10th request for one address from one client = %d, Retry-After %q; want 429 with Retry-After", last.Code, last.Header().Get("Retry-After"))
	}
}
