package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/users"
)

// listSessions returns the sessions GET /api/auth/sessions/ shows to token.
func (e *testEnv) listSessions(token, query string) []httpapi.SessionReply {
	e.t.Helper()
	w := e.do("GET", "/api/auth/sessions/"+query, "", "Authorization: Token "+token)
	if w.Code != http.StatusOK {
		e.t.Fatalf("GET /api/auth/sessions/%s = %d %s; want 200", query, w.Code, w.Body)
	}
	if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
		e.t.Errorf("GET /api/auth/sessions/ Cache-Control = %q; want no-store", cc)
	}
	var reply struct{ Sessions []httpapi.SessionReply }
	if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
		e.t.Fatal(err)
	}
	return reply.Sessions
}

func TestSessionsList(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	first := e.login("alice")
	e.clock.Advance(time.Minute)
	w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT, "User-Agent: curl/8.5.0")
	var second struct{ Token string }
	json.Unmarshal(w.Body.Bytes(), &second)
	e.login("bob")

	got := e.listSessions(first, "")
	if len(got) != 2 {
		t.Fatalf("alice's sessions = %d; want 2 (bob's are not hers)", len(got))
	}
	newest, oldest := got[0], got[1]
	if !newest.CreatedAt.After(oldest.CreatedAt) {
		t.Errorf("sessions created at %v, %v; want newest first", newest.CreatedAt, oldest.CreatedAt)
	}
	if newest.Current || !oldest.Current {
		t.Errorf("current = %v, %v; want only the presenting (older) token", newest.Current, oldest.Current)
	}
	if newest.UserAgent != "curl/8.5.0" || newest.Client != "192.0.2.1" {
		t.Errorf("newest session client %q, user agent %q; want 192.0.2.1, curl/8.5.0", newest.Client, newest.UserAgent)
	}
	if newest.ExpiresAt == nil || !newest.ExpiresAt.Equal(newest.CreatedAt.Add(time.Hour)) {
		t.Errorf("newest expires_at = %v; want created_at + 1h", newest.ExpiresAt)
	}
	for _, s := range got {
		if strings.Contains(first+second.Token, s.ID.String()) || strings.Contains(s.ID.String(), first[:8]) {
			t.Errorf("session id %s shares characters with a token", s.ID)
		}
		if !s.LastUsedAt.Equal(s.CreatedAt) && s.Current == false {
			t.Errorf("an unused session's last_used_at %v; want created_at %v", s.LastUsedAt, s.CreatedAt)
		}
	}
	// The JSON reply names exactly API.md's fields.
	w = e.do("GET", "/api/auth/sessions", "", "Authorization: Token "+first)
	var raw struct{ Sessions []map[string]any }
	json.Unmarshal(w.Body.Bytes(), &raw)
	for _, field := range []string{"id", "created_at", "last_used_at", "expires_at", "client", "user_agent", "current"} {
		if _, ok := raw.Sessions[0][field]; !ok || len(raw.Sessions[0]) != 7 {
			t.Errorf("session JSON %v; want exactly id, created_at, last_used_at, expires_at, client, user_agent, current", raw.Sessions[0])
			break
		}
	}
}

func TestSessionsUsernameRules(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	alice, bob := e.login("alice"), e.login("bob") // bob is an admin
	aliceID := e.listSessions(alice, "")[0].ID.String()
	for _, tt := range []struct {
		name, method, path, token string
		status                    int
		code                      string
	}{
		{"non-admin lists another user", "GET", "/api/auth/sessions/?username=bob", alice, 403, "permission_denied"},
		{"non-admin lists a missing user", "GET", "/api/auth/sessions/?username=nobody", alice, 403, "permission_denied"},
		{"non-admin ends another's session", "DELETE", "/api/auth/sessions/" + aliceID + "?username=bob", alice, 403, "permission_denied"},
		{"admin lists a missing user", "GET", "/api/auth/sessions/?username=nobody", bob, 404, "not_found"},
		{"no token", "GET", "/api/auth/sessions/", "", 401, "not_authenticated"},
		{"unknown id", "DELETE", "/api/auth/sessions/" + strings.Repeat("0", 32), alice, 404, "not_found"},
		{"malformed id", "DELETE", "/api/auth/sessions/xyz", alice, 404, "not_found"},
		{"another user's id, without ?username=", "DELETE", "/api/auth/sessions/" + aliceID, bob, 404, "not_found"},
		{"GET one session", "GET", "/api/auth/sessions/" + aliceID, alice, 405, "method_not_allowed"},
	} {
		var hdr []string
		if tt.token != "" {
			hdr = append(hdr, "Authorization: Token "+tt.token)
		}
		w := e.do(tt.method, tt.path, "", hdr...)
		if w.Code != tt.status || errorCode(t, w) != tt.code {
			t.Errorf("%s: %s %s = %d %s; want %d %s", tt.name, tt.method, tt.path, w.Code, w.Body, tt.status, tt.code)
		}
		if tt.status == 405 && w.Header().Get("Allow") != "DELETE" {
			t.Errorf("%s: Allow = %q; want DELETE", tt.name, w.Header().Get("Allow"))
		}
	}
	if got := e.listSessions(bob, "?username=alice"); len(got) != 1 || got[0].ID.String() != aliceID || got[0].Current {
		t.Errorf("admin lists alice's sessions = %+v; want her one session, not current", got)
	}
}

func TestSessionsRevoke(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	keep, kill := e.login("alice"), e.login("alice")
	var killID string
	for _, s := range e.listSessions(keep, "") {
		if !s.Current {
			killID = s.ID.String()
		}
	}
	for _, path := range []string{"/api/auth/sessions/" + killID, "/api/auth/sessions/" + killID + "/"} {
		w := e.do("DELETE", path, "", "Authorization: Token "+keep)
		want := 204
		if strings.HasSuffix(path, "/") {
			want = 404 // already ended
		}
		if w.Code != want {
			t.Errorf("DELETE %s = %d %s; want %d", path, w.Code, w.Body, want)
		}
	}
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+kill); w.Code != 401 || errorCode(t, w) != "invalid_token" {
		t.Errorf("info with the revoked session's token = %d %s; want 401 invalid_token", w.Code, w.Body)
	}
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+keep); w.Code != 200 {
		t.Errorf("info with the other token = %d; want 200", w.Code)
	}

	// An admin ends one of alice's sessions: audited, and counted.
	bob := e.login("bob")
	id := e.listSessions(keep, "")[0].ID.String()
	if w := e.do("DELETE", "/api/auth/sessions/"+id+"?username=alice", "", "Authorization: Token "+bob); w.Code != 204 {
		t.Fatalf("admin DELETE alice's session = %d %s; want 204", w.Code, w.Body)
	}
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+keep); w.Code != 401 {
		t.Errorf("info with a token an admin revoked = %d; want 401", w.Code)
	}
	body := e.do("GET", "/metrics", "").Body.String()
	if !strings.Contains(body, `authsvc_sessions_revoked_total{kind="revoke"} 2`) {
		t.Errorf("/metrics lacks authsvc_sessions_revoked_total{kind=\"revoke\"} 2")
	}
}

func TestSessionsUserAgentCut(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	ua := strings.Repeat("a", 255) + "é" + "tail" // é straddles byte 256
	w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT, "User-Agent: "+ua)
	var reply struct{ Token string }
	json.Unmarshal(w.Body.Bytes(), &reply)
	got := e.listSessions(reply.Token, "")[0].UserAgent
	if got != strings.Repeat("a", 255) {
		t.Errorf("user_agent = %d bytes %q…; want the first 255 bytes (cut on a UTF-8 boundary at most 256)", len(got), got[:min(len(got), 10)])
	}
}

// TestTokenIdle: a token unused for --token-idle dies and stays dead; one
// used within the limit never does.
func TestTokenIdle(t *testing.T) {
	t.Parallel()
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL, c.tokenIdle = 24*time.Hour, 40*time.Minute
	})
	info := func(token string) int {
		return e.do("GET", "/api/auth/info", "", "Authorization: Token "+token).Code
	}
	busy, idle := e.login("alice"), e.login("alice")
	// busy is used every 39 minutes for four hours: never refused.
	for range 6 {
		e.clock.Advance(39 * time.Minute)
		if code := info(busy); code != 200 {
			t.Fatalf("a token used every 39 min under a 40 min idle limit = %d; want 200", code)
		}
	}
	// idle was not used for 3.9 h: refused, and dead for good.
	if code := info(idle); code != 401 {
		t.Errorf("a token unused for 3.9 h under a 40 min idle limit = %d; want 401", code)
	}
	e.clock.Advance(-4 * time.Hour) // even if the clock went back
	if code := info(idle); code != 401 {
		t.Errorf("an idle-expired token, later = %d; want 401 (dead stays dead)", code)
	}
	// The lag: refused no later than idle + a quarter of it after the last use.
	e.clock.Advance(4 * time.Hour)
	late := e.login("alice")
	e.clock.Advance(40*time.Minute + 10*time.Minute + time.Second)
	if code := info(late); code != 401 {
		t.Errorf("a token unused for idle + idle/4 = %d; want 401", code)
	}
	if !strings.Contains(e.do("GET", "/metrics", "").Body.String(), `authsvc_sessions_revoked_total{kind="idle"} 2`) {
		t.Errorf("/metrics lacks authsvc_sessions_revoked_total{kind=\"idle\"} 2")
	}
}

// TestSessionsListOmitsDead: a session that is dead but not yet removed
// from the store (issued before its user's cut-off, or unused past the idle
// limit) is not listed; the live ones are.
func TestSessionsListOmitsDead(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		kill func(e *testEnv) // kills every session of alice's issued so far
	}{
		{"issued before the cut-off", func(e *testEnv) {
			e.clock.Advance(time.Second)
			if err := e.users.Update(t.Context(), "alice", func(u *users.User) error {
				u.TokensAfter = e.clock.Now()
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Second)
		}},
		{"unused past the idle limit", func(e *testEnv) { e.clock.Advance(2 * time.Hour) }},
	} {
		e := newTestEnvConfig(t, nil, func(c *envConfig) { c.tokenTTL, c.tokenIdle = 24*time.Hour, time.Hour })
		e.login("alice")
		tt.kill(e)
		live := e.login("alice")
		if got := e.listSessions(live, ""); len(got) != 1 || !got[0].Current {
			t.Errorf("alice's sessions with one %s = %+v; want only the live, current one", tt.name, got)
		}
	}
}
