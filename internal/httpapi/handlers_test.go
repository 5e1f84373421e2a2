package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/servertest"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"

	"golang.org/x/crypto/bcrypt"
)

func TestLoginErrors(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	long := strings.Repeat("x", 151)
	tests := []struct {
		name   string
		body   string
		header []string
		status int
		code   string
	}{
		{"wrong password", `{"username":"alice","password":"nope"}`, []string{jsonCT}, 401, "invalid_credentials"},
		{"unknown user", `{"username":"mallory","password":"alice-pw"}`, []string{jsonCT}, 401, "invalid_credentials"},
		{"disabled user", `{"username":"carol","password":"carol-pw"}`, []string{jsonCT}, 401, "invalid_credentials"},
		{"password prefix over 72 bytes", `{"username":"alice","password":"alice-pw` + strings.Repeat("y", 70) + `"}`, []string{jsonCT}, 401, "invalid_credentials"},
		{"malformed JSON", `{"username":"alice",`, []string{jsonCT}, 400, "invalid_request"},
		{"not an object", `["alice","alice-pw"]`, []string{jsonCT}, 400, "invalid_request"},
		{"null", `null`, []string{jsonCT}, 400, "invalid_request"},
		{"trailing data", `{"username":"alice","password":"alice-pw"} {}`, []string{jsonCT}, 400, "invalid_request"},
		{"missing password", `{"username":"alice"}`, []string{jsonCT}, 400, "invalid_request"},
		{"missing username", `{"password":"alice-pw"}`, []string{jsonCT}, 400, "invalid_request"},
		{"empty username", `{"username":"","password":"alice-pw"}`, []string{jsonCT}, 400, "invalid_request"},
		{"empty password", `{"username":"alice","password":""}`, []string{jsonCT}, 400, "invalid_request"},
		{"username not a string", `{"username":42,"password":"alice-pw"}`, []string{jsonCT}, 400, "invalid_request"},
		{"password not a string", `{"username":"alice","password":["alice-pw"]}`, []string{jsonCT}, 400, "invalid_request"},
		{"username over 150 bytes", `{"username":"` + long + `","password":"x"}`, []string{jsonCT}, 400, "invalid_request"},
		{"password over 1024 bytes", `{"username":"alice","password":"` + strings.Repeat("p", 1025) + `"}`, []string{jsonCT}, 400, "invalid_request"},
		{"body over 16 KiB", `{"username":"alice","password":"alice-pw","pad":"` + strings.Repeat("z", 16<<10) + `"}`, []string{jsonCT}, 413, "request_too_large"},
		{"no content type", `{"username":"alice","password":"alice-pw"}`, nil, 415, "unsupported_media_type"},
		{"form content type", `username=alice&password=alice-pw`, []string{"Content-Type: application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"text/json", `{"username":"alice","password":"alice-pw"}`, []string{"Content-Type: text/json"}, 415, "unsupported_media_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := e.do("POST", "/api/auth/login/", tt.body, tt.header...)
			if w.Code != tt.status {
				t.Errorf("login status = %d; want %d (body %s)", w.Code, tt.status, w.Body)
			}
			if code := errorCode(t, w); code != tt.code {
				t.Errorf("login code = %q; want %q", code, tt.code)
			}
			if tt.status == 401 && w.Header().Get("WWW-Authenticate") != `Token realm="api"` {
				t.Errorf("WWW-Authenticate = %q; want Token realm=\"api\"", w.Header().Get("WWW-Authenticate"))
			}
			if strings.Contains(w.Body.String(), "-pw") {
				t.Errorf("body %s echoes the password", w.Body)
			}
		})
	}
	if n, _ := e.store.Len(); n != 0 {
		t.Errorf("store holds %d sessions after failed logins; want 0", n)
	}
}

// TestLoginFailuresIdentical: unknown user, disabled user and wrong password
// give byte-identical replies (no enumeration by message).
func TestLoginFailuresIdentical(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	var first *httptest.ResponseRecorder
	for _, body := range []string{
		`{"username":"alice","password":"wrong"}`,
		`{"username":"nobody","password":"wrong"}`,
		`{"username":"carol","password":"carol-pw"}`,
	} {
		w := e.do("POST", "/api/auth/login/", body, jsonCT)
		if first == nil {
			first = w
			continue
		}
		if w.Code != first.Code || w.Body.String() != first.Body.String() {
			t.Errorf("login(%s) = %d %s; want %d %s", body, w.Code, w.Body, first.Code, first.Body)
		}
		for _, h := range []string{"WWW-Authenticate", "Content-Type", "Cache-Control"} {
			if w.Header().Get(h) != first.Header().Get(h) {
				t.Errorf("login(%s) header %s = %q; want %q", body, h, w.Header().Get(h), first.Header().Get(h))
			}
		}
	}
}

func TestLoginSuccess(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		e := newTestEnv(t, httpapi.TokenPolicy{TTL: 2 * time.Hour})
		w := e.do("POST", "/api/auth/login", `{"username":"alice","password":"alice-pw","extra":1}`+" \n", "Content-Type: "+ct)
		if w.Code != http.StatusOK {
			t.Fatalf("login with %q = %d %s; want 200", ct, w.Code, w.Body)
		}
		if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control = %q; want no-store", cc)
		}
		var reply struct {
			Token     string          `json:"token"`
			ExpiresAt *string         `json:"expires_at"`
			User      json.RawMessage `json:"user"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
			t.Fatal(err)
		}
		if _, err := tokens.DigestOf(reply.Token); err != nil {
			t.Errorf("token %q is not 40 lowercase hex", reply.Token)
		}
		if reply.ExpiresAt == nil || *reply.ExpiresAt != "2026-11-22T12:00:00Z" {
			t.Errorf("expires_at = %v; want 2026-11-22T12:00:00Z", reply.ExpiresAt)
		}
		const wantUser = `{"username":"alice","name":"Alice","email":"alice@example.com","groups":["dev"],"admin":false}`
		if string(reply.User) != wantUser {
			t.Errorf("user = %s; want %s", reply.User, wantUser)
		}
		if strings.Contains(w.Body.String(), "$2") {
			t.Errorf("login reply %s contains a hash", w.Body)
		}
	}
}

func TestLoginIssuesDistinctTokens(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{})
	a, b := e.login("alice"), e.login("alice")
	if a == b {
		t.Errorf("two logins gave the same token")
	}
	for _, tok := range []string{a, b} {
		if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok); w.Code != 200 {
			t.Errorf("info with an earlier token = %d; want 200", w.Code)
		}
	}
	w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT)
	if !strings.Contains(w.Body.String(), `"expires_at":null`) {
		t.Errorf("login with ttl 0 = %s; want expires_at null", w.Body)
	}
}

func TestTokenStoredOnlyAsDigest(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	tok := e.login("alice")
	d, _ := tokens.DigestOf(tok)
	listed, err := e.store.List(t.Context(), "alice", e.clock.Now())
	if err != nil || len(listed) != 1 || listed[0].Digest != d {
		t.Fatalf("List(alice) = %d sessions, %v; want the one under digest(token)", len(listed), err)
	}
	for _, s := range listed {
		if k := s.Digest; string(k[:]) == tok || strings.Contains(string(k[:]), tok[:20]) {
			t.Fatalf("store key holds the token")
		}
	}
	if _, err := e.store.Lookup(t.Context(), d, e.clock.Now()); err != nil {
		t.Errorf("Lookup(digest(token)) = %v; want the session", err)
	}
}

func TestInfo(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	alice, bob := e.login("alice"), e.login("bob")
	const aliceInfo = `{"username":"alice","name":"Alice","email":"alice@example.com","groups":["dev"],"admin":false}` + "\n"
	const carolInfo = `{"username":"carol","name":"","email":"","groups":[],"admin":false}` + "\n"
	tests := []struct {
		name   string
		path   string
		header []string
		status int
		code   string // error code, or
		body   string // 200 body
	}{
		{"self, no parameter", "/api/auth/info", []string{"authorization: TOKEN " + alice}, 200, "", aliceInfo},
		{"self, empty parameter", "/api/auth/info?username=", []string{"authorization: Token " + alice}, 200, "", aliceInfo},
		{"self by name, slash variant", "/api/auth/info/?username=alice", []string{"authorization: token " + alice}, 200, "", aliceInfo},
		{"bearer, tab", "/api/auth/info", []string{"authorization: Bearer\t " + alice}, 200, "", aliceInfo},
		{"escaped username", "/api/auth/info?username=%61lice", []string{"authorization: Token " + alice}, 200, "", aliceInfo},
		{"admin asks for other", "/api/auth/info?username=alice", []string{"authorization: Token " + bob}, 200, "", aliceInfo},
		{"admin asks for disabled", "/api/auth/info?username=carol", []string{"authorization: Token " + bob}, 200, "", carolInfo},
		{"admin asks for nobody", "/api/auth/info?username=nobody", []string{"authorization: Token " + bob}, 404, "not_found", ""},
		{"non-admin asks for existing other", "/api/auth/info?username=bob", []string{"authorization: Token " + alice}, 403, "permission_denied", ""},
		{"non-admin asks for nobody", "/api/auth/info?username=nobody", []string{"authorization: Token " + alice}, 403, "permission_denied", ""},
		{"repeated username", "/api/auth/info?username=alice&username=alice", []string{"authorization: Token " + alice}, 400, "invalid_request", ""},
		{"bad escape", "/api/auth/info?username=%zz", []string{"authorization: Token " + alice}, 400, "invalid_request", ""},
		{"no header", "/api/auth/info", nil, 401, "not_authenticated", ""},
		{"basic scheme", "/api/auth/info", []string{"authorization: Basic YWxpY2U6YWxpY2UtcHc="}, 401, "not_authenticated", ""},
		{"jwt scheme", "/api/auth/info", []string{"authorization: JWT " + alice}, 401, "not_authenticated", ""},
		{"scheme only", "/api/auth/info", []string{"authorization: Token"}, 401, "invalid_token", ""},
		{"two tokens", "/api/auth/info", []string{"authorization: Token " + alice + " " + alice}, 401, "invalid_token", ""},
		{"two headers", "/api/auth/info", []string{"authorization: Token " + alice, "authorization: Token " + alice}, 401, "invalid_token", ""},
		{"short token", "/api/auth/info", []string{"authorization: Token " + alice[:39]}, 401, "invalid_token", ""},
		{"uppercase hex", "/api/auth/info", []string{"authorization: Token " + strings.ToUpper(alice)}, 401, "invalid_token", ""},
		{"non-hex", "/api/auth/info", []string{"authorization: Token " + strings.Repeat("g", 40)}, 401, "invalid_token", ""},
		{"unknown token", "/api/auth/info", []string{"authorization: Token " + strings.Repeat("a", 40)}, 401, "invalid_token", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := e.do("GET", tt.path, "", tt.header...)
			if w.Code != tt.status {
				t.Fatalf("GET %s = %d %s; want %d", tt.path, w.Code, w.Body, tt.status)
			}
			if tt.status == 200 {
				if w.Body.String() != tt.body {
					t.Errorf("GET %s body = %s; want %s", tt.path, w.Body, tt.body)
				}
				for h, want := range map[string]string{"Cache-Control": "no-store", "Vary": "Authorization", "Content-Type": "application/json"} {
					if got := w.Header().Get(h); got != want {
						t.Errorf("GET %s header %s = %q; want %q", tt.path, h, got, want)
					}
				}
				return
			}
			if code := errorCode(t, w); code != tt.code {
				t.Errorf("GET %s code = %q; want %q", tt.path, code, tt.code)
			}
			if tt.status == 401 && w.Header().Get("WWW-Authenticate") != `Token realm="api"` {
				t.Errorf("WWW-Authenticate = %q; want Token realm=\"api\"", w.Header().Get("WWW-Authenticate"))
			}
			if strings.Contains(w.Body.String(), alice) || strings.Contains(w.Body.String(), bob) {
				t.Errorf("error body %s echoes a token", w.Body)
			}
		})
	}
}

func TestInfoHead(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	tok := e.login("alice")
	srv := httptest.NewServer(e.handler)
	defer srv.Close()
	req, _ := http.NewRequest("HEAD", srv.URL+"/api/auth/info", nil)
	req.Header.Set("Authorization", "Token "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(body) != 0 {
		t.Errorf("HEAD /api/auth/info = %d with %d body bytes; want 200 and none", resp.StatusCode, len(body))
	}
}

func TestTokenExpiry(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	tok := e.login("alice")
	e.clock.Advance(time.Hour - time.Second)
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok); w.Code != 200 {
		t.Fatalf("info just before expiry = %d; want 200", w.Code)
	}
	e.clock.Advance(time.Second)
	w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok)
	if w.Code != 401 || errorCode(t, w) != "invalid_token" {
		t.Errorf("info at expiry = %d %s; want 401 invalid_token", w.Code, w.Body)
	}
	if n := e.store.Sweep(e.clock.Now()); n != 1 {
		t.Errorf("Sweep() = %d; want 1", n)
	}
}

func TestLogout(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	a1, a2, b := e.login("alice"), e.login("alice"), e.login("bob")
	info := func(tok string) int { return e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok).Code }

	if w := e.do("POST", "/api/auth/logout/", "", "Authorization: Token "+a1); w.Code != 204 || w.Body.Len() != 0 {
		t.Fatalf("logout = %d %q; want 204 and no body", w.Code, w.Body)
	}
	if got := info(a1); got != 401 {
		t.Errorf("info after logout = %d; want 401", got)
	}
	if got := info(a2); got != 200 {
		t.Errorf("info with the user's other token after logout = %d; want 200", got)
	}
	if w := e.do("POST", "/api/auth/logout", "", "Authorization: Token "+a1); w.Code != 401 || errorCode(t, w) != "invalid_token" {
		t.Errorf("second logout = %d %s; want 401 invalid_token", w.Code, w.Body)
	}
	a3 := e.login("alice")
	if w := e.do("POST", "/api/auth/logoutall/", "", "Authorization: Token "+a3); w.Code != 204 {
		t.Fatalf("logoutall = %d %s; want 204", w.Code, w.Body)
	}
	for _, tok := range []string{a2, a3} {
		if got := info(tok); got != 401 {
			t.Errorf("info after logoutall = %d; want 401", got)
		}
	}
	if got := info(b); got != 200 {
		t.Errorf("another user's token after logoutall = %d; want 200", got)
	}
	if w := e.do("POST", "/api/auth/logoutall", ""); w.Code != 401 || errorCode(t, w) != "not_authenticated" {
		t.Errorf("logoutall without a token = %d %s; want 401 not_authenticated", w.Code, w.Body)
	}
}

func TestTokenLimit(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 2})
	first, second, third := e.login("alice"), e.login("alice"), e.login("alice")
	for tok, want := range map[string]int{first: 401, second: 200, third: 200} {
		if got := e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok).Code; got != want {
			t.Errorf("info with token %s… = %d; want %d", tok[:6], got, want)
		}
	}
	if !strings.Contains(e.do("GET", "/metrics", "").Body.String(), `authsvc_sessions_revoked_total{kind="eviction"} 1`+"\n") {
		t.Errorf(`/metrics lacks authsvc_sessions_revoked_total{kind="eviction"} 1`)
	}
}

// TestTokensDieWithUser: deleting, disabling or re-passwording a user
// kills their tokens from the next reload on.
func TestTokensDieWithUser(t *testing.T) {
	t.Parallel()
	newHash, _ := bcrypt.GenerateFromPassword([]byte("new-pw"), servertest.TestCost)
	tests := []struct {
		name   string
		change func(list []users.User) []users.User
	}{
		{"deleted", func(us []users.User) []users.User { return us[1:] }},
		{"disabled", func(us []users.User) []users.User { us[0].Disabled = true; return us }},
		// As user passwd and POST /api/auth/password/ write it: a new hash and a cut-off.
		{"password changed", func(us []users.User) []users.User {
			us[0].PasswordHash, us[0].TokensAfter = string(newHash), time.Now().Add(time.Hour)
			return us
		}},
		{"logged out", func(us []users.User) []users.User { us[0].TokensAfter = time.Now().Add(time.Hour); return us }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
			alice, bob := e.login("alice"), e.login("bob")
			list, err := usersfile.Read(e.usersPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := usersfile.Write(e.usersPath, tt.change(list)); err != nil {
				t.Fatal(err)
			}
			if err := e.users.Reload(context.Background()); err != nil {
				t.Fatal(err)
			}
			if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+alice); w.Code != 401 || errorCode(t, w) != "invalid_token" {
				t.Errorf("info after user %s = %d %s; want 401 invalid_token", tt.name, w.Code, w.Body)
			}
			if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+bob); w.Code != 200 {
				t.Errorf("another user's info after user %s = %d; want 200", tt.name, w.Code)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	tests := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/api/auth/login/", 405, "POST"},
		{"GET", "/api/auth/login", 405, "POST"},
		{"DELETE", "/api/auth/info", 405, "GET, HEAD"},
		{"POST", "/api/auth/info/", 405, "GET, HEAD"},
		{"GET", "/api/auth/logout/", 405, "POST"},
		{"GET", "/api/auth/logoutall", 405, "POST"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"POST", "/api/auth/login/x", 404, ""},
		{"GET", "/api/auth/info/x", 404, ""},
		{"GET", "/api/auth", 404, ""},
		{"GET", "/api/other", 404, ""},
		{"GET", "/", 404, ""},
	}
	for _, tt := range tests {
		w := e.do(tt.method, tt.path, "")
		if w.Code != tt.status {
			t.Errorf("%s %s = %d; want %d", tt.method, tt.path, w.Code, tt.status)
			continue
		}
		want := map[int]string{404: "not_found", 405: "method_not_allowed"}[tt.status]
		if code := errorCode(t, w); code != want {
			t.Errorf("%s %s code = %q; want %q", tt.method, tt.path, code, want)
		}
		if got := w.Header().Get("Allow"); got != tt.allow {
			t.Errorf("%s %s Allow = %q; want %q", tt.method, tt.path, got, tt.allow)
		}
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{})
	for _, path := range []string{"/healthz", "/readyz"} {
		if w := e.do("GET", path, ""); w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("GET %s = %d %s; want 200 JSON", path, w.Code, w.Body)
		}
	}
}

// TestLoginThrottled: after five failures the pair is refused with 429 and
// a growing Retry-After, the right password included, before any bcrypt work.
func TestLoginThrottled(t *testing.T) {
	t.Parallel()
	// One slot, one queue place, a short wait: with the slot held, a request
	// that reached admission would wait 50ms and get 503.
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 1, 50*time.Millisecond
	})
	adm := e.deps.Guard.Admission
	wrong := `{"username":"alice","password":"wrong"}`
	right := `{"username":"alice","password":"alice-pw"}`
	for i := 1; i <= 5; i++ {
		if w := e.do("POST", "/api/auth/login/", wrong, jsonCT); w.Code != 401 {
			t.Fatalf("failed login %d = %d; want 401", i, w.Code)
		}
	}
	// Hold the only bcrypt slot: a request that reached admission would get 503.
	release, err := adm.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	w := e.do("POST", "/api/auth/login/", right, jsonCT)
	if w.Code != 429 || errorCode(t, w) != "throttled" || w.Header().Get("Retry-After") != "1" {
		t.Errorf("login after 5 failures = %d %s Retry-After %q; want 429 throttled, Retry-After 1", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	// Another user from the same address is not throttled by alice's pair;
	// with the slot held it reaches admission and gets 503 after the wait.
	w = e.do("POST", "/api/auth/login/", `{"username":"bob","password":"bob-pw"}`, jsonCT)
	if w.Code != 503 || errorCode(t, w) != "unavailable" || w.Header().Get("Retry-After") == "" {
		t.Errorf("login with bcrypt capacity exhausted = %d %s; want 503 unavailable with Retry-After", w.Code, w.Body)
	}
	release()
	e.clock.Advance(time.Second)
	if w := e.do("POST", "/api/auth/login/", wrong, jsonCT); w.Code != 401 {
		t.Fatalf("failed login after the backoff = %d; want 401", w.Code)
	}
	w = e.do("POST", "/api/auth/login/", right, jsonCT)
	if w.Code != 429 || w.Header().Get("Retry-After") != "2" {
		t.Errorf("login after 6 failures = %d Retry-After %q; want 429, Retry-After 2", w.Code, w.Header().Get("Retry-After"))
	}
	e.clock.Advance(2 * time.Second)
	if w := e.do("POST", "/api/auth/login/", right, jsonCT); w.Code != 200 {
		t.Errorf("right password after the backoff = %d; want 200", w.Code)
	}
	if w := e.do("POST", "/api/auth/login/", right, jsonCT); w.Code != 200 {
		t.Errorf("right password after a success = %d; want 200 (success clears the pair)", w.Code)
	}
}

// TestLoginAtCapacity: with every slot taken and the queue full, a login is
// refused with 503 before its body is decoded — even a malformed one — and
// the tarpit holds the refusal for its delay.
func TestLoginAtCapacity(t *testing.T) {
	t.Parallel()
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 0, time.Second
		c.refusalDelay = 100 * time.Millisecond
	})
	adm := e.deps.Guard.Admission
	release, err := adm.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for _, body := range []string{`{"username":"alice","password":"alice-pw"}`, `not json`} {
		start := time.Now()
		w := e.do("POST", "/api/auth/login/", body, jsonCT)
		if w.Code != 503 || errorCode(t, w) != "unavailable" || w.Header().Get("Retry-After") != "1" {
			t.Errorf("login(%s) at capacity = %d %s; want 503 unavailable, Retry-After 1", body, w.Code, w.Body)
		}
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Errorf("login(%s) at capacity answered after %v; want the tarpit's 100ms", body, d)
		}
	}
}
