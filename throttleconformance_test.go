package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A throttleDriver calls a loginThrottle at times given from t0 and checks
// its answers.
type throttleDriver struct {
	t  *testing.T
	th loginThrottle
}

// reserve fails the test unless reserve(username, addr, t0+at) returns
// (wantRetry, wantOK).
func (d throttleDriver) reserve(username, addr string, at, wantRetry time.Duration, wantOK bool) {
	d.t.Helper()
	retry, ok, err := d.th.reserve(context.Background(), username, addr, t0.Add(at))
	if err != nil || retry != wantRetry || ok != wantOK {
		d.t.Errorf("reserve(%q, %q, t0+%v) = %v, %v, %v; want %v, %v, nil", username, addr, at, retry, ok, err, wantRetry, wantOK)
	}
}

// fail records a failure of username from addr at t0+at.
func (d throttleDriver) fail(username, addr string, at time.Duration) {
	d.t.Helper()
	if err := d.th.failure(context.Background(), username, addr, t0.Add(at)); err != nil {
		d.t.Errorf("failure(%q, %q, t0+%v) = %v", username, addr, at, err)
	}
}

// succeed records a success of username from addr at t0+at.
func (d throttleDriver) succeed(username, addr string, at time.Duration) {
	d.t.Helper()
	if err := d.th.success(context.Background(), username, addr, t0.Add(at)); err != nil {
		d.t.Errorf("success(%q, %q, t0+%v) = %v", username, addr, at, err)
	}
}

// release releases a reservation of username from addr.
func (d throttleDriver) release(username, addr string) {
	d.t.Helper()
	if err := d.th.release(context.Background(), username, addr); err != nil {
		d.t.Errorf("release(%q, %q) = %v", username, addr, err)
	}
}

// parallel makes n reservations of username, from addr(i), at t0+at, at
// once, and returns how many were admitted.
func (d throttleDriver) parallel(n int, username string, addr func(i int) string, at time.Duration) int {
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for i := range n {
		wg.Go(func() {
			_, ok, err := d.th.reserve(context.Background(), username, addr(i), t0.Add(at))
			if err != nil {
				d.t.Errorf("reserve(%q, %q) = %v", username, addr(i), err)
			}
			if ok {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	return int(admitted.Load())
}

// oneAddr is an addr function for parallel: always 192.0.2.1.
func oneAddr(int) string { return "192.0.2.1" }

// testThrottleConformance checks that the throttles newThrottle makes keep
// throttle's rules (see throttle.go) with its Retry-After values: every
// implementation of loginThrottle runs these cases unchanged.
func testThrottleConformance(t *testing.T, newLoginThrottle func(t *testing.T, cfg throttleConfig) loginThrottle) {
	const alice, home, attacker = "alice", "192.0.2.1", "203.0.113.66"
	const w = 15 * time.Minute
	fast := throttleConfig{AddrRate: fastAddrs, AddrBurst: fastBurst}
	with := func(c throttleConfig) throttleConfig { // c with the fast addresses unless it sets its own
		if c.AddrRate == 0 {
			c.AddrRate, c.AddrBurst = fastAddrs, fastBurst
		}
		return c
	}
	for _, tt := range []struct {
		name string
		cfg  throttleConfig
		run  func(d throttleDriver)
	}{
		// The pair: PairFailures free attempts, then backoff.
		{"pair lockout at default 5", fast, func(d throttleDriver) {
			for range 5 {
				d.reserve(alice, home, 0, 0, true)
				d.fail(alice, home, 0)
			}
			d.reserve(alice, home, 0, time.Second, false)
			d.reserve(alice, home, 999*time.Millisecond, time.Second, false)
			d.reserve(alice, home, time.Second, 0, true)
		}},
		{"pair lockout at 1", with(throttleConfig{PairFailures: 1}), func(d throttleDriver) {
			d.reserve(alice, home, 0, 0, true)
			d.fail(alice, home, 0)
			d.reserve(alice, home, 0, time.Second, false)
			d.reserve(alice, home, time.Second, 0, true)
		}},
		{"pair lockout at 3", with(throttleConfig{PairFailures: 3}), func(d throttleDriver) {
			for range 3 {
				d.reserve(alice, home, 0, 0, true)
				d.fail(alice, home, 0)
			}
			d.reserve(alice, home, 999*time.Millisecond, time.Second, false)
			d.reserve(alice, home, time.Second, 0, true)
		}},
		{"backoff doubles to the default cap", throttleConfig{}, backoffCase(5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300)},
		{"backoff doubles to a 15m cap", throttleConfig{MaxBackoff: 15 * time.Minute},
			backoffCase(5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900)},
		{"backoff doubles to a 30s cap", with(throttleConfig{MaxBackoff: 30 * time.Second}),
			backoffCase(5, 1, 2, 4, 8, 16, 30, 30, 30)},
		{"backoff from 3s after 2 failures", throttleConfig{PairFailures: 2, BaseBackoff: 3 * time.Second, MaxBackoff: 20 * time.Second},
			backoffCase(2, 3, 6, 12, 20, 20)},
		{"base above the cap is capped", with(throttleConfig{BaseBackoff: time.Hour, MaxBackoff: time.Minute}), func(d throttleDriver) {
			for range 5 {
				d.fail(alice, home, 0)
			}
			d.reserve(alice, home, 0, time.Minute, false)
		}},
		{"success clears the pair", fast, func(d throttleDriver) {
			for range 6 {
				d.fail(alice, home, 0)
			}
			d.reserve(alice, home, 0, 2*time.Second, false)
			d.reserve(alice, home, 2*time.Second, 0, true)
			d.succeed(alice, home, 2*time.Second)
			for range 5 { // a fresh start: five failures, then the first backoff, not the third
				d.reserve(alice, home, 2*time.Second, 0, true)
				d.fail(alice, home, 2*time.Second)
			}
			d.reserve(alice, home, 2*time.Second, time.Second, false)
		}},
		{"pairs are apart", with(throttleConfig{MaxBackoff: 15 * time.Minute}), func(d throttleDriver) {
			for range 20 {
				d.fail(alice, attacker, 0)
			}
			d.reserve(alice, attacker, 0, 15*time.Minute, false) // the attacker's pair
			d.reserve(alice, home, 0, 0, true)                   // alice from home: below the user ceiling
			d.reserve("bob", attacker, 0, 0, true)               // another user from the attacker's address
		}},

		// The user: a ceiling over all addresses.
		{"user ceiling across addresses", with(throttleConfig{UserFailures: 10}), func(d throttleDriver) {
			last := 9 * time.Second
			for i := range 10 {
				if i == 9 {
					d.reserve(alice, home, last, 0, true) // one below the ceiling, a new address gets in
					d.release(alice, home)
				}
				d.fail(alice, fmt.Sprint("203.0.113.", i), time.Duration(i)*time.Second)
			}
			d.reserve(alice, home, last, 15*time.Minute, false)          // never failed from here
			d.reserve(alice, "203.0.113.0", last, 15*time.Minute, false) // an attacking address
			d.reserve(alice, home, last+14*time.Minute, time.Minute, false)
			d.reserve("bob", home, last, 0, true)       // other users are not affected
			d.reserve(alice, home, last+w, 0, true)     // the window has passed
			d.reserve(alice, attacker, last+w, 0, true) // everywhere
		}},
		{"success keeps the user's count", with(throttleConfig{UserFailures: 3}), func(d throttleDriver) {
			for i := range 2 {
				d.fail(alice, fmt.Sprint("203.0.113.", i), 0)
			}
			d.reserve(alice, home, 0, 0, true)
			d.succeed(alice, home, 0)
			d.fail(alice, attacker, time.Second)
			d.reserve(alice, home, time.Second, w, false)
		}},

		// The window.
		{"a quiet window forgets", fast, func(d throttleDriver) {
			for range 5 {
				d.fail(alice, home, 0)
			}
			for range 5 {
				d.reserve(alice, home, w, 0, true)
				d.fail(alice, home, w)
			}
			d.reserve(alice, home, w, time.Second, false)
		}},
		{"just inside the window remembers", fast, func(d throttleDriver) {
			for range 5 {
				d.fail(alice, home, 0)
			}
			d.reserve(alice, home, w-time.Nanosecond, 0, true) // the 1s backoff is long over
			d.fail(alice, home, w-time.Nanosecond)
			d.reserve(alice, home, w-time.Nanosecond, 2*time.Second, false) // the sixth failure counts
		}},
		{"failures less than a window apart accumulate", fast, func(d throttleDriver) {
			for i := range 5 {
				d.fail(alice, home, time.Duration(i)*14*time.Minute)
			}
			d.reserve(alice, home, 56*time.Minute, time.Second, false)
		}},
		{"waiting out a cap equal to the window forgets", with(throttleConfig{MaxBackoff: w}), func(d throttleDriver) {
			for range 15 {
				d.fail(alice, home, 0)
			}
			d.reserve(alice, home, 0, w, false)
			d.reserve(alice, home, w, 0, true)
			d.fail(alice, home, w)
			d.reserve(alice, home, w, 0, true) // one failure into a new streak
		}},
		{"the window forgets failures, not attempts in flight", fast, func(d throttleDriver) {
			for range 5 {
				d.reserve(alice, home, 0, 0, true)
			}
			for range 4 {
				d.fail(alice, home, 0)
			}
			// Four failures forgotten, one attempt still pending: four places.
			for range 4 {
				d.reserve(alice, home, w, 0, true)
			}
			d.reserve(alice, home, w, time.Second, false)
		}},

		// The address: a bucket of failures.
		{"address failures: burst then rate", throttleConfig{}, func(d throttleDriver) {
			for i := range 10 {
				d.reserve(fmt.Sprint("user", i), home, 0, 0, true)
				d.fail(fmt.Sprint("user", i), home, 0)
			}
			d.reserve("user10", home, 0, time.Second, false)
			d.reserve("user10", "192.0.2.2", 0, 0, true) // another address has its own bucket
			d.reserve("user11", home, time.Second, 0, true)
			d.fail("user11", home, time.Second)
			d.reserve("user12", home, time.Second, time.Second, false)
			d.reserve("user12", home, 1500*time.Millisecond, time.Second, false)
		}},
		{"address slow rate", throttleConfig{AddrRate: 0.1, AddrBurst: 1}, func(d throttleDriver) {
			d.reserve(alice, home, 0, 0, true)
			d.fail(alice, home, 0)
			d.reserve(alice, home, 0, 10*time.Second, false)
			d.reserve(alice, home, 2500*time.Millisecond, 8*time.Second, false)
			d.reserve(alice, home, 10*time.Second, 0, true)
		}},
		{"address refills by the millisecond", throttleConfig{AddrRate: 2, AddrBurst: 1}, func(d throttleDriver) {
			d.reserve(alice, home, 0, 0, true)
			d.fail(alice, home, 0)
			d.reserve(alice, home, 0, time.Second, false) // half a second, rounded up
			d.reserve(alice, home, 499*time.Millisecond, time.Second, false)
			d.reserve(alice, home, 500*time.Millisecond, 0, true)
		}},
		{"address successes take no token (a NAT)", throttleConfig{}, func(d throttleDriver) {
			for i := range 100 {
				d.reserve(fmt.Sprint("user", i), home, 0, 0, true)
				d.succeed(fmt.Sprint("user", i), home, 0)
			}
		}},
		{"address failures completing at once all count", throttleConfig{AddrRate: 1, AddrBurst: 2}, func(d throttleDriver) {
			for i := range 4 { // four attempts admitted while the bucket still had tokens
				d.reserve(fmt.Sprint("user", i), home, 0, 0, true)
			}
			for i := range 4 {
				d.fail(fmt.Sprint("user", i), home, 0)
			}
			d.reserve("user9", home, 0, 3*time.Second, false) // two below zero, and one more to take
			d.reserve("user9", home, 2500*time.Millisecond, time.Second, false)
			d.reserve("user9", home, 3*time.Second, 0, true)
		}},
		{"address refused attempts take no token", throttleConfig{}, func(d throttleDriver) {
			for range 5 {
				d.fail(alice, home, 0)
			}
			for range 50 {
				d.reserve(alice, home, 0, time.Second, false)
			}
			for i := range 5 { // five failures took five of ten tokens
				d.reserve(fmt.Sprint("user", i), home, 0, 0, true)
			}
		}},
		{"the longest wait is the answer", throttleConfig{AddrRate: 1, AddrBurst: 5}, func(d throttleDriver) {
			for range 8 { // the pair's backoff is 8s; the bucket is 3 below zero: 4s
				d.fail(alice, home, 0)
			}
			d.reserve(alice, home, 0, 8*time.Second, false)
			d.reserve("bob", home, 0, 4*time.Second, false)
		}},

		// Reserve before compare: the places are taken before any password check.
		{"reserve before compare: pair", fast, func(d throttleDriver) {
			for range 5 {
				d.reserve(alice, home, 0, 0, true)
			}
			for range 5 {
				d.reserve(alice, home, 0, time.Second, false) // the places are taken
			}
			d.release(alice, home) // one never reached the hasher
			d.reserve(alice, home, 0, 0, true)
			for range 5 {
				d.fail(alice, home, 0)
			}
			d.reserve(alice, home, 0, time.Second, false) // the backoff, as in series
			// After the backoff one attempt at a time goes through.
			d.reserve(alice, home, time.Second, 0, true)
			d.reserve(alice, home, time.Second, time.Second, false)
			d.fail(alice, home, time.Second)
			d.reserve(alice, home, time.Second, 2*time.Second, false)
		}},
		{"reserve before compare: release frees the places", fast, func(d throttleDriver) {
			for range 5 {
				d.reserve(alice, home, 0, 0, true)
			}
			for range 5 {
				d.release(alice, home)
			}
			d.release(alice, home) // one too many counts for nothing
			for range 5 {
				d.reserve(alice, home, 0, 0, true)
			}
			d.reserve(alice, home, 0, time.Second, false)
		}},
		{"reserve before compare: success frees the user's place", with(throttleConfig{UserFailures: 2}), func(d throttleDriver) {
			d.reserve(alice, home, 0, 0, true)
			d.reserve(alice, attacker, 0, 0, true)
			d.reserve(alice, "192.0.2.3", 0, time.Second, false)
			d.succeed(alice, home, 0)
			d.reserve(alice, "192.0.2.3", 0, 0, true)
		}},
		{"reserve before compare: user", with(throttleConfig{UserFailures: 3}), func(d throttleDriver) {
			if got := d.parallel(10, alice, func(i int) string { return fmt.Sprint("203.0.113.", i) }, 0); got != 3 {
				d.t.Errorf("10 parallel attempts from 10 addresses at a ceiling of 3: %d admitted; want 3", got)
			}
		}},
		{"reserve before compare: concurrent", fast, func(d throttleDriver) {
			if got := d.parallel(50, alice, oneAddr, 0); got != 5 {
				d.t.Errorf("50 concurrent reservations at a limit of 5: %d admitted; want 5", got)
			}
			for range 5 {
				d.fail(alice, home, 0)
			}
			d.reserve(alice, home, 0, time.Second, false)
			if got := d.parallel(50, alice, oneAddr, time.Second); got != 1 {
				d.t.Errorf("50 concurrent reservations after the backoff: %d admitted; want 1", got)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(throttleDriver{t: t, th: newLoginThrottle(t, tt.cfg)})
		})
	}
}

// backoffCase returns a case that makes pairFailures failures and then
// expects each of waits (in seconds) in turn, failing once after each.
func backoffCase(pairFailures int, waits ...time.Duration) func(d throttleDriver) {
	return func(d throttleDriver) {
		const alice, home = "alice", "192.0.2.1"
		var now time.Duration
		for range pairFailures {
			d.fail(alice, home, now)
		}
		for _, w := range waits {
			w *= time.Second
			d.reserve(alice, home, now, w, false)
			d.reserve(alice, home, now+w-time.Nanosecond, time.Second, false)
			now += w
			d.reserve(alice, home, now, 0, true)
			d.fail(alice, home, now)
		}
	}
}

func TestMemoryThrottleConformance(t *testing.T) {
	testThrottleConformance(t, func(t *testing.T, cfg throttleConfig) loginThrottle {
		return memoryThrottle{newThrottle(cfg)}
	})
}
