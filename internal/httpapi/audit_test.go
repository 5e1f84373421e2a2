package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/servertest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// TestAuditLines: every password check writes one audit line naming its
// event, outcome, user, client and request id; a username that names no
// user is never logged (people type passwords into username fields); a
// request whose credentials were never read writes none; an admin ending
// another user's session is audited too.
func TestAuditLines(t *testing.T) {
	t.Parallel()
	var logged servertest.SyncBuffer
	log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	e := newTestEnvConfig(t, log, func(c *envConfig) { c.tokenTTL = time.Hour })
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
			[]string{`level=INFO msg=login outcome=throttled username=bob client=192.0.2.1 request_id={id} limit=pair`}},
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
		all.WriteString(logged.Take())
		w := tt.send()
		out := logged.Take()
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

// TestAuditThrottleLimit: the audit line of a throttled attempt names the
// limits that refused it (limit=), so that an operator can tell whether
// user unlock helps: it lifts the pair's and the user's, not the client's.
// Every request comes from 192.0.2.1.
func TestAuditThrottleLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		change func(c *envConfig)
		before func(e *testEnv, logged *servertest.SyncBuffer, login func(username, password string) int)
		want   string // the throttled line's limit attribute; "" for none
	}{
		{"pair", nil, func(e *testEnv, logged *servertest.SyncBuffer, login func(string, string) int) {
			for range 5 {
				login("alice", "wrong")
			}
		}, "limit=pair"},
		{"pair and user", func(c *envConfig) { c.throttle.UserFailures = 5 }, func(e *testEnv, logged *servertest.SyncBuffer, login func(string, string) int) {
			for range 5 {
				login("alice", "wrong")
			}
		}, "limit=pair,user"},
		{"user", func(c *envConfig) { c.throttle.PairFailures, c.throttle.UserFailures = 10, 5 }, func(e *testEnv, logged *servertest.SyncBuffer, login func(string, string) int) {
			for range 5 {
				login("alice", "wrong")
			}
		}, "limit=user"},
		{"client, over all usernames", func(c *envConfig) { c.throttle.AddrRate, c.throttle.AddrBurst = 0.01, 3 }, func(e *testEnv, logged *servertest.SyncBuffer, login func(string, string) int) {
			login("bob", "wrong")
			login("carol", "wrong")
			login("nobody", "wrong")
		}, "limit=client"},
		{"unlock lifts all but the client", func(c *envConfig) { c.throttle.AddrRate, c.throttle.AddrBurst = 0.01, 5 }, func(e *testEnv, logged *servertest.SyncBuffer, login func(string, string) int) {
			for range 5 {
				login("alice", "wrong")
			}
			if code := login("alice", "alice-pw"); code != http.StatusTooManyRequests {
				t.Fatalf("login after 5 wrong passwords = %d; want 429", code)
			}
			if line := regexp.MustCompile(`outcome=throttled .*`).FindString(logged.Take()); !strings.HasSuffix(line, " limit=pair,client") {
				t.Errorf("audit line before the unlock = %q; want it to end limit=pair,client", line)
			}
			if err := users.Unlock(context.Background(), e.users, "alice"); err != nil {
				t.Fatal(err)
			}
		}, "limit=client"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logged servertest.SyncBuffer
			e := newTestEnvConfig(t, slog.New(slog.NewTextHandler(&logged, nil)), tt.change)
			login := func(username, password string) int {
				return e.do("POST", "/api/auth/login/", `{"username":"`+username+`","password":"`+password+`"}`, jsonCT).Code
			}
			tt.before(e, &logged, login)
			logged.Take()
			w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT)
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("login = %d %s; want 429", w.Code, w.Body)
			}
			line := regexp.MustCompile(`msg=login outcome=throttled .*`).FindString(logged.Take())
			if got := regexp.MustCompile(` limit=\S*`).FindString(line); strings.TrimSpace(got) != tt.want {
				t.Errorf("audit line %q has %q; want %q", line, strings.TrimSpace(got), tt.want)
			}
		})
	}
}

// A failingDirectory is the real users file whose Lookup fails with
// ErrUnavailable once failAfter's look-ups have been answered, as a
// PostgreSQL directory does past its grace (5 s after the database last
// answered), even in the middle of a login: a fault injected into a real
// directory.
type failingDirectory struct {
	*usersfile.Directory
	lookups atomic.Int64
	upTo    atomic.Int64 // Lookup fails once lookups passes it
}

func (d *failingDirectory) Lookup(ctx context.Context, username string) (*users.Account, error) {
	if d.lookups.Add(1) > d.upTo.Load() {
		return nil, fmt.Errorf("injected: %w", users.ErrUnavailable)
	}
	return d.Directory.Lookup(ctx, username)
}

// failAfter makes every look-up fail after the next n.
func (d *failingDirectory) failAfter(n int64) { d.upTo.Store(d.lookups.Load() + n) }

// newFailingEnv returns a test environment on testUsers in a
// failingDirectory that answers until failAfter is called, with the log,
// audit lines included, in logged.
func newFailingEnv(t *testing.T) (e *testEnv, dir *failingDirectory, d httpapi.Deps, logged *servertest.SyncBuffer) {
	t.Helper()
	logged = new(servertest.SyncBuffer)
	e = newTestEnvConfig(t, slog.New(slog.NewTextHandler(logged, nil)), func(c *envConfig) {
		c.realTime = true
		c.directory = func(file *usersfile.Directory) users.Directory {
			dir = &failingDirectory{Directory: file}
			dir.upTo.Store(math.MaxInt64)
			return dir
		}
	})
	return e, dir, e.deps, logged
}

// TestAuditOutcomeDirectoryDown: while the user directory cannot answer, a
// login gets 503 unavailable and its audit line says outcome=unavailable,
// the reply's code; it said internal_error, so an alert on internal errors
// fired for a database outage (issue 19, point 8).
func TestAuditOutcomeDirectoryDown(t *testing.T) {
	t.Parallel()
	e, dir, _, logged := newFailingEnv(t)
	dir.failAfter(0)
	w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT)
	if w.Code != 503 || errorCode(t, w) != "unavailable" {
		t.Fatalf("login with the directory down = %d %s; want 503 unavailable", w.Code, w.Body)
	}
	if !strings.Contains(logged.String(), "msg=login outcome=unavailable") || strings.Contains(logged.String(), "outcome=internal_error") {
		t.Errorf("log = %q; want the login's audit line with outcome=unavailable", logged.String())
	}
}

// TestAuditEveryRequest: every request to login and password change has
// one audit line, those refused before a password is checked included
// (400, 413, 415, a capacity 503, a dead token), whose outcome is its
// reply's code; a login's username is not logged before it is known to
// name a user (issue 19, point 8). Before, these requests had none.
func TestAuditEveryRequest(t *testing.T) {
	t.Parallel()
	var logged servertest.SyncBuffer
	e := newTestEnvConfig(t, slog.New(slog.NewTextHandler(&logged, nil)), func(c *envConfig) {
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
