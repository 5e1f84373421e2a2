package main

import (
	"math"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// throttleConfig sets the login throttle's limits. A zero or negative field
// takes its default, the serve setting's (settings.go).
type throttleConfig struct {
	PairFailures int           // failures per (username, client address) before backoff
	Window       time.Duration // a failure streak is forgotten after this long without a failure
	BaseBackoff  time.Duration // first backoff once PairFailures is reached; doubles per further failure
	MaxBackoff   time.Duration // backoff cap
	UserFailures int           // failures per username over all addresses before it is refused everywhere
	AddrRate     float64       // login attempts per second per client address
	AddrBurst    int           // attempts a client address may make at once
	MaxEntries   int           // keys per table (pairs, users, addresses); 100000 is about 60 MB in all when full of 150-byte usernames
}

// withDefaults returns c with every unset field at its serve setting's default.
func (c throttleConfig) withDefaults() throttleConfig {
	d := defaultServeConfig().throttle
	setDefault(&c.PairFailures, d.PairFailures)
	setDefault(&c.Window, d.Window)
	setDefault(&c.BaseBackoff, d.BaseBackoff)
	setDefault(&c.MaxBackoff, d.MaxBackoff)
	setDefault(&c.UserFailures, d.UserFailures)
	setDefault(&c.AddrRate, d.AddrRate)
	setDefault(&c.AddrBurst, d.AddrBurst)
	setDefault(&c.MaxEntries, d.MaxEntries)
	return c
}

// setDefault sets *v to def unless *v is positive.
func setDefault[T int | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// A throttle decides whether a login attempt may proceed. It keeps three
// tables, each bounded to MaxEntries keys:
//
//   - pairs, per (username, client address): a streak of failures. Once it
//     holds n >= PairFailures failures, attempts are refused until
//     BaseBackoff·2^(n-PairFailures), capped at MaxBackoff, after the last
//     failure: with the defaults, attempts 1–5 proceed and then the waits
//     are 1s, 2s, 4s … 5m. Success clears the pair.
//   - users, per username over all addresses: a streak of failures. Once it
//     holds UserFailures failures, every address is refused until Window
//     after the last failure. This stops credential stuffing from many
//     addresses; its price is that an attacker who makes UserFailures
//     failed attempts at a username locks its owner out everywhere for a
//     Window. Below that ceiling one address's failures never affect
//     another's. A success does not reset this count.
//   - addrs, per client address: a token bucket of AddrRate attempts per
//     second, AddrBurst deep, over all login attempts whatever the username.
//
// A streak is forgotten once Window passes without a new failure, so failures
// spaced less than Window apart keep accumulating: stricter than a sliding
// window, and it needs only a count and a time per key. A pair that waits
// out a backoff of Window or more (the defaults cap backoff at Window) is
// thereby forgotten and starts afresh with PairFailures free attempts; a
// MaxBackoff below Window keeps a persistent guesser at one guess per
// MaxBackoff instead.
//
// When a table is full, adding a key evicts its least recently updated key.
// Pairs and users are updated only on failure, so the evicted key is the one
// whose streak ends first (an expired one if any). Addresses are updated on
// every admitted attempt, so the evicted bucket is the one idle the longest.
// Since a failure costs a bcrypt compare, the server records failures only
// as fast as it can hash (about 8/s on 2 cores at cost 12, 30k per hour), so
// flushing a live streak out of a table takes longer than a Window at the
// default MaxEntries.
//
// check and failure are separate calls with a password check in between,
// so attempts already admitted all count when they fail: a pair or user may
// overshoot its limit by the number of attempts in flight at once, which the
// address burst and the password-check admission bound.
type throttle struct {
	cfg throttleConfig

	mu    sync.Mutex // guards pairs, users and addrs, including the limiters in addrs
	pairs *lru[pairKey, streak]
	users *lru[string, streak]
	addrs *lru[string, *rate.Limiter]
}

// pairKey is a (username, client address) pair: a struct of two strings, so
// a look-up builds no concatenated key.
type pairKey struct{ username, addr string }

// A streak counts failures that each came less than a Window after the
// previous one.
type streak struct {
	n    int
	last time.Time // of the latest failure
}

// trimPerWrite is how many expired keys a write removes from each table's
// old end: more than one, so that tables drain after a flood even though
// each write may add a key.
const trimPerWrite = 2

// newThrottle returns a throttle with cfg's limits, unset ones at their defaults.
func newThrottle(cfg throttleConfig) *throttle {
	cfg = cfg.withDefaults()
	return &throttle{
		cfg:   cfg,
		pairs: newLRU[pairKey, streak](cfg.MaxEntries),
		users: newLRU[string, streak](cfg.MaxEntries),
		addrs: newLRU[string, *rate.Limiter](cfg.MaxEntries),
	}
}

// check reports whether a login attempt for username from addr may proceed
// at now. If not, retryAfter is how long until it may: a whole number of
// seconds, at least 1s, ready for a Retry-After header. The caller must call
// check before any password work, so that a refused attempt costs no bcrypt,
// and must refuse the attempt even if the password would be right.
//
// addr should come from clientKey.
// An admitted attempt takes a token from addr's bucket; a refused one does not.
func (t *throttle) check(username, addr string, now time.Time) (retryAfter time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()

	// Report the longest of the waits, so a client that honours
	// Retry-After is not refused again at once for another reason.
	var wait time.Duration
	if s, ok := liveStreak(t.pairs, pairKey{username, addr}, now, t.cfg.Window); ok && s.n >= t.cfg.PairFailures {
		wait = max(wait, s.last.Add(t.backoff(s.n)).Sub(now))
	}
	if s, ok := liveStreak(t.users, username, now, t.cfg.Window); ok && s.n >= t.cfg.UserFailures {
		wait = max(wait, s.last.Add(t.cfg.Window).Sub(now))
	}
	if wait > 0 {
		return ceilSecond(wait), false
	}

	lim, ok := t.addrs.get(addr)
	if !ok {
		lim = rate.NewLimiter(rate.Limit(t.cfg.AddrRate), t.cfg.AddrBurst)
	}
	if tokens := lim.TokensAt(now); tokens < 1 {
		return ceilSecond(time.Duration(math.Ceil((1 - tokens) / t.cfg.AddrRate * float64(time.Second)))), false
	}
	lim.AllowN(now, 1)
	t.addrs.put(addr, lim)
	trim(t.addrs, trimPerWrite, func(lim *rate.Limiter) bool {
		return lim.TokensAt(now) >= float64(t.cfg.AddrBurst) // a full bucket is as good as none
	})
	return 0, true
}

// failure records a failed login for username from addr at now: a wrong
// password, an unknown user or a disabled one alike.
func (t *throttle) failure(username, addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	addFailure(t.pairs, pairKey{username, addr}, now, t.cfg.Window)
	addFailure(t.users, username, now, t.cfg.Window)
}

// success records a successful login for username from addr at now: it
// clears the pair's failures. The username's count over all addresses stays,
// or the owner logging in would reset the ceiling in the middle of an attack.
func (t *throttle) success(username, addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pairs.remove(pairKey{username, addr})
}

// sizes returns how many keys each table holds, for tests and metrics.
func (t *throttle) sizes() (pairs, users, addrs int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pairs.len(), t.users.len(), t.addrs.len()
}

// backoff returns how long a pair with n >= PairFailures failures waits
// after its last failure: BaseBackoff·2^(n-PairFailures), capped at MaxBackoff.
func (t *throttle) backoff(n int) time.Duration {
	d := min(t.cfg.BaseBackoff, t.cfg.MaxBackoff)
	for i := t.cfg.PairFailures; i < n; i++ {
		if d > t.cfg.MaxBackoff/2 { // doubling would pass the cap (or overflow)
			return t.cfg.MaxBackoff
		}
		d *= 2
	}
	return d
}

// liveStreak returns k's streak and reports whether it is still live at now,
// deleting it if it has expired.
func liveStreak[K comparable](l *lru[K, streak], k K, now time.Time, window time.Duration) (streak, bool) {
	s, ok := l.get(k)
	if ok && now.Sub(s.last) >= window {
		l.remove(k)
		return streak{}, false
	}
	return s, ok
}

// addFailure extends k's streak with a failure at now, starting a new streak
// if the old one has expired, and trims expired streaks from l.
func addFailure[K comparable](l *lru[K, streak], k K, now time.Time, window time.Duration) {
	s, _ := liveStreak(l, k, now, window)
	s.n++
	s.last = now
	l.put(k, s)
	trim(l, trimPerWrite, func(s streak) bool { return now.Sub(s.last) >= window })
}

// trim removes up to n of l's least recently put keys while expired reports
// true of their values. Removing an expired key changes no decision.
func trim[K comparable, V any](l *lru[K, V], n int, expired func(V) bool) {
	for range n {
		k, v, ok := l.oldest()
		if !ok || !expired(v) {
			return
		}
		l.remove(k)
	}
}

// ceilSecond rounds d > 0 up to a whole number of seconds, at least one:
// a Retry-After that is honoured is never early.
func ceilSecond(d time.Duration) time.Duration {
	return max(time.Second, (d + time.Second - 1).Truncate(time.Second))
}

// clientKey returns the throttle key for a client's IP (from clientIP):
// an IPv4-mapped IPv6 address as plain IPv4, and an IPv6 address as its /64
// prefix, since one subscriber usually holds a whole /64 and could otherwise
// rotate addresses for free.
func clientKey(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}
