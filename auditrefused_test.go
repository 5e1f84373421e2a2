package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestAuditEveryRequest: every request to login and password change has
// one audit line, those refused before a password is checked included
// (400, 413, 415, a capacity 503, a dead token), whose outcome is its
// reply's code; a login's username is not logged before it is known to
// name a user (issue 19, point 8). Before, these requests had none.
func TestAuditEveryRequest(t *testing.T) {
	var logged syncBuffer
	e := newTestEnvConfig(t, slog.New(slog.NewTextHandler(&logged, nil)), func(c *serveConfig) {
		c.tokenTTL = time.Hour
		c.passwordSlots, c.passwordQueue = 1, 0
	})
	tok := e.login("alice")
	for _, tt := range []struct {
		name, path, body string
		header           []string
		code             int
		want             string // the audit line, from msg on, without request_id
	}{
		{"login, malformed", "/api/auth/login/", `{"username":`, []string{jsonCT}, 400, `msg=login outcome=invalid_request username=(unknown) client=192.0.2.1`},
		{"login, password as username", "/api/auth/login/", `{"username":"hunter2 secret!","password":""}`, []string{jsonCT}, 400, `msg=login outcome=invalid_request username=(unknown) client=192.0.2.1`},
		{"login, media type", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, []string{"Content-Type: text/plain"}, 415, `msg=login outcome=unsupported_media_type username=(unknown)`},
		{"login, too large", "/api/auth/login/", `{"username":"alice","password":"` + strings.Repeat("x", 20000) + `"}`, []string{jsonCT}, 413, `msg=login outcome=request_too_large username=(unknown)`},
		{"password change, dead token", "/api/auth/password/", changeBody("alice-pw", newPassphrase), []string{jsonCT, "Authorization: Token " + strings.Repeat("0", 40)}, 401, `msg="password change" outcome=invalid_token username=(unknown)`},
		{"password change, malformed", "/api/auth/password/", `{"current_password":`, []string{jsonCT, "Authorization: Token " + tok}, 400, `msg="password change" outcome=invalid_request username=alice`},
	} {
		before := len(logged.String())
		if w := e.do("POST", tt.path, tt.body, tt.header...); w.Code != tt.code {
			t.Errorf("%s = %d %s; want %d", tt.name, w.Code, w.Body, tt.code)
		}
		lines := strings.Split(strings.TrimSpace(logged.String()[before:]), "\n")
		var audit []string
		for _, l := range lines {
			if strings.Contains(l, "msg=login ") || strings.Contains(l, `msg="password change"`) {
				audit = append(audit, l)
			}
		}
		if len(audit) != 1 || !strings.Contains(audit[0], tt.want) {
			t.Errorf("%s: audit lines %q; want one with %q", tt.name, audit, tt.want)
		}
		if strings.Contains(logged.String()[before:], "hunter2") {
			t.Errorf("%s: the log holds what was sent as a username: %q", tt.name, logged.String()[before:])
		}
	}

	// At capacity: the one slot is taken.
	release, err := e.deps.Guard.Admission.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	before := len(logged.String())
	if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT); w.Code != 503 {
		t.Errorf("login at capacity = %d %s; want 503", w.Code, w.Body)
	}
	if got := logged.String()[before:]; strings.Count(got, "msg=login ") != 1 || !strings.Contains(got, "msg=login outcome=unavailable username=(unknown)") {
		t.Errorf("login at capacity: log %q; want one audit line with outcome=unavailable", got)
	}
}
