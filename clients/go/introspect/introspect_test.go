package introspect

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/integration/harness"
	"authsvc/internal/cli"
	"authsvc/internal/password"
	"authsvc/internal/servertest"
)

// TestMain lets the test binary be the hasher pool's worker, as the
// server binary is: the in-process authsvc starts "os.Executable()
// hash-worker".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == password.WorkerCommand {
		os.Exit(cli.ExitStatus(password.RunWorker(os.Stdin, os.Stdout), os.Stderr))
	}
	os.Exit(m.Run())
}

// An authsvc is a real authsvc, run in-process, with alice (group dev),
// bob (admin) and svc (the service account whose personal access token
// the middleware presents); each password is the username + "-pw".
type authsvc struct {
	base    string
	service string // svc's token with the introspect scope

	// Every token the tests made, and the log every middleware writes:
	// no token may be in it.
	mu     sync.Mutex
	tokens []string
	log    servertest.SyncBuffer
}

func startAuthsvc(t *testing.T) *authsvc {
	t.Helper()
	users := filepath.Join(t.TempDir(), "users.json")
	harness.AddUser(t, users, "alice", "alice-pw", "--group", "dev")
	harness.AddUser(t, users, "bob", "bob-pw", "--admin")
	harness.AddUser(t, users, "svc", "svc-pw")
	base, _, stop := harness.StartServer(t, nil, "--users", users, "--cost", "4")
	// Stopped before t.TempDir's removal: it writes the users file's
	// neighbours (the cut-offs file) until it has stopped.
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("authsvc serve: %v", err)
		}
	})
	a := &authsvc{base: base}
	a.service, _ = a.mint(t, "svc", "introspect")
	t.Cleanup(func() {
		log := a.log.String()
		for _, tok := range a.tokens {
			if strings.Contains(log, tok) {
				t.Errorf("the middleware's log holds a token:\n%s", log)
			}
		}
	})
	return a
}

// keep records tokens for the log check.
func (a *authsvc) keep(tokens ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tokens = append(a.tokens, tokens...)
}

// login returns a new session of user.
func (a *authsvc) login(t *testing.T, user string) string {
	t.Helper()
	tok := harness.TokenOf(t, "login "+user, harness.Login(t, a.base, user))
	a.keep(tok)
	return tok
}

// A minted token is POST /api/auth/tokens/'s reply.
type minted struct {
	Token, ID            string
	CreatedAt, ExpiresAt time.Time `json:"-"`
	Created              string    `json:"created_at"`
	Expires              string    `json:"expires_at"`
}

// mint returns a new personal access token of user with scopes, and its
// id (mintReply).
func (a *authsvc) mint(t *testing.T, user string, scopes ...string) (token, id string) {
	t.Helper()
	m := a.mintReply(t, user, scopes...)
	return m.Token, m.ID
}

// mintReply makes a personal access token of user with scopes as its
// user makes one: POST /api/auth/tokens/ with a session and the password.
func (a *authsvc) mintReply(t *testing.T, user string, scopes ...string) minted {
	t.Helper()
	session := a.login(t, user)
	body, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("%s %v %d", t.Name(), scopes, time.Now().UnixNano()),
		"scopes": scopes, "password": user + "-pw"})
	r := harness.Do(t, "POST", a.base+"/api/auth/tokens/", session, string(body))
	var m minted
	if err := json.Unmarshal([]byte(r.Body), &m); r.Status != http.StatusCreated || err != nil {
		t.Fatalf("POST /api/auth/tokens/ as %s = %v; want 201", user, r)
	}
	a.keep(m.Token)
	var err1, err2 error
	m.CreatedAt, err1 = time.Parse(time.RFC3339, m.Created)
	m.ExpiresAt, err2 = time.Parse(time.RFC3339, m.Expires)
	if err1 != nil || err2 != nil {
		t.Fatalf("POST /api/auth/tokens/ = %v: created_at, expires_at not RFC 3339", r)
	}
	return m
}

// revoke revokes user's personal access token id.
func (a *authsvc) revoke(t *testing.T, user, id string) {
	t.Helper()
	r := harness.Do(t, "DELETE", a.base+"/api/auth/tokens/"+id, a.login(t, user), "")
	if r.Status != http.StatusNoContent {
		t.Fatalf("DELETE /api/auth/tokens/%s = %v; want 204", id, r)
	}
}

// logout ends a session.
func (a *authsvc) logout(t *testing.T, session string) {
	t.Helper()
	if r := harness.Do(t, "POST", a.base+"/api/auth/logout/", session, ""); r.Status != http.StatusNoContent {
		t.Fatalf("logout = %v; want 204", r)
	}
}

// A countingTransport is the default transport, counting the requests
// it sends.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// A service is a Middleware in front of a handler that records the Info
// it got.
type service struct {
	m       *Middleware
	h       http.Handler
	asked   *countingTransport
	mu      sync.Mutex
	got     *Info
	reached int
}

// newService returns a service behind a Middleware of cfg, its URL,
// Token and Logger filled from a unless set.
func (a *authsvc) newService(t *testing.T, cfg Config) *service {
	t.Helper()
	cfg.URL = cmpOr(cfg.URL, a.base)
	cfg.Token = cmpOr(cfg.Token, a.service)
	cfg.Logger = slog.New(slog.NewTextHandler(&a.log, nil))
	s := &service{asked: new(countingTransport)}
	cfg.Client = &http.Client{Transport: s.asked}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	s.m = m
	s.h = m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, ok := FromContext(r.Context())
		if !ok {
			t.Errorf("FromContext in the wrapped handler = _, false")
		}
		s.mu.Lock()
		s.got, s.reached = info, s.reached+1
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	return s
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// call sends a request with the authorization headers given and returns
// the reply; reached says whether the wrapped handler ran.
func (s *service) call(authorization ...string) (rec *httptest.ResponseRecorder, info *Info, reached bool) {
	req := httptest.NewRequest("GET", "/things", nil)
	for _, v := range authorization {
		req.Header.Add("Authorization", v)
	}
	rec = httptest.NewRecorder()
	s.mu.Lock()
	before := s.reached
	s.got = nil
	s.mu.Unlock()
	s.h.ServeHTTP(rec, req)
	s.mu.Lock()
	defer s.mu.Unlock()
	return rec, s.got, s.reached > before
}

// wantRefused fails t unless rec is a refusal with status and code and
// the handler did not run.
func wantRefused(t *testing.T, what string, rec *httptest.ResponseRecorder, reached bool, status int, code string) {
	t.Helper()
	var body struct{ Detail, Code string }
	json.Unmarshal(rec.Body.Bytes(), &body)
	if rec.Code != status || body.Code != code || body.Detail == "" || reached {
		t.Errorf("%s: %d %s (handler ran: %v); want %d with code %q, the handler not run",
			what, rec.Code, strings.TrimSpace(rec.Body.String()), reached, status, code)
	}
}

func TestMiddleware(t *testing.T) {
	a := startAuthsvc(t)

	t.Run("session", func(t *testing.T) {
		t.Parallel()
		s := a.newService(t, Config{})
		start := time.Now().Truncate(time.Second)
		tok := a.login(t, "alice")
		for _, scheme := range []string{"Token ", "Bearer ", "bearer\t ", "TOKEN  "} {
			rec, info, reached := s.call(scheme + tok)
			if rec.Code != http.StatusOK || !reached {
				t.Fatalf("%q: %d %s; want 200", scheme, rec.Code, rec.Body)
			}
			want := Info{Username: "alice", Groups: []string{"dev"}, TokenType: "session"}
			if info.Username != want.Username || !slices.Equal(info.Groups, want.Groups) || info.Admin ||
				info.TokenType != want.TokenType || info.Scopes != nil {
				t.Errorf("%q: Info = %+v; want %+v", scheme, info, want)
			}
			// authsvc's default --token-ttl: 24h.
			if info.IssuedAt.Before(start) || info.Expires.Sub(info.IssuedAt) != 24*time.Hour {
				t.Errorf("%q: IssuedAt, Expires = %v, %v; want from %v, 24h apart", scheme, info.IssuedAt, info.Expires, start)
			}
		}
	})

	t.Run("pat", func(t *testing.T) {
		t.Parallel()
		s := a.newService(t, Config{})
		m := a.mintReply(t, "bob", "info", "admin")
		rec, info, _ := s.call("Bearer " + m.Token)
		if rec.Code != http.StatusOK {
			t.Fatalf("a personal access token with info: %d %s; want 200", rec.Code, rec.Body)
		}
		if info.Username != "bob" || !info.Admin || info.TokenType != "pat" ||
			!slices.Equal(info.Scopes, []string{"admin", "info"}) && !slices.Equal(info.Scopes, []string{"info", "admin"}) ||
			!info.HasScope("admin") || info.HasScope("introspect") {
			t.Errorf("Info = %+v; want bob's, admin, a pat with scopes info and admin", info)
		}
		if !info.IssuedAt.Equal(m.CreatedAt) || !info.Expires.Equal(m.ExpiresAt) {
			t.Errorf("IssuedAt, Expires = %v, %v; want created_at, expires_at %v, %v",
				info.IssuedAt, info.Expires, m.CreatedAt, m.ExpiresAt)
		}
	})

	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		s := a.newService(t, Config{})
		session := a.login(t, "alice")
		a.logout(t, session)
		pat, id := a.mint(t, "alice", "info")
		a.revoke(t, "alice", id)
		for _, tc := range []struct {
			name   string
			header []string
			code   string
			asked  bool // whether authsvc is asked
		}{
			{"no header", nil, "not_authenticated", false},
			{"another scheme", []string{"Basic YWxpY2U6YWxpY2UtcHc="}, "not_authenticated", false},
			{"scheme alone", []string{"Token"}, "invalid_token", false},
			{"junk", []string{"Token abc"}, "invalid_token", false},
			{"upper-case session", []string{"Token " + strings.ToUpper(session)}, "invalid_token", false},
			{"bad checksum", []string{"Token " + pat[:len(pat)-1] + flip(pat[len(pat)-1])}, "invalid_token", false},
			{"two tokens", []string{"Token " + session + " " + session}, "invalid_token", false},
			{"two headers", []string{"Token " + pat, "Token " + pat}, "invalid_token", false},
			{"unknown session", []string{"Token 0123456789abcdef0123456789abcdef01234567"}, "invalid_token", true},
			{"unknown pat", []string{"Token authsvc_pat_PgGRVF0sfqfaNmPQwmtNawUr8xbWih0jrUY3"}, "invalid_token", true},
			{"logged-out session", []string{"Token " + session}, "invalid_token", true},
			{"revoked pat", []string{"Bearer " + pat}, "invalid_token", true},
		} {
			before := s.asked.n.Load()
			rec, _, reached := s.call(tc.header...)
			wantRefused(t, tc.name, rec, reached, http.StatusUnauthorized, tc.code)
			challenge := `Bearer realm="authsvc"`
			if tc.code == "invalid_token" {
				challenge += `, error="invalid_token"`
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != challenge {
				t.Errorf("%s: WWW-Authenticate = %q; want %q", tc.name, got, challenge)
			}
			if asked := s.asked.n.Load() > before; asked != tc.asked {
				t.Errorf("%s: authsvc asked = %v; want %v", tc.name, asked, tc.asked)
			}
		}
	})

	t.Run("scope", func(t *testing.T) {
		t.Parallel()
		introspectOnly, _ := a.mint(t, "alice", "introspect")
		info, _ := a.mint(t, "bob", "info")
		admin, _ := a.mint(t, "bob", "admin")
		session := a.login(t, "alice")
		for _, tc := range []struct {
			scope, name, token string
			want               int
		}{
			{"", "introspect pat", introspectOnly, http.StatusForbidden}, // default: info
			{"", "info pat", info, http.StatusOK},
			{"", "session", session, http.StatusOK}, // a session is its user, scopes or not
			{"admin", "info pat", info, http.StatusForbidden},
			{"admin", "admin pat", admin, http.StatusOK},
			{"admin", "session", session, http.StatusOK},
		} {
			s := a.newService(t, Config{Scope: tc.scope})
			rec, _, reached := s.call("Token " + tc.token)
			what := fmt.Sprintf("Scope %q, %s", tc.scope, tc.name)
			if tc.want == http.StatusOK {
				if rec.Code != http.StatusOK || !reached {
					t.Errorf("%s: %d %s; want 200", what, rec.Code, rec.Body)
				}
				continue
			}
			wantRefused(t, what, rec, reached, http.StatusForbidden, "insufficient_scope")
			wantScope := cmpOr(tc.scope, "info")
			if got, want := rec.Header().Get("WWW-Authenticate"), `Bearer realm="authsvc", error="insufficient_scope", scope="`+wantScope+`"`; got != want {
				t.Errorf("%s: WWW-Authenticate = %q; want %q", what, got, want)
			}
		}
	})

	t.Run("group", func(t *testing.T) {
		t.Parallel()
		s := a.newService(t, Config{Group: "dev"})
		if rec, info, _ := s.call("Token " + a.login(t, "alice")); rec.Code != http.StatusOK || !info.InGroup("dev") {
			t.Errorf("alice (dev): %d %s; want 200", rec.Code, rec.Body)
		}
		rec, _, reached := s.call("Token " + a.login(t, "bob"))
		wantRefused(t, "bob (no group)", rec, reached, http.StatusForbidden, "permission_denied")
	})

	t.Run("cache", func(t *testing.T) {
		t.Parallel()
		testCache(t, a)
	})

	t.Run("service token", func(t *testing.T) {
		t.Parallel()
		infoOnly, _ := a.mint(t, "svc", "info")
		revoked, id := a.mint(t, "svc", "introspect")
		a.revoke(t, "svc", id)
		alice := a.login(t, "alice")
		for name, token := range map[string]string{
			"without the introspect scope": infoOnly,
			"revoked":                      revoked,
			"unknown":                      "authsvc_pat_r3hr8Z37ytXGkiQO8A5F4swcNsamvh00CRWZ",
		} {
			s := a.newService(t, Config{Token: token})
			before := len(a.log.String())
			rec, _, reached := s.call("Token " + alice)
			wantRefused(t, "service token "+name, rec, reached, http.StatusServiceUnavailable, "unavailable")
			if got := rec.Header().Get("Retry-After"); got != "1" {
				t.Errorf("service token %s: Retry-After = %q; want 1", name, got)
			}
			if line := a.log.String()[before:]; !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "service's introspection token") {
				t.Errorf("service token %s: log %q; want an error naming the service's token", name, line)
			}
		}
	})
}

// flip returns a base62 character other than c.
func flip(c byte) string {
	if c == 'x' {
		return "y"
	}
	return "x"
}

// testCache: with CacheTTL, a live answer is reused until the TTL (or the
// token's expiry) passes, and a revoked token is refused once it has.
func testCache(t *testing.T, a *authsvc) {
	s := a.newService(t, Config{CacheTTL: 30 * time.Second})
	now := time.Now()
	var clock sync.Mutex
	s.m.now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }

	session := a.login(t, "alice")
	pat, id := a.mint(t, "alice", "info")
	for _, tok := range []string{session, pat} {
		for range 3 {
			if rec, _, _ := s.call("Token " + tok); rec.Code != http.StatusOK {
				t.Fatalf("a live token: %d %s; want 200", rec.Code, rec.Body)
			}
		}
	}
	if n := s.asked.n.Load(); n != 2 {
		t.Errorf("authsvc asked %d times for 6 requests of 2 tokens; want 2", n)
	}
	a.logout(t, session)
	a.revoke(t, "alice", id)
	advance(29 * time.Second)
	for _, tok := range []string{session, pat} {
		if rec, info, _ := s.call("Token " + tok); rec.Code != http.StatusOK || info.Username != "alice" {
			t.Errorf("revoked %s within CacheTTL: %d %s; want 200, the cached answer", info.TokenType, rec.Code, rec.Body)
		}
	}
	advance(time.Second)
	for _, tok := range []string{session, pat} {
		rec, _, reached := s.call("Token " + tok)
		wantRefused(t, "a revoked token once CacheTTL passed", rec, reached, http.StatusUnauthorized, "invalid_token")
	}
	// A refusal is not cached: each asks again.
	before := s.asked.n.Load()
	s.call("Token " + session)
	if s.asked.n.Load() != before+1 {
		t.Errorf("a refused token's second request did not ask authsvc")
	}

	// Never past the token's own expiry: a 48h TTL, a 24h session.
	long := a.newService(t, Config{CacheTTL: 48 * time.Hour})
	long.m.now = s.m.now
	fresh := a.login(t, "alice")
	long.call("Token " + fresh)
	advance(24*time.Hour + time.Second)
	before = long.asked.n.Load()
	long.call("Token " + fresh) // authsvc's clock has not moved: still live there
	if long.asked.n.Load() != before+1 {
		t.Errorf("a cached answer was used past the token's expiry")
	}
}

// TestUnavailable: whatever keeps authsvc from answering is 503 with
// Retry-After, never the handler.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		return "http://" + l.Addr().String()
	}()
	// A listener that never answers: a hung authsvc.
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Close() })
	stub := func(status int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	for _, tc := range []struct{ name, url string }{
		{"connection refused", closed},
		{"hung", "http://" + hung.Addr().String()},
		{"500", stub(500, `{"detail":"A server error occurred.","code":"internal_error"}`)},
		{"503", stub(503, `{"detail":"Service unavailable.","code":"unavailable"}`)},
		{"502 from a proxy", stub(502, "<html>Bad Gateway</html>")},
		{"200 not introspection's", stub(200, `{"username":"mallory"}`)},
		{"200 active without a username", stub(200, `{"active":true,"token_type":"pat"}`)},
		{"200 over 64 KiB", stub(200, `{"active":true,"token_type":"session","username":"mallory","x":"`+strings.Repeat("x", 70000)+`"}`)},
		{"302", stub(302, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var log servertest.SyncBuffer
			m, err := New(Config{URL: tc.url, Token: "authsvc_pat_fKwJ6dguP2CTJsFEFyHnRPZNSIcDHR2i6iww",
				Timeout: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			reached := false
			h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
			req := httptest.NewRequest("GET", "/", nil)
			session := "0123456789abcdef0123456789abcdef01234567"
			req.Header.Set("Authorization", "Token "+session)
			rec := httptest.NewRecorder()
			start := time.Now()
			h.ServeHTTP(rec, req)
			wantRefused(t, tc.name, rec, reached, http.StatusServiceUnavailable, "unavailable")
			if got := rec.Header().Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After = %q; want 1", got)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v; want about the 300ms Timeout at most", d)
			}
			if l := log.String(); !strings.Contains(l, "level=WARN") || strings.Contains(l, session) || strings.Contains(l, "authsvc_pat_") {
				t.Errorf("log %q; want a warning without a token", l)
			}
		})
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	good := "authsvc_pat_fKwJ6dguP2CTJsFEFyHnRPZNSIcDHR2i6iww"
	for _, cfg := range []Config{
		{Token: good},
		{URL: "ftp://127.0.0.1", Token: good},
		{URL: "http://", Token: good},
		{URL: "http://u:p@127.0.0.1", Token: good},
		{URL: "http://127.0.0.1?x=1", Token: good},
		{URL: "http://127.0.0.1"},
		{URL: "http://127.0.0.1", Token: "0123456789abcdef0123456789abcdef01234567"}, // a session
		{URL: "http://127.0.0.1", Token: good[:len(good)-1] + "x"},
		{URL: "http://127.0.0.1", Token: good, CacheTTL: -time.Second},
	} {
		_, err := New(cfg)
		if err == nil {
			t.Errorf("New(%+v) = _, nil; want an error", cfg)
		} else if strings.Contains(err.Error(), good[12:]) {
			t.Errorf("New(%+v) = %v; want an error that does not quote the token", cfg, err)
		}
	}
	m, err := New(Config{URL: "https://sso.example.com/auth/", Token: good})
	if err != nil || m.endpoint != "https://sso.example.com/auth/api/auth/introspect/" || m.scope != "info" || m.timeout != 2*time.Second || m.cache != nil {
		t.Errorf("New(a prefix URL) = %+v, %v; want the endpoint under the prefix and the defaults", m, err)
	}
}
