package httpapi_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/throttle"
)

func TestRequestID(t *testing.T) {
	t.Parallel()
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	e := newTestEnvConfig(t, log, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.throttle = throttle.DefaultConfig()
		c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 1, time.Second
	})
	long := strings.Repeat("a", 129)
	tests := []struct {
		incoming string
		keep     bool
	}{
		{"abc-123_X.y", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{long, false},
		{"has space", false},
		{"semi;colon", false},
		{"naïve", false},
	}
	seen := make(map[string]bool)
	for _, tt := range tests {
		logBuf.Reset()
		var hdr []string
		if tt.incoming != "" {
			hdr = []string{"X-Request-Id: " + tt.incoming}
		}
		w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"wrong"}`, append(hdr, jsonCT)...)
		got := w.Header().Get("X-Request-Id")
		if tt.keep && got != tt.incoming {
			t.Errorf("X-Request-Id %q came back as %q; want it kept", tt.incoming, got)
		}
		if !tt.keep && (got == tt.incoming || !requestIDPattern.MatchString(got) || seen[got]) {
			t.Errorf("X-Request-Id %q came back as %q; want a fresh generated id", tt.incoming, got)
		}
		seen[got] = true
		lines := strings.Split(strings.TrimSpace(logBuf.String()), "\n")
		if len(lines) < 2 {
			t.Fatalf("log = %q; want an audit line and an access line", logBuf.String())
		}
		for _, line := range lines {
			if !strings.Contains(line, "request_id="+got) {
				t.Errorf("log line %q does not name request_id=%s", line, got)
			}
		}
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	tok := e.login("alice")
	e.do("POST", "/api/auth/login/", `{"username":"alice","password":"wrong"}`, jsonCT)
	e.do("POST", "/api/auth/login/", `{"username":"alice"}`, jsonCT)
	e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok)
	e.do("GET", "/api/auth/info/", "", "Authorization: Token "+tok)
	e.do("GET", "/api/auth/info", "", "Authorization: Token "+strings.Repeat("0", 40))
	e.do("POST", "/api/auth/logout/", "", "Authorization: Token "+tok)
	w := e.do("GET", "/metrics", "")
	if w.Code != 200 {
		t.Fatalf("GET /metrics = %d; want 200", w.Code)
	}
	body := w.Body.String()
	for _, want := range []string{
		`authsvc_login_total{outcome="success"} 1`,
		`authsvc_login_total{outcome="invalid_credentials"} 1`,
		`authsvc_login_total{outcome="invalid_request"} 1`,
		`authsvc_login_total{outcome="throttled"} 0`,
		`authsvc_info_total{outcome="success"} 2`,
		`authsvc_info_total{outcome="invalid_token"} 1`,
		`authsvc_tokens_issued_total 1`,
		`authsvc_sessions_revoked_total{kind="logout"} 1`,
		`authsvc_live_tokens 0`,
		`authsvc_users_loaded 3`,
		`authsvc_password_checks_running 0`,
		`authsvc_password_checks_waiting 0`,
		`authsvc_bcrypt_running 0`, // deprecated
		`authsvc_bcrypt_waiting 0`, // deprecated
		`authsvc_http_request_duration_seconds_count{route="/api/auth/info"} 3`,
		`authsvc_http_request_duration_seconds_count{route="/api/auth/login"} 3`,
		`authsvc_build_info{goversion="go`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, line := range strings.Split(body, "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		if line != "" && !strings.HasPrefix(name, "authsvc_") {
			t.Errorf("/metrics line %q: API.md wants every metric name to start with authsvc_", line)
			break
		}
	}
	if !strings.Contains(body, "authsvc_go_goroutines ") {
		t.Errorf("/metrics lacks the Go runtime's metrics (authsvc_go_goroutines)")
	}
	for _, secret := range []string{tok, "alice", "192.0.2.1"} {
		if strings.Contains(body, secret) {
			t.Errorf("/metrics contains %q: labels must come from fixed sets", secret)
		}
	}
}

// newTestEnvCORS is newTestEnv with CORS on for origins.
func newTestEnvCORS(t *testing.T, origins ...string) *testEnv {
	return newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.throttle.AddrRate, c.throttle.AddrBurst = 100, 100
		c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 1, time.Second
		c.corsOrigins = origins
	})
}

func TestCORS(t *testing.T) {
	t.Parallel()
	const app = "http://127.0.0.1:3000"
	e := newTestEnvCORS(t, app)
	tok := e.login("alice")

	w := e.do("OPTIONS", "/api/auth/info", "", "Origin: "+app, "Access-Control-Request-Method: GET", "Access-Control-Request-Headers: authorization")
	if w.Code != http.StatusNoContent {
		t.Errorf("preflight from an allowed origin = %d; want 204", w.Code)
	}
	for h, want := range map[string]string{
		"Access-Control-Allow-Origin":  app,
		"Access-Control-Allow-Methods": "GET, POST",
		"Access-Control-Allow-Headers": "Authorization, Content-Type, X-Request-Id",
		"Vary":                         "Origin",
	} {
		if got := w.Header().Get(h); got != want {
			t.Errorf("preflight %s = %q; want %q", h, got, want)
		}
	}
	w = e.do("GET", "/api/auth/info", "", "Origin: "+app, "Authorization: Token "+tok)
	if w.Code != 200 || w.Header().Get("Access-Control-Allow-Origin") != app {
		t.Errorf("info from an allowed origin = %d, ACAO %q; want 200, %q", w.Code, w.Header().Get("Access-Control-Allow-Origin"), app)
	}
	if vary := w.Header().Values("Vary"); !strings.Contains(strings.Join(vary, ","), "Origin") || !strings.Contains(strings.Join(vary, ","), "Authorization") {
		t.Errorf("info Vary = %q; want Origin and Authorization", vary)
	}

	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:3001", "null"} {
		w := e.do("OPTIONS", "/api/auth/info", "", "Origin: "+origin, "Access-Control-Request-Method: GET")
		if got := w.Header().Get("Access-Control-Allow-Origin"); got != "" || w.Code == http.StatusNoContent {
			t.Errorf("preflight from %s = %d, ACAO %q; want no CORS approval", origin, w.Code, got)
		}
		w = e.do("GET", "/api/auth/info", "", "Origin: "+origin, "Authorization: Token "+tok)
		if got := w.Header().Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("info from %s: ACAO %q; want none", origin, got)
		}
	}

	off := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	w = off.do("OPTIONS", "/api/auth/info", "", "Origin: "+app, "Access-Control-Request-Method: GET")
	if got := w.Header().Get("Access-Control-Allow-Origin"); got != "" || w.Code != http.StatusMethodNotAllowed {
		t.Errorf("preflight with CORS off = %d, ACAO %q; want 405 and none", w.Code, got)
	}
}

// requestIDPattern matches the X-Request-Id values the server generates.
var requestIDPattern = regexp.MustCompile(`^[0-9A-Za-z._-]{1,128}$`)
