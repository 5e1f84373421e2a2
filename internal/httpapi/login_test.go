package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/throttle"
)

// TestLoginParallelGuesses: ten wrong passwords sent at once for one user
// from one client, with the pair's limit at 5, get no more than five
// password checks (401) before the 429s begin: the five that find the
// places taken wait for those checks, and are refused once they failed.
func TestLoginParallelGuesses(t *testing.T) {
	t.Parallel()
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 16, 5*time.Second
	})
	got := parallelLogins(t, e, 1, 10, 5, `{"username":"alice","password":"wrong"}`)
	if got[http.StatusUnauthorized] > 5 || got[http.StatusUnauthorized]+got[http.StatusTooManyRequests] != 10 {
		t.Errorf("10 parallel wrong passwords = %v; want at most 5 × 401 and the rest 429", got)
	}
}

// TestLoginNATNotThrottled: successful logins never count against a
// client's limit, so many people behind one address (a NAT, or a proxy
// without --trusted-proxy) log in at once, at the default limits.
func TestLoginNATNotThrottled(t *testing.T) {
	t.Parallel()
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.throttle = throttle.DefaultConfig()
	})
	for i := range 30 {
		w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT)
		if w.Code != http.StatusOK {
			t.Fatalf("good login %d from one address = %d %s; want 200", i+1, w.Code, w.Body)
		}
	}
	// Failures still count: the address's bucket (10 deep) empties.
	got, tries := 0, 0
	for range 12 {
		tries++
		body := fmt.Sprintf(`{"username":"nobody%d","password":"x"}`, tries) // a new username each time: no pair limit
		if e.do("POST", "/api/auth/login/", body, jsonCT).Code == http.StatusTooManyRequests {
			got++
		}
	}
	if got == 0 {
		t.Errorf("12 failed logins from one address: no 429; want the address's bucket to refuse")
	}
}

// reserveCounter is a throttle that counts the calls to Reserve, so that a
// test knows when every request it sent has asked the throttle.
type reserveCounter struct {
	throttle.Throttle
	calls atomic.Int64
}

func (c *reserveCounter) Reserve(ctx context.Context, username, addr string, now time.Time) (throttle.Verdict, time.Duration, error) {
	c.calls.Add(1)
	return c.Throttle.Reserve(ctx, username, addr, now)
}

// parallelLogins sends n logins with body at once from one client while
// the test holds all slots hasher slots; once every request has asked the
// throttle and admitted of them wait for a slot, it gives the slots back.
// It returns how many replies had each status.
func parallelLogins(t *testing.T, e *testEnv, slots, n, admitted int, body string) map[int]int {
	t.Helper()
	counter := &reserveCounter{Throttle: e.deps.Guard.Throttle}
	e.deps.Guard.Throttle = counter
	defer func() { e.deps.Guard.Throttle = counter.Throttle }()
	adm := e.deps.Guard.Admission
	var releases []func()
	for range slots {
		release, err := adm.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Go(func() {
			codes <- e.do("POST", "/api/auth/login/", body, jsonCT).Code
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, waiting := adm.Stats()
		if counter.calls.Load() >= int64(n) && waiting >= admitted || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, release := range releases {
		release()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	return count
}

// TestLoginParallelRightPasswords: logins of one user from one client sent
// at once with the right password all succeed, however many there are
// beyond the pair's limit of 5: the attempts whose checks are still in
// flight are no failures, so they turn none of the others into a 429
// (issue 19, point 4). Wrong passwords sent alike still get no more than
// five checks.
func TestLoginParallelRightPasswords(t *testing.T) {
	t.Parallel()
	const slots = 2
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.throttle = throttle.DefaultConfig()
		c.throttle.AddrRate, c.throttle.AddrBurst = 1000, 1000 // the pair's and the user's limits at their defaults
		c.passwordSlots, c.passwordQueue, c.passwordWait = slots, 32, 10*time.Second
	})
	right := `{"username":"alice","password":"alice-pw"}`
	if got := parallelLogins(t, e, slots, 12, 5, right); got[http.StatusOK] != 12 {
		t.Errorf("12 parallel logins of alice with the right password = %v; want 12 × 200", got)
	}
	wrong := `{"username":"alice","password":"wrong"}`
	got := parallelLogins(t, e, slots, 12, 5, wrong)
	if got[http.StatusUnauthorized] > 5 || got[http.StatusUnauthorized]+got[http.StatusTooManyRequests]+got[http.StatusServiceUnavailable] != 12 {
		t.Errorf("12 parallel logins of alice with a wrong password = %v; want at most 5 × 401, the rest 429 or 503", got)
	}
}

// TestLoginWaitsForChecksInFlight: a login that finds the pair's places
// taken by checks in flight waits for them holding no hasher slot, and is
// decided on the failures they leave: it proceeds if they stay below the
// limit, is 429 if they reach it, and is 503 (not 429) if they do not
// settle within --password-wait.
func TestLoginWaitsForChecksInFlight(t *testing.T) {
	t.Parallel()
	const wait = 300 * time.Millisecond
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 4, wait
	})
	th, adm := e.deps.Guard.Throttle, e.deps.Guard.Admission
	const alice, client = "alice", "192.0.2.1" // httptest's client
	right := `{"username":"alice","password":"alice-pw"}`
	inFlight := func() { // five checks in flight, as if on another instance
		t.Helper()
		for range 5 {
			if v, _, err := th.Reserve(t.Context(), alice, client, e.clock.Now()); v != throttle.Admitted || err != nil {
				t.Fatalf("reserve(%q, %q) = %v, %v; want admitted, nil", alice, client, v, err)
			}
		}
	}
	settle := func(failures int) { // the checks in flight end: failures of them failed, the rest never ran
		t.Helper()
		for i := range 5 {
			var err error
			if i < failures {
				err = th.Failure(t.Context(), alice, client, e.clock.Now())
			} else {
				err = th.Release(t.Context(), alice, client)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// loginSettling logs in while settle(failures) runs once the login has
	// waited a moment, and checks that no hasher slot is held meanwhile.
	loginSettling := func(failures int) *httptest.ResponseRecorder {
		t.Helper()
		reply := make(chan *httptest.ResponseRecorder)
		go func() { reply <- e.do("POST", "/api/auth/login/", right, jsonCT) }()
		time.Sleep(wait / 3)
		if running, waiting := adm.Stats(); running != 0 || waiting != 0 {
			t.Errorf("hasher slots while a login waits for checks in flight = %d running, %d waiting; want 0, 0", running, waiting)
		}
		settle(failures)
		return <-reply
	}

	inFlight()
	start := time.Now()
	w := e.do("POST", "/api/auth/login/", right, jsonCT)
	if w.Code != http.StatusServiceUnavailable || errorCode(t, w) != "unavailable" || w.Header().Get("Retry-After") != "1" {
		t.Errorf("login while 5 checks stay in flight = %d %s Retry-After %q; want 503 unavailable, Retry-After 1", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	if took := time.Since(start); took < wait {
		t.Errorf("login while 5 checks stay in flight answered after %v; want the --password-wait of %v", took, wait)
	}

	// The same five checks end, one short of the limit.
	if w := loginSettling(4); w.Code != http.StatusOK {
		t.Errorf("login while 5 checks in flight end in 4 failures = %d %s; want 200", w.Code, w.Body)
	}

	inFlight()
	w = loginSettling(5)
	if w.Code != http.StatusTooManyRequests || errorCode(t, w) != "throttled" || w.Header().Get("Retry-After") != "1" {
		t.Errorf("login while 5 checks in flight end in 5 failures = %d %s Retry-After %q; want 429 throttled, Retry-After 1", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
}

// TestBusyRefusalsLeaveNoReservation: a password check refused with 503
// because no hasher slot came free in time settles the throttle place it
// had reserved. As many such refusals as the pair's limit (5) do not lock the
// user out: once a slot is free the right password is taken, at login and
// at a password change alike.
func TestBusyRefusalsLeaveNoReservation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		send func(e *testEnv, token string) *httptest.ResponseRecorder
	}{
		{"login", func(e *testEnv, _ string) *httptest.ResponseRecorder {
			return e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT)
		}},
		{"password change", func(e *testEnv, token string) *httptest.ResponseRecorder {
			return e.do("POST", "/api/auth/password/", changeBody("alice-pw", newPassphrase), jsonCT, "Authorization: Token "+token)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// One slot and one queue place: with the slot held, a check is
			// admitted to wait (no 503 before the throttle) and gets 503 after 10ms.
			e := newTestEnvConfig(t, nil, func(c *envConfig) {
				c.tokenTTL = time.Hour
				c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 1, 10*time.Millisecond
			})
			token := e.login("alice")
			release, err := e.deps.Guard.Admission.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 5; i++ {
				if w := tt.send(e, token); w.Code != http.StatusServiceUnavailable {
					release()
					t.Fatalf("%s %d with every hasher slot held = %d %s; want 503", tt.name, i, w.Code, strings.TrimSpace(w.Body.String()))
				}
			}
			release()
			if w := tt.send(e, token); w.Code != http.StatusOK {
				t.Errorf("%s with the right password after five 503s = %d %s; want 200 (a 503 leaves no throttle reservation)", tt.name, w.Code, strings.TrimSpace(w.Body.String()))
			}
		})
	}
}

// faultyThrottle is the server's throttle with one call failing as a
// shared throttle's does when its backing does not answer.
type faultyThrottle struct {
	throttle.Throttle
	fail string // "reserve", "failure" or "success"
}

func (f faultyThrottle) Reserve(ctx context.Context, username, addr string, now time.Time) (throttle.Verdict, time.Duration, error) {
	if f.fail == "reserve" {
		return throttle.Refused, 0, throttle.ErrUnavailable
	}
	return f.Throttle.Reserve(ctx, username, addr, now)
}

func (f faultyThrottle) Failure(ctx context.Context, username, addr string, now time.Time) error {
	if f.fail == "failure" {
		return throttle.ErrUnavailable
	}
	return f.Throttle.Failure(ctx, username, addr, now)
}

func (f faultyThrottle) Success(ctx context.Context, username, addr string, now time.Time) error {
	if f.fail == "success" {
		return throttle.ErrUnavailable
	}
	return f.Throttle.Success(ctx, username, addr, now)
}

// TestThrottleErrorsFailClosed: when the throttle cannot decide or cannot
// record, the login fails closed with 503: no 401 that tells a guess was
// wrong without counting it, and no token.
func TestThrottleErrorsFailClosed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		fail, password string
	}{
		{"reserve", "alice-pw"},
		{"reserve", "wrong"},
		{"failure", "wrong"},
		{"success", "alice-pw"},
	} {
		e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
		e.deps.Guard.Throttle = faultyThrottle{Throttle: e.deps.Guard.Throttle, fail: tt.fail}
		w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"`+tt.password+`"}`, jsonCT)
		if w.Code != http.StatusServiceUnavailable || errorCode(t, w) != "unavailable" {
			t.Errorf("login(alice, %s) with the throttle's %s failing = %d %s; want 503 unavailable", tt.password, tt.fail, w.Code, strings.TrimSpace(w.Body.String()))
		}
		if n, _ := e.store.Len(); n != 0 {
			t.Errorf("login(alice, %s) with the throttle's %s failing: the store holds %d sessions; want 0", tt.password, tt.fail, n)
		}
	}
}

// TestRefusalsHeldInTarpit: a login refused by the throttle (429), or for
// want of a hasher slot after its wait (503), is held for the refusal delay
// before its reply, so that a flooding client idles instead of cycling.
func TestRefusalsHeldInTarpit(t *testing.T) {
	t.Parallel()
	const delay, wait = 100 * time.Millisecond, 10 * time.Millisecond
	for _, tt := range []struct {
		name   string
		setup  func(t *testing.T, e *testEnv) (release func())
		status int
		least  time.Duration
	}{
		{"throttled", func(t *testing.T, e *testEnv) func() {
			for i := 1; i <= 5; i++ {
				if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"wrong"}`, jsonCT); w.Code != http.StatusUnauthorized {
					t.Fatalf("wrong password %d = %d; want 401", i, w.Code)
				}
			}
			return func() {}
		}, http.StatusTooManyRequests, delay},
		{"no hasher slot within the wait", func(t *testing.T, e *testEnv) func() {
			release, err := e.deps.Guard.Admission.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return release
		}, http.StatusServiceUnavailable, wait + delay},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newTestEnvConfig(t, nil, func(c *envConfig) {
				c.tokenTTL = time.Hour
				c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 1, wait
				c.refusalDelay = delay
			})
			release := tt.setup(t, e)
			defer release()
			start := time.Now()
			w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT)
			took := time.Since(start)
			if w.Code != tt.status {
				t.Fatalf("login %s = %d %s; want %d", tt.name, w.Code, strings.TrimSpace(w.Body.String()), tt.status)
			}
			if took < tt.least {
				t.Errorf("login %s answered %d after %v; want at least %v (held in the tarpit)", tt.name, w.Code, took, tt.least)
			}
		})
	}
}

// TestLoginUsernameNFKC: a username is matched, and throttled, in its NFKC
// form: "ａｌｉｃｅ" typed fullwidth logs in as alice, and its failures
// count against alice's own.
func TestLoginUsernameNFKC(t *testing.T) {
	t.Parallel()
	const fullwidth = "ａｌｉｃｅ"
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	w := e.do("POST", "/api/auth/login/", `{"username":"`+fullwidth+`","password":"alice-pw"}`, jsonCT)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"user":{"username":"alice",`) {
		t.Errorf("login(%s, alice-pw) = %d %s; want 200 for alice", fullwidth, w.Code, strings.TrimSpace(w.Body.String()))
	}
	for i := 1; i <= 5; i++ {
		if w := e.do("POST", "/api/auth/login/", `{"username":"`+fullwidth+`","password":"wrong"}`, jsonCT); w.Code != http.StatusUnauthorized {
			t.Fatalf("login(%s, wrong) %d = %d; want 401", fullwidth, i, w.Code)
		}
	}
	if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT); w.Code != http.StatusTooManyRequests {
		t.Errorf("login(alice, alice-pw) after five failures as %s = %d; want 429 (one throttle key)", fullwidth, w.Code)
	}
}
