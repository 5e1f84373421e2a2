package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/servertest"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// patReply is the create reply of POST /api/auth/tokens/.
type patReply struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Token      string     `json:"token"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	Prefix     string     `json:"prefix"`
}

// mintPAT mints a personal access token for username (password
// username+"-pw") with session and the body's other fields (extra: JSON
// members, without braces), failing the test unless it gets 201.
func (e *testEnv) mintPAT(username, session, extra string) patReply {
	e.t.Helper()
	body := `{"password":"` + username + `-pw"`
	if extra != "" {
		body += "," + extra
	}
	w := e.mfaDo("POST", "/api/auth/tokens/", session, body+"}")
	if w.Code != http.StatusCreated {
		e.t.Fatalf("POST /api/auth/tokens/ %s = %d %s; want 201", body, w.Code, w.Body)
	}
	var r patReply
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// listPATs returns GET /api/auth/tokens/'s list for session (query: "" or "?username=…").
func (e *testEnv) listPATs(session, query string) []patReply {
	e.t.Helper()
	w := e.mfaDo("GET", "/api/auth/tokens/"+query, session, "")
	if w.Code != http.StatusOK {
		e.t.Fatalf("GET /api/auth/tokens/%s = %d %s; want 200", query, w.Code, w.Body)
	}
	var r struct{ Tokens []patReply }
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		e.t.Fatal(err)
	}
	if strings.Contains(w.Body.String(), `"token"`) {
		e.t.Errorf("GET /api/auth/tokens/ = %s; a listing never carries a token", w.Body)
	}
	return r.Tokens
}

// TestPATCreateErrors: every refusal of POST /api/auth/tokens/ in API.md,
// through the real handler and users file; none of them makes a token.
func TestPATCreateErrors(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	alice := e.login("alice")
	pat := e.mintPAT("alice", alice, `"name":"first"`).Token
	now := e.clock.Now()
	at := func(d time.Duration) string { return now.Add(d).UTC().Format(time.RFC3339) }
	tests := []struct {
		name, auth, contentType, body string
		status                        int
		code                          string
	}{
		{"no token", "", jsonCT, `{"name":"x","password":"alice-pw"}`, 401, "not_authenticated"},
		{"dead session", "Token 0123456789abcdef0123456789abcdef01234567", jsonCT, `{"name":"x","password":"alice-pw"}`, 401, "invalid_token"},
		{"a personal access token", "Token " + pat, jsonCT, `{"name":"x","password":"alice-pw"}`, 403, "insufficient_scope"},
		{"form body", "Token " + alice, "Content-Type: application/x-www-form-urlencoded", `name=x&password=alice-pw`, 415, "unsupported_media_type"},
		{"17 KiB", "Token " + alice, jsonCT, `{"name":"x","password":"alice-pw","code":"` + strings.Repeat("1", 17<<10) + `"}`, 413, "request_too_large"},
		{"no password", "Token " + alice, jsonCT, `{"name":"x"}`, 400, "invalid_request"},
		{"not JSON", "Token " + alice, jsonCT, `{"name":`, 400, "invalid_request"},
		{"no name", "Token " + alice, jsonCT, `{"password":"alice-pw"}`, 400, "invalid_request"},
		{"name too long", "Token " + alice, jsonCT, `{"name":"` + strings.Repeat("é", 101) + `","password":"alice-pw"}`, 400, "invalid_request"},
		{"name with a control character", "Token " + alice, jsonCT, `{"name":"a\u0007b","password":"alice-pw"}`, 400, "invalid_request"},
		{"unknown scope", "Token " + alice, jsonCT, `{"name":"x","scopes":["info","write"],"password":"alice-pw"}`, 400, "invalid_request"},
		{"scopes not a list", "Token " + alice, jsonCT, `{"name":"x","scopes":"info","password":"alice-pw"}`, 400, "invalid_request"},
		{"no scope", "Token " + alice, jsonCT, `{"name":"x","scopes":[],"password":"alice-pw"}`, 400, "invalid_request"},
		{"expiry past", "Token " + alice, jsonCT, `{"name":"x","expires_at":"` + at(-time.Hour) + `","password":"alice-pw"}`, 400, "invalid_request"},
		{"expiry beyond the maximum", "Token " + alice, jsonCT, `{"name":"x","expires_at":"` + at(367*24*time.Hour) + `","password":"alice-pw"}`, 400, "invalid_request"},
		{"expiry not a time", "Token " + alice, jsonCT, `{"name":"x","expires_at":"next week","password":"alice-pw"}`, 400, "invalid_request"},
		{"admin scope, not an admin", "Token " + alice, jsonCT, `{"name":"x","scopes":["admin"],"password":"alice-pw"}`, 403, "permission_denied"},
		{"wrong password", "Token " + alice, jsonCT, `{"name":"x","password":"wrong"}`, 401, "invalid_credentials"},
		{"duplicate name", "Token " + alice, jsonCT, `{"name":"first","password":"alice-pw"}`, 409, "conflict"},
	}
	for _, tt := range tests {
		header := []string{}
		if tt.contentType != "" {
			header = append(header, tt.contentType)
		}
		if tt.auth != "" {
			header = append(header, "Authorization: "+tt.auth)
		}
		w := e.do("POST", "/api/auth/tokens/", tt.body, header...)
		if w.Code != tt.status || errorCode(t, w) != tt.code {
			t.Errorf("%s: POST /api/auth/tokens/ = %d %s; want %d %s", tt.name, w.Code, w.Body, tt.status, tt.code)
		}
		if strings.Contains(w.Body.String(), "alice-pw") {
			t.Errorf("%s: the reply %s echoes the password", tt.name, w.Body)
		}
	}
	if got := e.listPATs(alice, ""); len(got) != 1 {
		t.Errorf("after the refusals alice has %d tokens; want 1", len(got))
	}
}

// TestPATLife: a personal access token is made with a session and the
// password, is stored only as its SHA-256, opens what its scopes name and
// nothing else, survives what ends sessions only, and dies when revoked,
// expired, or when its user is disabled, deleted or given a password by
// an operator; dead stays dead.
func TestPATLife(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	alice := e.login("alice")
	created := e.mintPAT("alice", alice, `"name":"ci-deploy","scopes":["info"],"expires_at":"`+e.clock.Now().Add(48*time.Hour).UTC().Format(time.RFC3339)+`"`)
	if !tokens.ValidPAT(created.Token) || created.Name != "ci-deploy" || len(created.Scopes) != 1 || created.LastUsedAt != nil ||
		!created.ExpiresAt.Equal(e.clock.Now().Add(48*time.Hour).Truncate(time.Second)) {
		t.Fatalf("create = %+v; want a valid token named ci-deploy, scope info, expiring in 48 h, never used", created)
	}
	file, err := os.ReadFile(e.usersPath)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte(created.Token))
	if strings.Contains(string(file), created.Token) || strings.Contains(string(file), created.Token[12:42]) ||
		!strings.Contains(string(file), hex.EncodeToString(digest[:])) {
		t.Fatalf("users file holds the token or lacks its SHA-256:\n%s", file)
	}
	pat := created.Token
	// Its scope: info, as alice, with either scheme.
	for _, scheme := range []string{"Token ", "Bearer "} {
		w := e.do("GET", "/api/auth/info", "", "Authorization: "+scheme+pat)
		if w.Code != 200 || reply(t, w)["username"] != "alice" {
			t.Fatalf("info with %s<pat> = %d %s; want 200 alice", scheme, w.Code, w.Body)
		}
	}
	// Nothing else.
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/auth/logout/", ""}, {"POST", "/api/auth/logoutall/", ""},
		{"POST", "/api/auth/password/", `{"current_password":"alice-pw","new_password":"` + newPassphrase + `"}`},
		{"GET", "/api/auth/sessions/", ""}, {"GET", "/api/auth/mfa/", ""}, {"POST", "/api/auth/mfa/totp/", `{"password":"alice-pw"}`},
		{"GET", "/api/auth/tokens/", ""}, {"DELETE", "/api/auth/tokens/" + created.ID, ""},
		{"POST", "/api/auth/introspect/", `{"token":"` + alice + `"}`},
	} {
		if w := e.mfaDo(c.method, c.path, pat, c.body); w.Code != 403 || errorCode(t, w) != "insufficient_scope" {
			t.Errorf("%s %s with a token of scope info = %d %s; want 403 insufficient_scope", c.method, c.path, w.Code, w.Body)
		}
	}
	// A checksum that fails is refused before any lookup; so is one off by a character.
	bad := pat[:len(pat)-1] + map[bool]string{true: "A", false: "B"}[pat[len(pat)-1] != 'A']
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+bad); w.Code != 401 || errorCode(t, w) != "invalid_token" {
		t.Errorf("info with a token whose checksum fails = %d %s; want 401 invalid_token", w.Code, w.Body)
	}
	// What ends sessions only: logout, logoutall, user logout, the user's own password change.
	if w := e.mfaDo("POST", "/api/auth/logoutall/", alice, ""); w.Code != 204 {
		t.Fatalf("logoutall = %d", w.Code)
	}
	if err := users.Logout(context.Background(), e.users, "alice"); err != nil {
		t.Fatal(err)
	}
	alice = e.login("alice")
	if w := e.mfaDo("POST", "/api/auth/password/", alice, changeBody("alice-pw", newPassphrase)); w.Code != 200 {
		t.Fatalf("own password change = %d %s", w.Code, w.Body)
	}
	if got := e.infoStatus(pat); got != 200 {
		t.Fatalf("after logoutall, user logout and the user's own password change, info with the token = %d; want 200", got)
	}
	// An operator's password: dead, and dead stays dead.
	if err := users.SetPassword(context.Background(), e.users, "alice", servertest.TestUsers(t)[0].PasswordHash); err != nil {
		t.Fatal(err)
	}
	if got := e.infoStatus(pat); got != 401 {
		t.Errorf("after user passwd, info with the token = %d; want 401", got)
	}
}

// TestPATDeaths: revoke (by the owner, by an admin), disable (enable
// brings none back), delete, expiry.
func TestPATDeaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		kill func(e *testEnv, p patReply) error
	}{
		{"revoked", func(e *testEnv, p patReply) error {
			if w := e.mfaDo("DELETE", "/api/auth/tokens/"+p.ID, e.login("alice"), ""); w.Code != 204 {
				t.Errorf("DELETE = %d %s; want 204", w.Code, w.Body)
			}
			if w := e.mfaDo("DELETE", "/api/auth/tokens/"+p.ID, e.login("alice"), ""); w.Code != 404 || errorCode(t, w) != "not_found" {
				t.Errorf("DELETE again = %d %s; want 404 not_found", w.Code, w.Body)
			}
			return nil
		}},
		{"revoked by an admin", func(e *testEnv, p patReply) error {
			if w := e.mfaDo("DELETE", "/api/auth/tokens/"+p.ID, e.login("bob"), ""); w.Code != 404 {
				t.Errorf("an admin's DELETE of another's id without ?username= = %d; want 404", w.Code)
			}
			if w := e.mfaDo("DELETE", "/api/auth/tokens/"+p.ID+"?username=alice", e.login("bob"), ""); w.Code != 204 {
				t.Errorf("an admin's DELETE ?username=alice = %d %s; want 204", w.Code, w.Body)
			}
			return nil
		}},
		{"disabled, then enabled", func(e *testEnv, p patReply) error {
			if err := users.Disable(ctx, e.users, "alice"); err != nil {
				return err
			}
			return users.Enable(ctx, e.users, "alice")
		}},
		{"deleted", func(e *testEnv, p patReply) error { return e.users.Delete(ctx, "alice") }},
		{"expired", func(e *testEnv, p patReply) error { e.clock.Advance(2 * time.Hour); return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, httpapi.TokenPolicy{TTL: 24 * time.Hour})
			p := e.mintPAT("alice", e.login("alice"), `"name":"n","expires_at":"`+e.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"`)
			if got := e.infoStatus(p.Token); got != 200 {
				t.Fatalf("info with a new token = %d; want 200", got)
			}
			if err := tt.kill(e, p); err != nil {
				t.Fatal(err)
			}
			if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+p.Token); w.Code != 401 || errorCode(t, w) != "invalid_token" {
				t.Errorf("info after %s = %d %s; want 401 invalid_token", tt.name, w.Code, w.Body)
			}
		})
	}
}

// TestPATList: live tokens, newest first, with their prefix and never
// the token; an admin lists another user's; a use shows as last_used_at.
func TestPATList(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: 24 * time.Hour})
	alice := e.login("alice")
	first := e.mintPAT("alice", alice, `"name":"first","scopes":["info","introspect"]`)
	e.clock.Advance(time.Minute)
	second := e.mintPAT("alice", alice, `"name":"second","expires_at":"`+e.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"`)
	got := e.listPATs(alice, "")
	if len(got) != 2 || got[0].ID != second.ID || got[1].ID != first.ID {
		t.Fatalf("list = %+v; want second, first", got)
	}
	if got[1].Prefix != first.Token[:16] || got[1].Name != "first" || len(got[1].Scopes) != 2 || got[1].LastUsedAt != nil {
		t.Errorf("list[1] = %+v; want first, prefix %s, two scopes, never used", got[1], first.Token[:16])
	}
	e.clock.Advance(time.Minute)
	if s := e.infoStatus(first.Token); s != 200 {
		t.Fatalf("info = %d", s)
	}
	got = e.listPATs(alice, "")
	if got[1].LastUsedAt == nil || !got[1].LastUsedAt.Equal(e.clock.Now().Truncate(time.Second)) {
		t.Errorf("after a use, last_used_at = %v; want %v", got[1].LastUsedAt, e.clock.Now())
	}
	if err := e.deps.AccessTokenUses.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	stored, err := users.AccessTokens(context.Background(), e.users, "alice")
	if err != nil || len(stored) != 2 {
		t.Fatalf("AccessTokens(alice) = %v, %v", stored, err)
	}
	for _, s := range stored {
		if s.ID == first.ID && !s.LastUsedAt.Equal(e.clock.Now()) {
			t.Errorf("after a flush the users file's last_used_at = %v; want %v", s.LastUsedAt, e.clock.Now())
		}
	}
	e.clock.Advance(2 * time.Hour) // second expires
	if got := e.listPATs(alice, ""); len(got) != 1 || got[0].ID != first.ID {
		t.Errorf("after second expired, list = %+v; want first alone", got)
	}
	if got := e.listPATs(e.login("bob"), "?username=alice"); len(got) != 1 {
		t.Errorf("an admin's list of alice = %d tokens; want 1", len(got))
	}
	if w := e.mfaDo("GET", "/api/auth/tokens/?username=bob", e.login("alice"), ""); w.Code != 403 {
		t.Errorf("a non-admin's list of bob = %d; want 403", w.Code)
	}
}

// TestPATNeedsSecondFactor: a user with a second factor mints a token only
// with a code of it; without one the answer is 401 mfa_required with no
// mfa_token, so a token is never a way around the second factor.
func TestPATNeedsSecondFactor(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: 24 * time.Hour})
	secret32, _ := e.enrol("alice", e.login("alice"))
	w := e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+e.mfaToken("alice")+`","code":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
	if w.Code != 200 {
		t.Fatalf("second step = %d %s", w.Code, w.Body)
	}
	session, _ := reply(t, w)["token"].(string)
	e.clock.Advance(30 * time.Second)
	w = e.mfaDo("POST", "/api/auth/tokens/", session, `{"name":"x","password":"alice-pw"}`)
	if body := reply(t, w); w.Code != 401 || body["code"] != "mfa_required" || body["mfa_token"] != nil {
		t.Errorf("create without a code = %d %s; want 401 mfa_required without an mfa_token", w.Code, w.Body)
	}
	w = e.mfaDo("POST", "/api/auth/tokens/", session, `{"name":"x","password":"alice-pw","code":"000000"}`)
	if w.Code != 401 || errorCode(t, w) != "invalid_credentials" {
		t.Errorf("create with a wrong code = %d %s; want 401 invalid_credentials", w.Code, w.Body)
	}
	code := totpCode(t, secret32, e.clock.Now())
	p := e.mintPAT("alice", session, `"name":"x","code":"`+code+`"`)
	if e.infoStatus(p.Token) != 200 {
		t.Errorf("the token minted with a code does not open info")
	}
	if w := e.mfaDo("POST", "/api/auth/tokens/", session, `{"name":"y","password":"alice-pw","code":"`+code+`"}`); w.Code != 401 {
		t.Errorf("create with a code already used = %d %s; want 401", w.Code, w.Body)
	}
}

// TestIntrospect: RFC 7662 through the real handler: the caller needs the
// introspect scope; live tokens are described, anything else is
// {"active":false} and nothing more.
func TestIntrospect(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	bob := e.login("bob")
	caller := e.mintPAT("bob", bob, `"name":"gateway","scopes":["introspect"]`).Token
	infoOnly := e.mintPAT("bob", bob, `"name":"info","scopes":["info"]`).Token
	alice := e.login("alice")
	alicePAT := e.mintPAT("alice", alice, `"name":"cron","scopes":["info","introspect"]`)
	revoked := e.mintPAT("alice", alice, `"name":"gone"`)
	if w := e.mfaDo("DELETE", "/api/auth/tokens/"+revoked.ID, alice, ""); w.Code != 204 {
		t.Fatal(w.Code)
	}
	ask := func(auth, contentType, body string) *httptest.ResponseRecorder {
		return e.do("POST", "/api/auth/introspect/", body, "Authorization: Token "+auth, "Content-Type: "+contentType)
	}
	// Refusals of the caller.
	for _, c := range []struct {
		name, auth, ct, body string
		status               int
		code                 string
	}{
		{"a session", bob, "application/x-www-form-urlencoded", "token=" + alice, 403, "insufficient_scope"},
		{"a token without the scope", infoOnly, "application/x-www-form-urlencoded", "token=" + alice, 403, "insufficient_scope"},
		{"a dead caller", revoked.Token, "application/x-www-form-urlencoded", "token=" + alice, 401, "invalid_token"},
		{"no token asked", caller, "application/x-www-form-urlencoded", "other=1", 400, "invalid_request"},
		{"empty JSON", caller, "application/json", `{}`, 400, "invalid_request"},
		{"text", caller, "text/plain", "token=" + alice, 415, "unsupported_media_type"},
		{"17 KiB", caller, "application/x-www-form-urlencoded", "token=" + strings.Repeat("a", 17<<10), 413, "request_too_large"},
	} {
		if w := ask(c.auth, c.ct, c.body); w.Code != c.status || errorCode(t, w) != c.code {
			t.Errorf("introspect by %s = %d %s; want %d %s", c.name, w.Code, w.Body, c.status, c.code)
		}
	}
	// A live session, by form and by JSON.
	for _, c := range []struct{ ct, body string }{{"application/x-www-form-urlencoded", "token=" + alice}, {"application/json", `{"token":"` + alice + `"}`}} {
		w := ask(caller, c.ct, c.body)
		got := reply(t, w)
		if w.Code != 200 || got["active"] != true || got["token_type"] != "session" || got["username"] != "alice" || got["sub"] != "alice" ||
			got["admin"] != false || got["iat"] != float64(e.clock.Now().Unix()) || got["exp"] != float64(e.clock.Now().Add(time.Hour).Unix()) || got["scope"] != nil {
			t.Errorf("introspect a session (%s) = %d %s; want active, session, alice, iat now, exp in an hour", c.ct, w.Code, w.Body)
		}
		if groups, _ := got["groups"].([]any); len(groups) != 1 || groups[0] != "dev" {
			t.Errorf("introspect a session: groups = %v; want [dev]", got["groups"])
		}
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("introspect: Cache-Control = %q; want no-store", w.Header().Get("Cache-Control"))
		}
	}
	// A live personal access token; the introspection is a use of it.
	e.clock.Advance(time.Minute)
	w := ask(caller, "application/x-www-form-urlencoded", "token="+alicePAT.Token)
	got := reply(t, w)
	if w.Code != 200 || got["active"] != true || got["token_type"] != "pat" || got["scope"] != "info introspect" ||
		got["exp"] != float64(alicePAT.ExpiresAt.Unix()) || got["iat"] != float64(alicePAT.CreatedAt.Unix()) {
		t.Errorf("introspect a personal access token = %d %s; want active pat, scope \"info introspect\"", w.Code, w.Body)
	}
	for _, p := range e.listPATs(alice, "") {
		if p.ID == alicePAT.ID && (p.LastUsedAt == nil || !p.LastUsedAt.Equal(e.clock.Now().Truncate(time.Second))) {
			t.Errorf("after an introspection, its last_used_at = %v; want %v", p.LastUsedAt, e.clock.Now())
		}
	}
	// Everything else: {"active":false}, byte for byte.
	badSum := alicePAT.Token[:len(alicePAT.Token)-1] + map[bool]string{true: "A", false: "B"}[alicePAT.Token[len(alicePAT.Token)-1] != 'A']
	for name, tok := range map[string]string{
		"unknown session": "0123456789abcdef0123456789abcdef01234567", "malformed": "not-a-token",
		"bad checksum": badSum, "revoked": revoked.Token, "made up": strings.Repeat("z", 40),
	} {
		w := ask(caller, "application/x-www-form-urlencoded", "token="+tok)
		if w.Code != 200 || w.Body.String() != `{"active":false}` {
			t.Errorf("introspect %s = %d %s; want 200 {\"active\":false}", name, w.Code, w.Body)
		}
	}
	e.clock.Advance(2 * time.Hour) // the session expires
	if w := ask(caller, "application/x-www-form-urlencoded", "token="+alice); w.Body.String() != `{"active":false}` {
		t.Errorf("introspect an expired session = %s; want {\"active\":false}", w.Body)
	}
}

// TestPATAuditAndMetrics: create, refused create and revoke each write an
// audit line, the token never reaches the log, and token checks are
// counted by kind and outcome.
func TestPATAuditAndMetrics(t *testing.T) {
	t.Parallel()
	var logged servertest.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	e := newTestEnvConfig(t, log, func(c *envConfig) { c.tokenTTL = time.Hour })
	alice := e.login("alice")
	p := e.mintPAT("alice", alice, `"name":"audited"`)
	e.mfaDo("POST", "/api/auth/tokens/", alice, `{"name":"x","password":"wrong"}`)
	e.mfaDo("POST", "/api/auth/tokens/", alice, `{"name":"x","scopes":["admin"],"password":"alice-pw"}`)
	e.infoStatus(p.Token)
	e.mfaDo("GET", "/api/auth/logout/", p.Token, "")
	e.mfaDo("POST", "/api/auth/logout/", p.Token, "")
	e.mfaDo("DELETE", "/api/auth/tokens/"+p.ID, alice, "")
	e.infoStatus(p.Token)
	text := logged.String()
	for _, want := range []string{
		`msg="token create" outcome=success username=alice`, "token_id=" + p.ID,
		`msg="token create" outcome=invalid_credentials username=alice`,
		`msg="token create" outcome=permission_denied username=alice`,
		`msg="token revoke" outcome=success by=alice username=alice token_id=` + p.ID,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, p.Token) || strings.Contains(text, p.Token[12:42]) || strings.Contains(text, "alice-pw") {
		t.Errorf("the log holds the token or the password:\n%s", text)
	}
	metrics := e.do("GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`authsvc_token_checks_total{kind="pat",outcome="success"} 1`,
		`authsvc_token_checks_total{kind="pat",outcome="insufficient_scope"} 1`,
		`authsvc_token_checks_total{kind="pat",outcome="invalid_token"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// countingDirectory is the real users file, counting the reads a token
// check may make of it.
type countingDirectory struct {
	*usersfile.Directory
	reads atomic.Int64
}

func (d *countingDirectory) Lookup(ctx context.Context, name string) (*users.Account, error) {
	d.reads.Add(1)
	return d.Directory.Lookup(ctx, name)
}

func (d *countingDirectory) LookupKey(ctx context.Context, k users.Key) ([]users.Match, error) {
	d.reads.Add(1)
	return d.Directory.LookupKey(ctx, k)
}

func (d *countingDirectory) RecheckKey(ctx context.Context, k users.Key) ([]users.Match, error) {
	d.reads.Add(1)
	return d.Directory.RecheckKey(ctx, k)
}

// countingStore is the real memory store, counting look-ups.
type countingStore struct {
	*tokens.MemoryStore
	lookups atomic.Int64
}

func (s *countingStore) Lookup(ctx context.Context, d tokens.Digest, now time.Time) (tokens.Session, error) {
	s.lookups.Add(1)
	return s.MemoryStore.Lookup(ctx, d, now)
}

// TestPATChecksumBeforeLookup: a personal access token whose checksum
// fails, or that is malformed, is refused (401 invalid_token) before the
// directory or the store is read; one whose checksum holds is looked up.
func TestPATChecksumBeforeLookup(t *testing.T) {
	t.Parallel()
	var dir *countingDirectory
	store := &countingStore{MemoryStore: tokens.NewMemoryStore()}
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.store = store
		c.directory = func(f *usersfile.Directory) users.Directory {
			dir = &countingDirectory{Directory: f}
			return dir
		}
	})
	good, _ := tokens.NewPAT()
	last := good[len(good)-1]
	other := byte('0')
	if last == '0' {
		other = '1'
	}
	for name, tok := range map[string]string{
		"checksum off by one character": good[:len(good)-1] + string(other),
		"random part changed":           good[:20] + map[bool]string{true: "a", false: "b"}[good[20] != 'a'] + good[21:],
		"too short":                     good[:len(good)-1],
		"not base62":                    good[:20] + "-" + good[21:],
	} {
		before := dir.reads.Load() + store.lookups.Load()
		w := e.do("GET", "/api/auth/info", "", "Authorization: Bearer "+tok)
		if w.Code != 401 || errorCode(t, w) != "invalid_token" {
			t.Errorf("info with a token whose %s = %d %s; want 401 invalid_token", name, w.Code, w.Body)
		}
		if after := dir.reads.Load() + store.lookups.Load(); after != before {
			t.Errorf("info with a token whose %s read the directory or the store %d times; want none", name, after-before)
		}
	}
	before := dir.reads.Load()
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Bearer "+good); w.Code != 401 {
		t.Errorf("info with an unknown token = %d; want 401", w.Code)
	}
	if dir.reads.Load() == before {
		t.Errorf("info with a well-formed unknown token read nothing; want the directory asked")
	}
}
