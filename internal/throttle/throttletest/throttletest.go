package throttletest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/throttle"
)

// T0 is the time the cases start at.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// FastAddrs lifts the per-address rate out of the way of tests about pairs and users.
const FastAddrs, FastBurst = 1e6, 1 << 20

// A Driver calls a Throttle at times given from t0 and checks
// its answers.
type Driver struct {
	T        *testing.T
	Throttle throttle.Throttle
}

// Reserve fails the test unless reserve(username, addr, t0+at) is
// Admitted (wantOK) or Refused with wantRetry.
func (d Driver) Reserve(username, addr string, at, wantRetry time.Duration, wantOK bool) {
	d.T.Helper()
	want := throttle.Refused
	if wantOK {
		want = throttle.Admitted
	}
	d.reserve(username, addr, at, want, wantRetry)
}

// Wait fails the test unless reserve(username, addr, t0+at) is Wait: over
// a limit only by the attempts in flight.
func (d Driver) Wait(username, addr string, at time.Duration) {
	d.T.Helper()
	d.reserve(username, addr, at, throttle.Wait, 0)
}

func (d Driver) reserve(username, addr string, at time.Duration, want throttle.Verdict, wantRetry time.Duration) {
	d.T.Helper()
	v, retry, err := d.Throttle.Reserve(context.Background(), username, addr, T0.Add(at))
	if err != nil || v != want || retry != wantRetry {
		d.T.Errorf("reserve(%q, %q, t0+%v) = %v, %v, %v; want %v, %v, nil", username, addr, at, v, retry, err, want, wantRetry)
	}
}

// Explain fails the test unless Explain(username, addr, t0+at) is want.
func (d Driver) Explain(username, addr string, at time.Duration, want throttle.Limits) {
	d.T.Helper()
	if got, err := d.Throttle.Explain(context.Background(), username, addr, T0.Add(at)); err != nil || got != want {
		d.T.Errorf("Explain(%q, %q, t0+%v) = %q, %v; want %q, nil", username, addr, at, got, err, want)
	}
}

// Fail records a failure of username from addr at t0+at.
func (d Driver) Fail(username, addr string, at time.Duration) {
	d.T.Helper()
	if err := d.Throttle.Failure(context.Background(), username, addr, T0.Add(at)); err != nil {
		d.T.Errorf("failure(%q, %q, t0+%v) = %v", username, addr, at, err)
	}
}

// Succeed records a success of username from addr at t0+at.
func (d Driver) Succeed(username, addr string, at time.Duration) {
	d.T.Helper()
	if err := d.Throttle.Success(context.Background(), username, addr, T0.Add(at)); err != nil {
		d.T.Errorf("success(%q, %q, t0+%v) = %v", username, addr, at, err)
	}
}

// Release releases a reservation of username from addr.
func (d Driver) Release(username, addr string) {
	d.T.Helper()
	if err := d.Throttle.Release(context.Background(), username, addr); err != nil {
		d.T.Errorf("release(%q, %q) = %v", username, addr, err)
	}
}

// Parallel makes n reservations of username, from addr(i), at t0+at, at
// once, and returns how many were admitted; the others are Wait or Refused.
func (d Driver) Parallel(n int, username string, addr func(i int) string, at time.Duration) int {
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for i := range n {
		wg.Go(func() {
			v, _, err := d.Throttle.Reserve(context.Background(), username, addr(i), T0.Add(at))
			if err != nil {
				d.T.Errorf("reserve(%q, %q) = %v", username, addr(i), err)
			}
			if v == throttle.Admitted {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	return int(admitted.Load())
}

// Guesses sends n wrong passwords for username from addr(i) at once, at
// t0+at, as a login does: reserve, asking again while the answer is Wait;
// once admitted, a failure. It returns how many were admitted (password
// checks) and how many refused.
func (d Driver) Guesses(n int, username string, addr func(i int) string, at time.Duration) (checked, refused int) {
	var wg sync.WaitGroup
	var checks, refusals atomic.Int64
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			for try := 0; ; try++ {
				v, _, err := d.Throttle.Reserve(context.Background(), username, addr(i), T0.Add(at))
				switch {
				case err != nil:
					d.T.Errorf("reserve(%q, %q) = %v", username, addr(i), err)
					return
				case v == throttle.Admitted:
					checks.Add(1)
					runtime.Gosched() // let the others ask while this one is in flight
					if err := d.Throttle.Failure(context.Background(), username, addr(i), T0.Add(at)); err != nil {
						d.T.Errorf("failure(%q, %q) = %v", username, addr(i), err)
					}
					return
				case v == throttle.Refused:
					refusals.Add(1)
					return
				case try == 5000:
					d.T.Errorf("reserve(%q, %q) = %v after %d tries; want a decision once the attempts in flight settle", username, addr(i), v, try)
					return
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	close(start)
	wg.Wait()
	return int(checks.Load()), int(refusals.Load())
}

// ReserveCode fails the test unless ReserveCode(username, after,
// t0+at) is Admitted with the count wantN (wantOK), or Refused.
func (d Driver) ReserveCode(username string, after time.Time, at time.Duration, wantN int, wantOK bool) {
	d.T.Helper()
	want := throttle.Refused
	if wantOK {
		want = throttle.Admitted
	}
	v, n, err := d.Throttle.ReserveCode(context.Background(), username, after, T0.Add(at))
	if err != nil || v != want || (wantOK && n != wantN) {
		d.T.Errorf("ReserveCode(%q, after %v, t0+%v) = %v, %d, %v; want %v, %d, nil", username, after, at, v, n, err, want, wantN)
	}
}

// WrongCodes counts n wrong codes of username at t0+at, each admitted,
// the first with the count first.
func (d Driver) WrongCodes(n int, username string, after time.Time, at time.Duration, first int) {
	d.T.Helper()
	for i := range n {
		d.ReserveCode(username, after, at, first+i, true)
	}
}

// CodeSuccess settles a right code of username.
func (d Driver) CodeSuccess(username string) {
	d.T.Helper()
	if err := d.Throttle.CodeSuccess(context.Background(), username); err != nil {
		d.T.Errorf("CodeSuccess(%q) = %v", username, err)
	}
}

// ReleaseCode settles a code of username that was not judged.
func (d Driver) ReleaseCode(username string) {
	d.T.Helper()
	if err := d.Throttle.ReleaseCode(context.Background(), username); err != nil {
		d.T.Errorf("ReleaseCode(%q) = %v", username, err)
	}
}

// CodeLocked fails the test unless CodeLocked(username, after) is want.
func (d Driver) CodeLocked(username string, after time.Time, want bool) {
	d.T.Helper()
	if got, err := d.Throttle.CodeLocked(context.Background(), username, after); got != want || err != nil {
		d.T.Errorf("CodeLocked(%q, after %v) = %v, %v; want %v, nil", username, after, got, err, want)
	}
}

// ParallelCodes counts n codes of username at t0+at at once and returns
// how many were admitted.
func (d Driver) ParallelCodes(n int, username string, at time.Duration) int {
	var wg sync.WaitGroup
	var admitted atomic.Int64
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			v, _, err := d.Throttle.ReserveCode(context.Background(), username, time.Time{}, T0.Add(at))
			if err != nil {
				d.T.Errorf("ReserveCode(%q) = %v", username, err)
			}
			if v == throttle.Admitted {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return int(admitted.Load())
}

// OneAddr is an addr function for parallel: always 192.0.2.1.
func OneAddr(int) string { return "192.0.2.1" }

// Names and addresses the cases use, and the throttle's window.
const (
	alice, home, attacker = "alice", "192.0.2.1", "203.0.113.66"
	window                = 15 * time.Minute
)

// A throttleCase is one of Run's cases: run drives a throttle made with cfg.
type throttleCase struct {
	name string
	cfg  throttle.Config
	run  func(d Driver)
}

// Run checks that the throttles newThrottle makes keep
// throttle's rules (see the throttle package) with its Retry-After values: every
// implementation of Throttle runs these cases unchanged.
func Run(t *testing.T, newLoginThrottle func(t *testing.T, cfg throttle.Config) throttle.Throttle) {
	for _, cases := range [][]throttleCase{
		lockoutCases(), pairCases(), userCases(), codeLockCases(), windowCases(),
		addressCases(), reserveCases(), inFlightCases(), explainCases(), guessCases(),
	} {
		for _, tt := range cases {
			t.Run(tt.name, func(t *testing.T) {
				tt.run(Driver{T: t, Throttle: newLoginThrottle(t, tt.cfg)})
			})
		}
	}
}

// fast returns a Config with the fast addresses (FastAddrs, FastBurst)
// and every other limit at its default.
func fast() throttle.Config { return with(throttle.Config{}) }

// with returns c with the fast addresses (FastAddrs, FastBurst) unless it
// sets its own.
func with(c throttle.Config) throttle.Config {
	if c.AddrRate == 0 {
		c.AddrRate, c.AddrBurst = FastAddrs, FastBurst
	}
	return c
}

// lockoutCases: the pair: PairFailures free attempts, then a backoff that
// doubles to its cap.
func lockoutCases() []throttleCase {
	return []throttleCase{
		{"pair lockout at default 5", fast(), func(d Driver) {
			for range 5 {
				d.Reserve(alice, home, 0, 0, true)
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, 0, time.Second, false)
			d.Reserve(alice, home, 999*time.Millisecond, time.Second, false)
			d.Reserve(alice, home, time.Second, 0, true)
		}},
		{"pair lockout at 1", with(throttle.Config{PairFailures: 1}), func(d Driver) {
			d.Reserve(alice, home, 0, 0, true)
			d.Fail(alice, home, 0)
			d.Reserve(alice, home, 0, time.Second, false)
			d.Reserve(alice, home, time.Second, 0, true)
		}},
		{"pair lockout at 3", with(throttle.Config{PairFailures: 3}), func(d Driver) {
			for range 3 {
				d.Reserve(alice, home, 0, 0, true)
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, 999*time.Millisecond, time.Second, false)
			d.Reserve(alice, home, time.Second, 0, true)
		}},
		{"backoff doubles to the default cap", throttle.Config{}, backoffCase(5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300)},
		{"backoff doubles to a 15m cap", throttle.Config{MaxBackoff: 15 * time.Minute},
			backoffCase(5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900)},
		{"backoff doubles to a 30s cap", with(throttle.Config{MaxBackoff: 30 * time.Second}),
			backoffCase(5, 1, 2, 4, 8, 16, 30, 30, 30)},
		{"backoff from 3s after 2 failures", throttle.Config{PairFailures: 2, BaseBackoff: 3 * time.Second, MaxBackoff: 20 * time.Second},
			backoffCase(2, 3, 6, 12, 20, 20)},
		{"base above the cap is capped", with(throttle.Config{BaseBackoff: time.Hour, MaxBackoff: time.Minute}), func(d Driver) {
			for range 5 {
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, 0, time.Minute, false)
		}},
	}
}

// pairCases: the pair: a success clears it, and each pair is apart.
func pairCases() []throttleCase {
	return []throttleCase{
		{"success clears the pair", fast(), func(d Driver) {
			for range 6 {
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, 0, 2*time.Second, false)
			d.Reserve(alice, home, 2*time.Second, 0, true)
			d.Succeed(alice, home, 2*time.Second)
			for range 5 { // a fresh start: five failures, then the first backoff, not the third
				d.Reserve(alice, home, 2*time.Second, 0, true)
				d.Fail(alice, home, 2*time.Second)
			}
			d.Reserve(alice, home, 2*time.Second, time.Second, false)
		}},
		{"success keeps the pair's other attempts in flight", fast(), func(d Driver) {
			for range 5 {
				d.Reserve(alice, home, 0, 0, true)
			}
			d.Succeed(alice, home, 0)
			d.Reserve(alice, home, 0, 0, true) // one place came free, not five
			d.Wait(alice, home, 0)
			for range 4 {
				d.Fail(alice, home, 0)
			}
			d.Wait(alice, home, 0) // four failures since the success, one in flight
			d.Fail(alice, home, 0)
			d.Reserve(alice, home, 0, time.Second, false)
		}},
		{"pairs are apart", with(throttle.Config{MaxBackoff: 15 * time.Minute}), func(d Driver) {
			for range 20 {
				d.Fail(alice, attacker, 0)
			}
			d.Reserve(alice, attacker, 0, 15*time.Minute, false) // the attacker's pair
			d.Reserve(alice, home, 0, 0, true)                   // alice from home: below the user ceiling
			d.Reserve("bob", attacker, 0, 0, true)               // another user from the attacker's address
		}},
	}
}

// userCases: the user: a ceiling over all addresses.
func userCases() []throttleCase {
	return []throttleCase{
		{"user ceiling across addresses", with(throttle.Config{UserFailures: 10}), func(d Driver) {
			last := 9 * time.Second
			for i := range 10 {
				if i == 9 {
					d.Reserve(alice, home, last, 0, true) // one below the ceiling, a new address gets in
					d.Release(alice, home)
				}
				d.Fail(alice, fmt.Sprint("203.0.113.", i), time.Duration(i)*time.Second)
			}
			d.Reserve(alice, home, last, 15*time.Minute, false)          // never failed from here
			d.Reserve(alice, "203.0.113.0", last, 15*time.Minute, false) // an attacking address
			d.Reserve(alice, home, last+14*time.Minute, time.Minute, false)
			d.Reserve("bob", home, last, 0, true)            // other users are not affected
			d.Reserve(alice, home, last+window, 0, true)     // the window has passed
			d.Reserve(alice, attacker, last+window, 0, true) // everywhere
		}},
		{"success keeps the user's count", with(throttle.Config{UserFailures: 3}), func(d Driver) {
			for i := range 2 {
				d.Fail(alice, fmt.Sprint("203.0.113.", i), 0)
			}
			d.Reserve(alice, home, 0, 0, true)
			d.Succeed(alice, home, 0)
			d.Fail(alice, attacker, time.Second)
			d.Reserve(alice, home, time.Second, window, false)
		}},
	}
}

// codeLockCases: the code lock: 100 consecutive wrong codes per user,
// whatever the limits, until a right code or an unlock; no window.
func codeLockCases() []throttleCase {
	return []throttleCase{
		{"code lock at 100, whatever UserFailures says", with(throttle.Config{UserFailures: 3}), func(d Driver) {
			var never time.Time
			d.WrongCodes(throttle.MaxCodeFailures-1, alice, never, 0, 1)
			d.CodeLocked(alice, never, false)
			d.WrongCodes(1, alice, never, 0, throttle.MaxCodeFailures)
			d.CodeLocked(alice, never, true)
			d.CodeLocked("bob", never, false)
			d.ReserveCode(alice, never, 0, 0, false)
			d.ReserveCode(alice, never, window, 0, false)
			d.ReserveCode(alice, never, 365*24*time.Hour, 0, false) // no window lifts it
			d.ReserveCode("bob", never, 0, 1, true)                 // other users are not affected
			d.Reserve(alice, home, 0, 0, true)                      // nor passwords: the lock is codes'
		}},
		{"code lock: a right code starts the count again", fast(), func(d Driver) {
			var never time.Time
			d.WrongCodes(throttle.MaxCodeFailures-1, alice, never, 0, 1)
			d.ReserveCode(alice, never, 0, throttle.MaxCodeFailures, true)
			d.CodeSuccess(alice)
			d.CodeLocked(alice, never, false)
			d.WrongCodes(throttle.MaxCodeFailures, alice, never, time.Second, 1)
			d.ReserveCode(alice, never, time.Second, 0, false)
			d.CodeSuccess("bob") // a user without a count
		}},
		{"code lock: an unlock after the last code lifts it", fast(), func(d Driver) {
			var never time.Time
			d.WrongCodes(throttle.MaxCodeFailures, alice, never, 0, 1)
			d.ReserveCode(alice, T0.Add(-time.Second), 0, 0, false) // an unlock before the codes
			d.CodeLocked(alice, T0.Add(-time.Second), true)
			unlock := T0.Add(time.Minute)
			d.CodeLocked(alice, unlock, false)
			d.ReserveCode(alice, unlock, time.Minute, 1, true) // counted at the unlock's moment: before it, not after
			d.WrongCodes(throttle.MaxCodeFailures, alice, unlock, 2*time.Minute, 1)
			d.ReserveCode(alice, unlock, 2*time.Minute, 0, false)
		}},
		{"code lock: a code not judged is taken back", fast(), func(d Driver) {
			var never time.Time
			d.WrongCodes(throttle.MaxCodeFailures, alice, never, 0, 1)
			d.ReleaseCode(alice)
			d.ReserveCode(alice, never, 0, throttle.MaxCodeFailures, true)
			d.ReserveCode(alice, never, 0, 0, false)
			d.ReleaseCode("bob") // a user without a count
			d.ReserveCode("bob", never, 0, 1, true)
			d.ReleaseCode("bob")
			d.ReleaseCode("bob") // one too many counts for nothing
			d.ReserveCode("bob", never, 0, 1, true)
		}},
		{"code lock: codes at once", fast(), func(d Driver) {
			if got := d.ParallelCodes(2*throttle.MaxCodeFailures, alice, 0); got != throttle.MaxCodeFailures {
				d.T.Errorf("%d codes at once: %d admitted; want %d", 2*throttle.MaxCodeFailures, got, throttle.MaxCodeFailures)
			}
			d.ReserveCode(alice, time.Time{}, 0, 0, false)
		}},
	}
}

// windowCases: the window.
func windowCases() []throttleCase {
	return []throttleCase{
		{"a quiet window forgets", fast(), func(d Driver) {
			for range 5 {
				d.Fail(alice, home, 0)
			}
			for range 5 {
				d.Reserve(alice, home, window, 0, true)
				d.Fail(alice, home, window)
			}
			d.Reserve(alice, home, window, time.Second, false)
		}},
		{"just inside the window remembers", fast(), func(d Driver) {
			for range 5 {
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, window-time.Nanosecond, 0, true) // the 1s backoff is long over
			d.Fail(alice, home, window-time.Nanosecond)
			d.Reserve(alice, home, window-time.Nanosecond, 2*time.Second, false) // the sixth failure counts
		}},
		{"failures less than a window apart accumulate", fast(), func(d Driver) {
			for i := range 5 {
				d.Fail(alice, home, time.Duration(i)*14*time.Minute)
			}
			d.Reserve(alice, home, 56*time.Minute, time.Second, false)
		}},
		{"waiting out a cap equal to the window forgets", with(throttle.Config{MaxBackoff: window}), func(d Driver) {
			for range 15 {
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, 0, window, false)
			d.Reserve(alice, home, window, 0, true)
			d.Fail(alice, home, window)
			d.Reserve(alice, home, window, 0, true) // one failure into a new streak
		}},
		{"the window forgets failures, not attempts in flight", fast(), func(d Driver) {
			for range 5 {
				d.Reserve(alice, home, 0, 0, true)
			}
			for range 4 {
				d.Fail(alice, home, 0)
			}
			// Four failures forgotten, one attempt still pending: four places.
			for range 4 {
				d.Reserve(alice, home, window, 0, true)
			}
			d.Wait(alice, home, window)
		}},
	}
}

// addressCases: the address: a bucket of failures.
func addressCases() []throttleCase {
	return []throttleCase{
		{"address failures: burst then rate", throttle.Config{}, func(d Driver) {
			for i := range 10 {
				d.Reserve(fmt.Sprint("user", i), home, 0, 0, true)
				d.Fail(fmt.Sprint("user", i), home, 0)
			}
			d.Reserve("user10", home, 0, time.Second, false)
			d.Reserve("user10", "192.0.2.2", 0, 0, true) // another address has its own bucket
			d.Reserve("user11", home, time.Second, 0, true)
			d.Fail("user11", home, time.Second)
			d.Reserve("user12", home, time.Second, time.Second, false)
			d.Reserve("user12", home, 1500*time.Millisecond, time.Second, false)
		}},
		{"address slow rate", throttle.Config{AddrRate: 0.1, AddrBurst: 1}, func(d Driver) {
			d.Reserve(alice, home, 0, 0, true)
			d.Fail(alice, home, 0)
			d.Reserve(alice, home, 0, 10*time.Second, false)
			d.Reserve(alice, home, 2500*time.Millisecond, 8*time.Second, false)
			d.Reserve(alice, home, 10*time.Second, 0, true)
		}},
		{"address refills by the millisecond", throttle.Config{AddrRate: 2, AddrBurst: 1}, func(d Driver) {
			d.Reserve(alice, home, 0, 0, true)
			d.Fail(alice, home, 0)
			d.Reserve(alice, home, 0, time.Second, false) // half a second, rounded up
			d.Reserve(alice, home, 499*time.Millisecond, time.Second, false)
			d.Reserve(alice, home, 500*time.Millisecond, 0, true)
		}},
		{"address successes take no token (a NAT)", throttle.Config{}, func(d Driver) {
			for i := range 100 {
				d.Reserve(fmt.Sprint("user", i), home, 0, 0, true)
				d.Succeed(fmt.Sprint("user", i), home, 0)
			}
		}},
		{"address failures completing at once all count", throttle.Config{AddrRate: 1, AddrBurst: 2}, func(d Driver) {
			for i := range 4 { // four attempts admitted while the bucket still had tokens
				d.Reserve(fmt.Sprint("user", i), home, 0, 0, true)
			}
			for i := range 4 {
				d.Fail(fmt.Sprint("user", i), home, 0)
			}
			d.Reserve("user9", home, 0, 3*time.Second, false) // two below zero, and one more to take
			d.Reserve("user9", home, 2500*time.Millisecond, time.Second, false)
			d.Reserve("user9", home, 3*time.Second, 0, true)
		}},
		{"address refused attempts take no token", throttle.Config{}, func(d Driver) {
			for range 5 {
				d.Fail(alice, home, 0)
			}
			for range 50 {
				d.Reserve(alice, home, 0, time.Second, false)
			}
			for i := range 5 { // five failures took five of ten tokens
				d.Reserve(fmt.Sprint("user", i), home, 0, 0, true)
			}
		}},
		{"the longest wait is the answer", throttle.Config{AddrRate: 1, AddrBurst: 5}, func(d Driver) {
			for range 8 { // the pair's backoff is 8s; the bucket is 3 below zero: 4s
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, 0, 8*time.Second, false)
			d.Reserve("bob", home, 0, 4*time.Second, false)
		}},
	}
}

// reserveCases: reserve before compare: the places are taken before any
// password check.
func reserveCases() []throttleCase {
	return []throttleCase{
		{"reserve before compare: pair", fast(), func(d Driver) {
			for range 5 {
				d.Reserve(alice, home, 0, 0, true)
			}
			for range 5 {
				d.Wait(alice, home, 0) // the places are taken by attempts in flight
			}
			d.Release(alice, home) // one never reached the hasher
			d.Reserve(alice, home, 0, 0, true)
			for range 5 {
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, 0, time.Second, false) // the backoff, as in series
			// After the backoff one attempt at a time goes through.
			d.Reserve(alice, home, time.Second, 0, true)
			d.Wait(alice, home, time.Second)
			d.Fail(alice, home, time.Second)
			d.Reserve(alice, home, time.Second, 2*time.Second, false)
		}},
		{"reserve before compare: release frees the places", fast(), func(d Driver) {
			for range 5 {
				d.Reserve(alice, home, 0, 0, true)
			}
			for range 5 {
				d.Release(alice, home)
			}
			d.Release(alice, home) // one too many counts for nothing
			for range 5 {
				d.Reserve(alice, home, 0, 0, true)
			}
			d.Wait(alice, home, 0)
		}},
		{"reserve before compare: success frees the user's place", with(throttle.Config{UserFailures: 2}), func(d Driver) {
			d.Reserve(alice, home, 0, 0, true)
			d.Reserve(alice, attacker, 0, 0, true)
			d.Wait(alice, "192.0.2.3", 0)
			d.Succeed(alice, home, 0)
			d.Reserve(alice, "192.0.2.3", 0, 0, true)
		}},
		{"reserve before compare: user", with(throttle.Config{UserFailures: 3}), func(d Driver) {
			if got := d.Parallel(10, alice, func(i int) string { return fmt.Sprint("203.0.113.", i) }, 0); got != 3 {
				d.T.Errorf("10 parallel attempts from 10 addresses at a ceiling of 3: %d admitted; want 3", got)
			}
		}},
		{"reserve before compare: concurrent", fast(), func(d Driver) {
			if got := d.Parallel(50, alice, OneAddr, 0); got != 5 {
				d.T.Errorf("50 concurrent reservations at a limit of 5: %d admitted; want 5", got)
			}
			for range 5 {
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, 0, time.Second, false)
			if got := d.Parallel(50, alice, OneAddr, time.Second); got != 1 {
				d.T.Errorf("50 concurrent reservations after the backoff: %d admitted; want 1", got)
			}
		}},
	}
}

// inFlightCases: attempts in flight are not failures: an attempt over a limit
// only because of them waits, and is then decided on the failures they
// leave.
func inFlightCases() []throttleCase {
	return []throttleCase{
		{"in flight at the pair's limit: wait, then the settled failures decide", fast(), func(d Driver) {
			for range 5 {
				d.Reserve(alice, home, 0, 0, true)
			}
			d.Wait(alice, home, 0)
			for range 4 {
				d.Fail(alice, home, 0)
			}
			d.Wait(alice, home, 0) // four failures and one in flight: still not refused
			d.Fail(alice, home, 0)
			d.Reserve(alice, home, 0, time.Second, false) // five settled failures: refused
		}},
		{"in flight at the pair's limit: a success lets the next in", fast(), func(d Driver) {
			for range 5 {
				d.Reserve(alice, home, 0, 0, true)
			}
			d.Wait(alice, home, 0)
			d.Release(alice, home)
			d.Reserve(alice, home, 0, 0, true) // a released place is free again
			d.Wait(alice, home, 0)
			for range 4 {
				d.Fail(alice, home, 0)
			}
			d.Succeed(alice, home, 0)
			d.Reserve(alice, home, 0, 0, true) // the success cleared the failures
		}},
		{"in flight at the user's limit: wait, then the settled failures decide", with(throttle.Config{UserFailures: 3}), func(d Driver) {
			for i := range 3 {
				d.Reserve(alice, fmt.Sprint("203.0.113.", i), 0, 0, true)
			}
			d.Wait(alice, home, 0)
			d.Wait(alice, attacker, 0) // from any address
			d.Fail(alice, "203.0.113.0", 0)
			d.Wait(alice, attacker, 0) // one failure and two in flight, of three
			d.Succeed(alice, "203.0.113.1", 0)
			d.Reserve(alice, home, 0, 0, true) // one failure and one in flight: a place
			d.Fail(alice, "203.0.113.2", 0)
			d.Wait(alice, attacker, 0) // two failures and one in flight
			d.Fail(alice, home, 0)
			d.Reserve(alice, attacker, 0, window, false) // three settled failures: refused everywhere
		}},
		{"settled failures at the limit refuse, attempts in flight or not", fast(), func(d Driver) {
			for range 5 {
				d.Reserve(alice, home, 0, 0, true)
				d.Fail(alice, home, 0)
			}
			d.Reserve(alice, home, 0, time.Second, false) // refused, not told to wait
			d.Reserve(alice, home, time.Second, 0, true)  // after the backoff: one at a time
			d.Wait(alice, home, time.Second)
			d.Fail(alice, home, time.Second)
			d.Reserve(alice, home, time.Second, 2*time.Second, false)
		}},
		{"a refusal outranks a wait", throttle.Config{PairFailures: 1, AddrRate: 1, AddrBurst: 1}, func(d Driver) {
			d.Reserve(alice, home, 0, 0, true) // the pair's only place, in flight
			d.Wait(alice, home, 0)
			d.Reserve("bob", home, 0, 0, true)
			d.Fail("bob", home, 0)                        // the address's bucket is empty
			d.Reserve(alice, home, 0, time.Second, false) // refused by the bucket, not told to wait
		}},
	}
}

// explainCases: Explain: which limits refuse, for the audit line; it changes
// nothing.
func explainCases() []throttleCase {
	return []throttleCase{
		{"explain names the pair", fast(), func(d Driver) {
			for range 4 {
				d.Fail(alice, home, 0)
			}
			d.Explain(alice, home, 0, 0) // one below the limit
			d.Fail(alice, home, 0)
			d.Explain(alice, home, 0, throttle.LimitPair)
			d.Explain(alice, home, 999*time.Millisecond, throttle.LimitPair)
			d.Explain(alice, attacker, 0, 0) // pairs are apart
			d.Explain("bob", home, 0, 0)
			d.Reserve(alice, home, 0, time.Second, false) // as without Explain
			d.Explain(alice, home, time.Second, 0)        // the backoff is over
			d.Reserve(alice, home, time.Second, 0, true)
		}},
		{"explain names the pair and the user", with(throttle.Config{UserFailures: 5}), func(d Driver) {
			for range 5 {
				d.Fail(alice, home, 0)
			}
			d.Explain(alice, home, 0, throttle.LimitPair|throttle.LimitUser)
			d.Explain(alice, attacker, 0, throttle.LimitUser)
			d.Explain(alice, home, time.Second, throttle.LimitUser) // the pair's backoff is over, the user's window is not
			d.Reserve(alice, home, time.Second, window-time.Second, false)
			d.Explain(alice, home, window, 0)
			d.Reserve(alice, home, window, 0, true)
		}},
		{"explain names the client", throttle.Config{AddrRate: 1, AddrBurst: 2}, func(d Driver) {
			d.Fail(alice, home, 0)
			d.Explain("carol", home, 0, 0) // a token left
			d.Fail("bob", home, 0)
			d.Explain("carol", home, 0, throttle.LimitClient) // the bucket is dry, over all usernames
			d.Explain(alice, home, 0, throttle.LimitClient)
			d.Explain("carol", attacker, 0, 0)
			d.Reserve("carol", home, 0, time.Second, false)
			d.Explain("carol", home, time.Second, 0) // a token came back
		}},
		{"explain takes no token and reserves no place", throttle.Config{PairFailures: 2, AddrRate: 1, AddrBurst: 2}, func(d Driver) {
			d.Fail("bob", home, 0) // one token left
			d.Reserve(alice, home, 0, 0, true)
			for range 5 {
				d.Explain(alice, home, 0, 0) // the attempt in flight counts for nothing
			}
			d.Reserve(alice, home, 0, 0, true) // the second place, and the bucket's last token, still there
			d.Wait(alice, home, 0)
			d.Fail(alice, home, 0)
			d.Fail(alice, home, 0)
			for range 5 {
				d.Explain(alice, home, 0, throttle.LimitPair|throttle.LimitClient)
			}
			d.Reserve(alice, home, 0, 2*time.Second, false) // the bucket's wait (-1 token: 2s), not more
		}},
		{"explain after an unlock names only the client", throttle.Config{UserFailures: 5, AddrRate: 1, AddrBurst: 5}, func(d Driver) {
			for range 5 {
				d.Fail(alice, home, 0)
			}
			d.Explain(alice, home, 0, throttle.LimitPair|throttle.LimitUser|throttle.LimitClient)
			// user unlock moves the user's counts to a new key
			// (httpapi's throttleKey); the client's bucket stays.
			d.Explain(alice+"\x00unlocked 1767225600000000000", home, 0, throttle.LimitClient)
			d.Explain(alice+"\x00unlocked 1767225600000000000", attacker, 0, 0)
		}},
	}
}

// guessCases: wrong passwords sent at once, as logins send them: no more
// password checks than the limits let through.
func guessCases() []throttleCase {
	return []throttleCase{
		{"parallel wrong passwords: no more checks than the limit", fast(), func(d Driver) {
			if checked, refused := d.Guesses(20, alice, OneAddr, 0); checked != 5 || refused != 15 {
				d.T.Errorf("20 parallel wrong passwords at a limit of 5 = %d checked, %d refused; want 5, 15", checked, refused)
			}
		}},
		{"parallel wrong passwords: no more checks than the user's limit", with(throttle.Config{UserFailures: 3}), func(d Driver) {
			if checked, refused := d.Guesses(20, alice, func(i int) string { return fmt.Sprint("203.0.113.", i) }, 0); checked != 3 || refused != 17 {
				d.T.Errorf("20 parallel wrong passwords from 20 addresses at a ceiling of 3 = %d checked, %d refused; want 3, 17", checked, refused)
			}
		}},
	}
}

// backoffCase returns a case that makes pairFailures failures and then
// expects each of waits (in seconds) in turn, failing once after each.
func backoffCase(pairFailures int, waits ...time.Duration) func(d Driver) {
	return func(d Driver) {
		var now time.Duration
		for range pairFailures {
			d.Fail(alice, home, now)
		}
		for _, w := range waits {
			w *= time.Second
			d.Reserve(alice, home, now, w, false)
			d.Reserve(alice, home, now+w-time.Nanosecond, time.Second, false)
			now += w
			d.Reserve(alice, home, now, 0, true)
			d.Fail(alice, home, now)
		}
	}
}
