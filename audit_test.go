package main

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAuditLines: every password check writes one audit line naming its
// event, outcome, user, client and request id; a username that names no
// user is never logged (people type passwords into username fields); a
// request whose credentials were never read writes none; an admin ending
// another user's session is audited too.
func TestAuditLines(t *testing.T) {
	var logged syncBuffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	e := newTestEnvConfig(t, log, func(c *serveConfig) { c.tokenTTL = time.Hour })
	alice, bob := e.login("alice"), e.login("bob")
	aliceSession := e.listSessions(alice, "")[0].ID.String()
	const typedPassword = "correct-horse-battery"
	var all strings.Builder // everything logged
	login := func(username, password string) func() *httptest.ResponseRecorder {
		return func() *httptest.ResponseRecorder {
			return e.do("POST", "/api/auth/login/", `{"username":"`+username+`","password":"`+password+`"}`, jsonCT)
		}
	}
	change := func(current string) func() *httptest.ResponseRecorder {
		return func() *httptest.ResponseRecorder {
			return e.do("POST", "/api/auth/password/", changeBody(current, newPassphrase), jsonCT, "Authorization: Token "+alice)
		}
	}
	for _, tt := range []struct {
		name   string
		before func() // runs before the log is taken
		send   func() *httptest.ResponseRecorder
		want   []string // the audit lines; {id} is the reply's X-Request-Id
	}{
		{"login", nil, login("alice", "alice-pw"),
			[]string{`level=INFO msg=login outcome=success username=alice client=192.0.2.1 request_id={id}`}},
		{"wrong password", nil, login("alice", "wrong"),
			[]string{`level=INFO msg=login outcome=invalid_credentials username=alice client=192.0.2.1 request_id={id}`}},
		{"unknown username", nil, login(typedPassword, "x"),
			[]string{`level=INFO msg=login outcome=invalid_credentials username=(unknown) client=192.0.2.1 request_id={id}`}},
		{"disabled user", nil, login("carol", "carol-pw"),
			[]string{`level=INFO msg=login outcome=invalid_credentials username=carol client=192.0.2.1 request_id={id}`}},
		{"malformed body", nil, func() *httptest.ResponseRecorder {
			return e.do("POST", "/api/auth/login/", `{"username":"alice"}`, jsonCT)
		}, []string{`level=INFO msg=login outcome=invalid_request username=(unknown) client=192.0.2.1 request_id={id}`}}, // every request has one
		{"throttled", func() {
			for range 5 {
				login("bob", "wrong")()
			}
		}, login("bob", "bob-pw"),
			[]string{`level=INFO msg=login outcome=throttled username=bob client=192.0.2.1 request_id={id}`}},
		{"password change, wrong current password", nil, change("wrong"),
			[]string{`level=INFO msg="password change" outcome=invalid_credentials username=alice client=192.0.2.1 request_id={id}`}},
		{"admin ends another user's session", nil, func() *httptest.ResponseRecorder {
			return e.do("DELETE", "/api/auth/sessions/"+aliceSession+"?username=alice", "", "Authorization: Token "+bob)
		}, []string{`level=INFO msg="session revoked" by=bob username=alice session=` + aliceSession + ` request_id={id}`}},
		{"password change", func() { alice = e.login("alice") }, change("alice-pw"),
			[]string{`level=INFO msg="password change" outcome=success username=alice client=192.0.2.1 request_id={id}`}},
	} {
		if tt.before != nil {
			tt.before()
		}
		all.WriteString(logged.take())
		w := tt.send()
		out := logged.take()
		all.WriteString(out)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if line != "" && !strings.Contains(line, " msg=request ") { // the access line
				got = append(got, line)
			}
		}
		id := w.Header().Get("X-Request-Id")
		var want []string
		for _, line := range tt.want {
			want = append(want, strings.ReplaceAll(line, "{id}", id))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s (%d): audit lines =\n\t%s\nwant\n\t%s", tt.name, w.Code, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	if strings.Contains(all.String(), typedPassword) {
		t.Errorf("the log holds %q, a username that names no user", typedPassword)
	}
}
