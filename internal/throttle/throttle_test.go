package throttle

import (
	"fmt"
	"math"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// t0 is the time the cases start at.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// FastAddrs lifts the per-address rate out of the way of tests about pairs and users.
const fastAddrs, fastBurst = 1e6, 1 << 20

// wantCheck fails the test unless th.reserve(username, addr, now) is
// Admitted (wantOK) or Refused with wantRetry.
func wantCheck(t *testing.T, th *throttle, username, addr string, now time.Time, wantRetry time.Duration, wantOK bool) {
	t.Helper()
	want := Refused
	if wantOK {
		want = Admitted
	}
	wantVerdict(t, th, username, addr, now, want, wantRetry)
}

// wantVerdict fails the test unless th.reserve(username, addr, now) returns (want, wantRetry).
func wantVerdict(t *testing.T, th *throttle, username, addr string, now time.Time, want Verdict, wantRetry time.Duration) {
	t.Helper()
	if v, retry := th.reserve(username, addr, now); v != want || retry != wantRetry {
		t.Errorf("reserve(%q, %q, t0+%v) = %v, %v; want %v, %v", username, addr, now.Sub(t0), v, retry, want, wantRetry)
	}
}

func TestThrottleDefaults(t *testing.T) {
	want := Config{
		PairFailures: 5,
		Window:       15 * time.Minute,
		BaseBackoff:  time.Second,
		MaxBackoff:   5 * time.Minute, // the --login-max-backoff default, not the 15m withDefaults once had
		UserFailures: 100,
		AddrRate:     1,
		AddrBurst:    10,
		MaxEntries:   100000,
	}
	if got := newThrottle(Config{}).cfg; got != want {
		t.Errorf("newThrottle(Config{}).cfg = %+v; want %+v", got, want)
	}
	custom := Config{PairFailures: 3, Window: time.Hour, BaseBackoff: 2 * time.Second, MaxBackoff: time.Minute,
		UserFailures: 7, AddrRate: 0.5, AddrBurst: 4, MaxEntries: 9}
	if got := newThrottle(custom).cfg; got != custom {
		t.Errorf("newThrottle(%+v).cfg = %+v; want it unchanged", custom, got)
	}
}

func TestThrottlePairLockout(t *testing.T) {
	for _, pairFailures := range []int{0, 1, 3, 5} { // 0: the default, 5
		want := pairFailures
		if want == 0 {
			want = 5
		}
		t.Run(fmt.Sprint(pairFailures), func(t *testing.T) {
			th := newThrottle(Config{PairFailures: pairFailures, AddrRate: fastAddrs, AddrBurst: fastBurst})
			for range want {
				wantCheck(t, th, "alice", "192.0.2.1", t0, 0, true)
				th.failure("alice", "192.0.2.1", t0)
			}
			wantCheck(t, th, "alice", "192.0.2.1", t0, time.Second, false)
			wantCheck(t, th, "alice", "192.0.2.1", t0.Add(999*time.Millisecond), time.Second, false)
			wantCheck(t, th, "alice", "192.0.2.1", t0.Add(time.Second), 0, true)
		})
	}
}

func TestThrottleBackoffGrows(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   Config
		waits []time.Duration // seconds, after the PairFailures-th failure and each further one
	}{
		{"defaults", Config{},
			[]time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}},
		{"cap 15m", Config{MaxBackoff: 15 * time.Minute},
			[]time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 900}},
		{"cap 30s", Config{MaxBackoff: 30 * time.Second, AddrRate: fastAddrs, AddrBurst: fastBurst},
			[]time.Duration{1, 2, 4, 8, 16, 30, 30, 30}},
		{"base 3s, 2 failures", Config{PairFailures: 2, BaseBackoff: 3 * time.Second, MaxBackoff: 20 * time.Second},
			[]time.Duration{3, 6, 12, 20, 20}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			th := newThrottle(tt.cfg)
			now := t0
			for range th.cfg.PairFailures {
				th.failure("alice", "192.0.2.1", now)
			}
			for _, w := range tt.waits {
				w *= time.Second
				wantCheck(t, th, "alice", "192.0.2.1", now, w, false)
				wantCheck(t, th, "alice", "192.0.2.1", now.Add(w-time.Nanosecond), time.Second, false)
				now = now.Add(w)
				wantCheck(t, th, "alice", "192.0.2.1", now, 0, true)
				th.failure("alice", "192.0.2.1", now)
			}
		})
	}
}

func TestThrottleBackoffCap(t *testing.T) {
	th := newThrottle(Config{MaxBackoff: 15 * time.Minute})
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{
		{5, time.Second},
		{6, 2 * time.Second},
		{14, 512 * time.Second},
		{15, 15 * time.Minute},
		{100, 15 * time.Minute},
		{math.MaxInt, 15 * time.Minute},
	} {
		if got := th.backoff(tt.n); got != tt.want {
			t.Errorf("backoff(%d) = %v; want %v", tt.n, got, tt.want)
		}
	}
	// A base above the cap is capped too.
	th = newThrottle(Config{BaseBackoff: time.Hour, MaxBackoff: time.Minute})
	if got := th.backoff(5); got != time.Minute {
		t.Errorf("backoff(5) with base 1h, cap 1m = %v; want 1m0s", got)
	}
}

func TestThrottleSuccessClearsPair(t *testing.T) {
	th := newThrottle(Config{AddrRate: fastAddrs, AddrBurst: fastBurst})
	for range 6 {
		th.failure("alice", "192.0.2.1", t0)
	}
	wantCheck(t, th, "alice", "192.0.2.1", t0, 2*time.Second, false)
	th.success("alice", "192.0.2.1", t0.Add(2*time.Second))
	now := t0.Add(2 * time.Second)
	// A fresh start: five failures again, then the first backoff, not the third.
	for range 5 {
		wantCheck(t, th, "alice", "192.0.2.1", now, 0, true)
		th.failure("alice", "192.0.2.1", now)
	}
	wantCheck(t, th, "alice", "192.0.2.1", now, time.Second, false)
}

func TestThrottlePairIsolation(t *testing.T) {
	th := newThrottle(Config{MaxBackoff: 15 * time.Minute, AddrRate: fastAddrs, AddrBurst: fastBurst})
	for range 20 {
		th.failure("alice", "203.0.113.66", t0)
	}
	for _, tt := range []struct {
		username, addr string
		wantRetry      time.Duration
		wantOK         bool
	}{
		{"alice", "203.0.113.66", 15 * time.Minute, false}, // the attacker's pair
		{"alice", "192.0.2.1", 0, true},                    // alice from home: below the user ceiling
		{"bob", "203.0.113.66", 0, true},                   // another user from the attacker's address
	} {
		wantCheck(t, th, tt.username, tt.addr, t0, tt.wantRetry, tt.wantOK)
	}
}

func TestThrottleUserCeiling(t *testing.T) {
	th := newThrottle(Config{UserFailures: 10, AddrRate: fastAddrs, AddrBurst: fastBurst})
	last := t0.Add(9 * time.Second)
	for i := range 10 {
		if i == 9 {
			// One below the ceiling, a new address still gets in.
			wantCheck(t, th, "alice", "192.0.2.1", last, 0, true)
		}
		th.failure("alice", fmt.Sprintf("203.0.113.%d", i), t0.Add(time.Duration(i)*time.Second))
	}
	for _, tt := range []struct {
		username string
		addr     string
		now      time.Time
		wantRet  time.Duration
		wantOK   bool
	}{
		{"alice", "192.0.2.1", last, 15 * time.Minute, false},   // never failed from here
		{"alice", "203.0.113.0", last, 15 * time.Minute, false}, // an attacking address
		{"alice", "192.0.2.1", last.Add(14 * time.Minute), time.Minute, false},
		{"bob", "192.0.2.1", last, 0, true},                         // other users are not affected
		{"alice", "192.0.2.1", last.Add(15 * time.Minute), 0, true}, // the window has passed
	} {
		wantCheck(t, th, tt.username, tt.addr, tt.now, tt.wantRet, tt.wantOK)
	}
}

func TestThrottleWindowForgets(t *testing.T) {
	const w = 15 * time.Minute
	fail := func(th *throttle, at ...time.Duration) {
		for _, d := range at {
			th.failure("alice", "192.0.2.1", t0.Add(d))
		}
	}
	t.Run("quiet window forgets", func(t *testing.T) {
		th := newThrottle(Config{AddrRate: fastAddrs, AddrBurst: fastBurst})
		fail(th, 0, 0, 0, 0, 0)
		now := t0.Add(w)
		for range 5 {
			wantCheck(t, th, "alice", "192.0.2.1", now, 0, true)
			th.failure("alice", "192.0.2.1", now)
		}
		wantCheck(t, th, "alice", "192.0.2.1", now, time.Second, false)
	})
	t.Run("just inside the window remembers", func(t *testing.T) {
		th := newThrottle(Config{AddrRate: fastAddrs, AddrBurst: fastBurst})
		fail(th, 0, 0, 0, 0, 0)
		now := t0.Add(w - time.Nanosecond)
		wantCheck(t, th, "alice", "192.0.2.1", now, 0, true) // the 1s backoff is long over
		th.failure("alice", "192.0.2.1", now)
		wantCheck(t, th, "alice", "192.0.2.1", now, 2*time.Second, false) // the sixth failure counts
	})
	t.Run("failures less than a window apart accumulate", func(t *testing.T) {
		th := newThrottle(Config{AddrRate: fastAddrs, AddrBurst: fastBurst})
		fail(th, 0, 14*time.Minute, 28*time.Minute, 42*time.Minute, 56*time.Minute)
		wantCheck(t, th, "alice", "192.0.2.1", t0.Add(56*time.Minute), time.Second, false)
	})
	t.Run("waiting out a cap equal to the window forgets", func(t *testing.T) {
		// MaxBackoff at Window: the capped wait ends the streak.
		th := newThrottle(Config{MaxBackoff: 15 * time.Minute, AddrRate: fastAddrs, AddrBurst: fastBurst})
		fail(th, make([]time.Duration, 15)...)
		wantCheck(t, th, "alice", "192.0.2.1", t0, w, false)
		now := t0.Add(w)
		wantCheck(t, th, "alice", "192.0.2.1", now, 0, true)
		th.failure("alice", "192.0.2.1", now)
		wantCheck(t, th, "alice", "192.0.2.1", now, 0, true) // one failure into a new streak
	})
}

func TestThrottleAddrRate(t *testing.T) {
	t.Run("failures: burst then rate", func(t *testing.T) {
		th := newThrottle(Config{})
		for i := range 10 {
			user := fmt.Sprint("user", i)
			wantCheck(t, th, user, "192.0.2.1", t0, 0, true)
			th.failure(user, "192.0.2.1", t0)
		}
		wantCheck(t, th, "user10", "192.0.2.1", t0, time.Second, false)
		wantCheck(t, th, "user10", "192.0.2.2", t0, 0, true) // another address has its own bucket
		wantCheck(t, th, "user11", "192.0.2.1", t0.Add(time.Second), 0, true)
		th.failure("user11", "192.0.2.1", t0.Add(time.Second))
		wantCheck(t, th, "user12", "192.0.2.1", t0.Add(time.Second), time.Second, false)
		wantCheck(t, th, "user12", "192.0.2.1", t0.Add(1500*time.Millisecond), time.Second, false)
	})
	t.Run("slow rate", func(t *testing.T) {
		th := newThrottle(Config{AddrRate: 0.1, AddrBurst: 1})
		wantCheck(t, th, "alice", "192.0.2.1", t0, 0, true)
		th.failure("alice", "192.0.2.1", t0)
		wantCheck(t, th, "alice", "192.0.2.1", t0, 10*time.Second, false)
		wantCheck(t, th, "alice", "192.0.2.1", t0.Add(2500*time.Millisecond), 8*time.Second, false)
		wantCheck(t, th, "alice", "192.0.2.1", t0.Add(10*time.Second), 0, true)
	})
	t.Run("successes take no token", func(t *testing.T) {
		// A NAT: a hundred people log in correctly from one address at once.
		th := newThrottle(Config{})
		for i := range 100 {
			user := fmt.Sprint("user", i)
			wantCheck(t, th, user, "192.0.2.1", t0, 0, true)
			th.success(user, "192.0.2.1", t0)
		}
	})
	t.Run("failures completing at once all count", func(t *testing.T) {
		th := newThrottle(Config{AddrRate: 1, AddrBurst: 2})
		for i := range 4 { // four attempts admitted while the bucket still had tokens
			wantCheck(t, th, fmt.Sprint("user", i), "192.0.2.1", t0, 0, true)
		}
		for i := range 4 {
			th.failure(fmt.Sprint("user", i), "192.0.2.1", t0)
		}
		wantCheck(t, th, "user9", "192.0.2.1", t0, 3*time.Second, false) // two below zero, and one more to take
	})
	t.Run("refused attempts take no token", func(t *testing.T) {
		th := newThrottle(Config{})
		for range 5 {
			th.failure("alice", "192.0.2.1", t0)
		}
		for range 50 {
			wantCheck(t, th, "alice", "192.0.2.1", t0, time.Second, false)
		}
		for i := range 10 {
			wantCheck(t, th, fmt.Sprint("user", i), "192.0.2.1", t0, 0, true)
		}
	})
}

func TestThrottleBounded(t *testing.T) {
	const maxEntries = 8
	th := newThrottle(Config{MaxEntries: maxEntries})
	for i := range 10 * maxEntries {
		user, addr := fmt.Sprint("user", i), fmt.Sprint("198.51.100.", i)
		th.reserve(user, addr, t0)
		th.failure(user, addr, t0)
		th.reserve(fmt.Sprint("other", i), "192.0.2.1", t0) // rotating usernames from one address too
		th.failure(fmt.Sprint("other", i), "192.0.2.1", t0)
		if p, u, a := th.sizes(); p > maxEntries || u > maxEntries || a > maxEntries {
			t.Fatalf("after %d keys sizes() = %d, %d, %d; want each <= %d", i+1, p, u, a, maxEntries)
		}
	}
	// The most recent streak survives the flood.
	for range 4 {
		th.failure("user79", "198.51.100.79", t0)
	}
	wantCheck(t, th, "user79", "198.51.100.79", t0, time.Second, false)

	// Once expired, the flood drains as writes go on.
	later := t0.Add(time.Hour)
	for range maxEntries {
		th.reserve("alice", "192.0.2.1", later)
		th.failure("alice", "192.0.2.1", later)
	}
	if p, u, a := th.sizes(); p != 1 || u != 1 || a != 1 {
		t.Errorf("sizes() after the flood expired = %d, %d, %d; want 1, 1, 1", p, u, a)
	}
}

func TestThrottleConcurrent(t *testing.T) {
	th := newThrottle(Config{MaxEntries: 16})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				user, addr := fmt.Sprint("user", i%5), fmt.Sprint("192.0.2.", (g+i)%20)
				now := t0.Add(time.Duration(i) * time.Millisecond)
				if v, _ := th.reserve(user, addr, now); v == Admitted {
					if i%3 == 0 {
						th.success(user, addr, now)
					} else {
						th.failure(user, addr, now)
					}
				}
			}
		})
	}
	wg.Wait()
	if p, u, a := th.sizes(); p > 16 || u > 16 || a > 16 {
		t.Errorf("sizes() = %d, %d, %d; want each <= 16", p, u, a)
	}
}

func TestCeilSecond(t *testing.T) {
	for _, tt := range []struct{ d, want time.Duration }{
		{time.Nanosecond, time.Second},
		{time.Second, time.Second},
		{time.Second + time.Nanosecond, 2 * time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{15 * time.Minute, 15 * time.Minute},
	} {
		if got := ceilSecond(tt.d); got != tt.want {
			t.Errorf("ceilSecond(%v) = %v; want %v", tt.d, got, tt.want)
		}
	}
}

func TestClientKey(t *testing.T) {
	for _, tt := range []struct{ remoteAddr, want string }{
		{"192.0.2.1:54321", "192.0.2.1"},
		{"192.0.2.1:1", "192.0.2.1"}, // the port never matters
		{"[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::/64"}, // same /64
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"not an address", "invalid IP"},
	} {
		var ip netip.Addr // the zero Addr, as clientIP gives for what does not parse
		if ap, err := netip.ParseAddrPort(tt.remoteAddr); err == nil {
			ip = ap.Addr()
		}
		if got := ClientKey(ip); got != tt.want {
			t.Errorf("ClientKey(%q) = %q; want %q", tt.remoteAddr, got, tt.want)
		}
	}
}

// TestThrottleReserveBeforeCompare: attempts sent at once take the pair's
// and the user's places before any password is checked, so with the limit
// at N no more than N of them are let through.
func TestThrottleReserveBeforeCompare(t *testing.T) {
	t.Run("pair", func(t *testing.T) {
		th := newThrottle(Config{AddrRate: fastAddrs, AddrBurst: fastBurst})
		for range 5 {
			wantCheck(t, th, "alice", "192.0.2.1", t0, 0, true)
		}
		for range 5 {
			wantVerdict(t, th, "alice", "192.0.2.1", t0, Wait, 0) // the places are taken by attempts in flight
		}
		th.release("alice", "192.0.2.1") // one never reached the hasher
		wantCheck(t, th, "alice", "192.0.2.1", t0, 0, true)
		for range 5 {
			th.failure("alice", "192.0.2.1", t0)
		}
		wantCheck(t, th, "alice", "192.0.2.1", t0, time.Second, false) // the backoff, as in series
		// After the backoff one attempt at a time goes through.
		now := t0.Add(time.Second)
		wantCheck(t, th, "alice", "192.0.2.1", now, 0, true)
		wantVerdict(t, th, "alice", "192.0.2.1", now, Wait, 0)
		th.failure("alice", "192.0.2.1", now)
		wantCheck(t, th, "alice", "192.0.2.1", now, 2*time.Second, false)
	})
	t.Run("user", func(t *testing.T) {
		th := newThrottle(Config{UserFailures: 3, AddrRate: fastAddrs, AddrBurst: fastBurst})
		ok := 0
		for i := range 10 {
			if v, _ := th.reserve("alice", fmt.Sprint("203.0.113.", i), t0); v == Admitted {
				ok++
			}
		}
		if ok != 3 {
			t.Errorf("10 parallel attempts from 10 addresses at a ceiling of 3: %d admitted; want 3", ok)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		th := newThrottle(Config{AddrRate: fastAddrs, AddrBurst: fastBurst})
		var wg sync.WaitGroup
		var mu sync.Mutex // guards admitted
		admitted := 0
		for range 50 {
			wg.Go(func() {
				if v, _ := th.reserve("alice", "192.0.2.1", t0); v == Admitted {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if admitted != 5 {
			t.Errorf("50 concurrent reservations at a limit of 5: %d admitted; want 5", admitted)
		}
	})
}

func TestLimitsString(t *testing.T) {
	for _, tt := range []struct {
		l    Limits
		want string
	}{
		{0, ""},
		{LimitPair, "pair"},
		{LimitUser, "user"},
		{LimitClient, "client"},
		{LimitPair | LimitUser, "pair,user"},
		{LimitUser | LimitClient, "user,client"},
		{LimitPair | LimitUser | LimitClient, "pair,user,client"},
		{LimitPair | 1<<6, "pair,Limits(64)"},
	} {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("Limits(%d).String() = %q; want %q", uint8(tt.l), got, tt.want)
		}
	}
}
