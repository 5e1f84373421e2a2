package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/throttle"
)

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
			e := newTestEnvConfig(t, nil, func(c *serveConfig) {
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
