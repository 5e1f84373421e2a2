package throttle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"sync"
	"time"

	"authsvc/internal/lru"

	"golang.org/x/time/rate"
)

// Config sets the login throttle's limits. A zero or negative field
// takes its default (DefaultConfig), which the serve flags show too.
type Config struct {
	PairFailures int           // failures per (username, client address) before backoff
	Window       time.Duration // a failure streak is forgotten after this long without a failure
	BaseBackoff  time.Duration // first backoff once PairFailures is reached; doubles per further failure
	MaxBackoff   time.Duration // backoff cap
	UserFailures int           // failures per username over all addresses before it is refused everywhere
	AddrRate     float64       // login attempts per second per client address
	AddrBurst    int           // attempts a client address may make at once
	MaxEntries   int           // keys per table (pairs, users, addresses); 100000 is about 60 MB in all when full of 150-byte usernames
}

// DefaultConfig returns the throttle's default limits.
func DefaultConfig() Config {
	return Config{
		PairFailures: 5,
		Window:       15 * time.Minute,
		BaseBackoff:  time.Second,
		MaxBackoff:   5 * time.Minute,
		UserFailures: 100,
		AddrRate:     1,
		AddrBurst:    10,
		MaxEntries:   100000,
	}
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
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

// A Throttle decides whether a login attempt may proceed, with the
// rules throttle (below) implements in memory; a throttle shared by a fleet
// keeps the same counters elsewhere.
//
// Reserve takes an attempt's place before its password is checked
// (Admitted), and exactly one of Failure, Success or Release settles it.
// Attempts in flight count against the pair's and the user's limits, so
// that with a limit of N, N attempts sent at once take every place and no
// more are checked until they settle: parallel guesses get no more checks
// than serial ones. But an attempt in flight is no failure: one that would
// be over a limit only because of attempts in flight is told to Wait, not
// Refused, and nothing is reserved for it. The caller asks again once they
// may have settled (holding no hasher slot meanwhile), and the answer then
// rests on the failures they left: Refused (429) if those reach the limit,
// else Admitted. Refused is for settled failures alone (and the client's
// bucket), with retryAfter a whole number of seconds, at least 1s. When
// settled failures refuse an attempt it is Refused even if attempts are
// also in flight.
//
// The code lock counts a user's second-factor codes at login (API.md,
// Two-factor authentication) over every client and instance: ReserveCode
// counts a code as wrong before it is checked, so that codes sent at once
// get no more checks than codes sent in turn, and CodeSuccess (a right
// code: the user's successful second step) or ReleaseCode (a code not
// judged) settles it; a wrong code needs nothing more. Once
// MaxCodeFailures are counted, ReserveCode refuses every code of the user,
// the right one too, and no window lifts it: only a success before, or an
// unlock (after: the user's FailuresAfter, which counts are judged by)
// does. A count whose last code came at or before after starts again from
// nothing. ReserveCode returns the count with this code (1 to
// MaxCodeFailures) when Admitted. Keys are usernames as the directory
// spells them, never the names Reserve counts under after an unlock.
// CodeLocked reports whether the lock refuses the user's codes now (as
// ReserveCode with after would), counting nothing: for an operator's
// view, as Explain is.
//
// Explain reports which limits would refuse an attempt of username from
// addr at now: the pair's or the user's settled failures, the client's
// bucket. It is for the audit line of a refused attempt, so that an
// operator can tell whether user unlock helps; it reserves nothing and
// takes no token, and attempts in flight (Wait) count for nothing in it.
//
// An error means the throttle could not decide: the caller fails closed
// (503), but for Explain, whose error costs only the audit line its limit.
type Throttle interface {
	Reserve(ctx context.Context, username, addr string, now time.Time) (v Verdict, retryAfter time.Duration, err error)
	Explain(ctx context.Context, username, addr string, now time.Time) (Limits, error)
	Failure(ctx context.Context, username, addr string, now time.Time) error
	Success(ctx context.Context, username, addr string, now time.Time) error
	Release(ctx context.Context, username, addr string) error
	ReserveCode(ctx context.Context, username string, after, now time.Time) (v Verdict, n int, err error)
	CodeSuccess(ctx context.Context, username string) error
	ReleaseCode(ctx context.Context, username string) error
	CodeLocked(ctx context.Context, username string, after time.Time) (bool, error)
}

// MaxCodeFailures is how many consecutive wrong second-factor codes a user
// may send at login, over every client and instance, before every second
// step of that user is refused until user unlock: NIST SP 800-63B's "no
// more than 100 consecutive failed attempts", fixed whatever
// Config.UserFailures says. So a stolen password buys at most 100 code
// guesses, not 100 per window.
const MaxCodeFailures = 100

// CodeLockRetryAfter is the Retry-After of a second step refused by the
// code lock. No time lifts the lock; this is how often a client that
// honours Retry-After asks again, whether an operator has lifted it yet.
const CodeLockRetryAfter = time.Hour

// A Verdict is Reserve's answer.
type Verdict int

const (
	// Admitted: the attempt's place is reserved; the caller checks the
	// password and settles it with Failure, Success or Release.
	Admitted Verdict = iota
	// Refused: settled failures, or the client's bucket, refuse the
	// attempt, the right password too, for retryAfter.
	Refused
	// Wait: the attempt would be over the pair's or the user's limit only
	// because of attempts still in flight; nothing is reserved. Ask again
	// once they may have settled.
	Wait
)

// String names v for messages.
func (v Verdict) String() string {
	switch v {
	case Admitted:
		return "admitted"
	case Refused:
		return "refused"
	case Wait:
		return "wait"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// Limits is a set of the throttle's limits: Explain's answer.
type Limits uint8

// The limits, as bits of Limits. The Redis throttle's explain scripts
// return the same bits.
const (
	LimitPair   Limits = 1 << iota // the (username, client address) pair's failures: PairFailures, then backoff
	LimitUser                      // the username's failures over all addresses: UserFailures a Window
	LimitClient                    // the client address's bucket: AddrRate failures a second over all usernames
)

// String names the limits in l, comma-separated in the order pair, user,
// client ("pair,user"); "" for none. user unlock lifts pair and user, not
// client.
func (l Limits) String() string {
	var names []string
	for _, n := range []struct {
		bit  Limits
		name string
	}{{LimitPair, "pair"}, {LimitUser, "user"}, {LimitClient, "client"}} {
		if l&n.bit != 0 {
			names = append(names, n.name)
		}
	}
	if rest := l &^ (LimitPair | LimitUser | LimitClient); rest != 0 {
		names = append(names, fmt.Sprintf("Limits(%d)", uint8(rest)))
	}
	return strings.Join(names, ",")
}

// ErrUnavailable: the throttle could not decide (its backing did
// not answer). The caller fails closed and answers 503 unavailable.
var ErrUnavailable = errors.New("login throttle unavailable")

// NewMemory returns a throttle kept in this process with cfg's
// limits (unset ones at their defaults).
func NewMemory(cfg Config) Memory { return Memory{newThrottle(cfg)} }

// Memory is the throttle kept in this process: it never fails.
type Memory struct{ *throttle }

var _ Throttle = Memory{}

func (m Memory) Reserve(_ context.Context, username, addr string, now time.Time) (Verdict, time.Duration, error) {
	v, retryAfter := m.throttle.reserve(username, addr, now)
	return v, retryAfter, nil
}

func (m Memory) Explain(_ context.Context, username, addr string, now time.Time) (Limits, error) {
	return m.throttle.explain(username, addr, now), nil
}

func (m Memory) Failure(_ context.Context, username, addr string, now time.Time) error {
	m.throttle.failure(username, addr, now)
	return nil
}

func (m Memory) Success(_ context.Context, username, addr string, now time.Time) error {
	m.throttle.success(username, addr, now)
	return nil
}

func (m Memory) Release(_ context.Context, username, addr string) error {
	m.throttle.release(username, addr)
	return nil
}

func (m Memory) ReserveCode(_ context.Context, username string, after, now time.Time) (Verdict, int, error) {
	v, n := m.throttle.reserveCode(username, after, now)
	return v, n, nil
}

func (m Memory) CodeSuccess(_ context.Context, username string) error {
	m.throttle.mu.Lock()
	defer m.throttle.mu.Unlock()
	delete(m.throttle.codes, username)
	return nil
}

func (m Memory) CodeLocked(_ context.Context, username string, after time.Time) (bool, error) {
	m.throttle.mu.Lock()
	defer m.throttle.mu.Unlock()
	c := m.throttle.codes[username]
	return c.last.After(after) && c.n >= MaxCodeFailures, nil
}

func (m Memory) ReleaseCode(_ context.Context, username string) error {
	m.throttle.mu.Lock()
	defer m.throttle.mu.Unlock()
	if c, ok := m.throttle.codes[username]; ok && c.n > 1 {
		c.n--
		m.throttle.codes[username] = c
	} else {
		delete(m.throttle.codes, username)
	}
	return nil
}

// A throttle decides whether a login attempt may proceed. It keeps three
// tables, each bounded to MaxEntries keys:
//
//   - pairs, per (username, client address): a streak of failures. Once it
//     holds n >= PairFailures failures, attempts are refused until
//     BaseBackoff·2^(n-PairFailures), capped at MaxBackoff, after the last
//     failure, and then one attempt at a time is let through: with the
//     defaults, attempts 1–5 proceed and then the waits are 1s, 2s, 4s …
//     5m. Success clears the pair's failures (its other attempts in
//     flight stay counted).
//   - users, per username over all addresses: a streak of failures. Once it
//     holds UserFailures failures, every address is refused until Window
//     after the last failure. This stops credential stuffing from many
//     addresses; its price is that an attacker who makes UserFailures
//     failed attempts at a username locks its owner out everywhere for a
//     Window. Below that ceiling one address's failures never affect
//     another's. A success does not reset this count.
//   - addrs, per client address: a token bucket of AddrRate failures per
//     second, AddrBurst deep, over all usernames. Only failures take a
//     token, so people behind one NAT who log in correctly never use up
//     their address's bucket; an empty bucket refuses every attempt.
//
// Reserve before compare: reserve counts an attempt against its pair and
// its user before the password is checked, as pending, and failure,
// success or release settles it. With the pair's limit at N, N attempts
// sent at once take every place, and the (N+1)th is held back before any
// password work: parallel guesses get no more password checks than serial
// ones (the class of GHSA-7h8m-vrxx-vr4m). But the places taken are not
// failures: an attempt kept out only by attempts in flight is told to wait
// (Wait), not refused, and once they settle it is decided on the failures
// they left, so that parallel logins with the right password all go
// through. The address bucket counts failures as they complete.
//
// A streak is forgotten once Window passes without a new failure, so failures
// spaced less than Window apart keep accumulating: stricter than a sliding
// window, and it needs only a count and a time per key. A pair that waits
// out a backoff of Window or more is thereby forgotten and starts afresh
// with PairFailures free attempts; a MaxBackoff below Window (the default)
// keeps a persistent guesser at one guess per MaxBackoff instead.
//
// When a table is full, adding a key evicts its least recently updated key.
// Pairs and users are updated on reservations and failures, so the evicted
// key is the one whose streak ends first (an expired one if any).
// Addresses are updated on failures, so the evicted bucket is the one idle
// the longest. Since a failure costs a password check, the server records
// failures only as fast as it can hash (about 8/s on 2 cores at bcrypt
// cost 12, 30k per hour), so flushing a live streak out of a table takes
// longer than a Window at the default MaxEntries.
type throttle struct {
	cfg Config

	mu    sync.Mutex // guards pairs, users, addrs (including their limiters) and codes
	pairs *lru.Cache[pairKey, streak]
	users *lru.Cache[string, streak]
	addrs *lru.Cache[string, *rate.Limiter]
	// codes is the code lock's count per user: a plain map, since
	// evicting a count would lift a lock. Only users whose password was
	// just found right get one (a code is checked after the password, or
	// with an mfa_token that a right password gave), so it holds at most
	// the directory's users, and a right code deletes the user's count.
	codes map[string]codeCount
}

// A codeCount is a user's consecutive wrong second-factor codes (those
// in flight included) and when the last was counted.
type codeCount struct {
	n    int
	last time.Time
}

// pairKey is a (username, client address) pair: a struct of two strings, so
// a look-up builds no concatenated key.
type pairKey struct{ username, addr string }

// A streak counts failures that each came less than a Window after the
// previous one, and the attempts reserved but not yet settled.
type streak struct {
	n       int
	last    time.Time // of the latest failure
	pending int       // reserved attempts whose password check has not ended
}

// trimPerWrite is how many expired keys a write removes from each table's
// old end: more than one, so that tables drain after a flood even though
// each write may add a key.
const trimPerWrite = 2

// newThrottle returns a throttle with cfg's limits, unset ones at their defaults.
func newThrottle(cfg Config) *throttle {
	cfg = cfg.WithDefaults()
	return &throttle{
		cfg:   cfg,
		pairs: lru.New[pairKey, streak](cfg.MaxEntries),
		users: lru.New[string, streak](cfg.MaxEntries),
		addrs: lru.New[string, *rate.Limiter](cfg.MaxEntries),
		codes: make(map[string]codeCount),
	}
}

// reserveCode counts a code of username, checked at now, as wrong, unless
// MaxCodeFailures are counted (Refused); a count whose last code came at or
// before after starts again. It returns the count with this code.
func (t *throttle) reserveCode(username string, after, now time.Time) (Verdict, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.codes[username]
	if !c.last.After(after) {
		c = codeCount{} // all counted before the unlock
	}
	if c.n >= MaxCodeFailures {
		return Refused, c.n
	}
	c.n++
	c.last = now
	t.codes[username] = c
	return Admitted, c.n
}

// reserve decides whether a login attempt for username from addr may
// proceed at now. Admitted reserves its place: the caller must then call
// exactly one of failure, success or release for it. Refused: settled
// failures or the address's bucket refuse it for retryAfter, a whole
// number of seconds, at least 1s, ready for a Retry-After header. Wait:
// it would be over the pair's or the user's limit only because of attempts
// in flight, and nothing is reserved. The caller must reserve before any
// password work, so that an attempt not admitted costs no hashing, and
// must refuse a Refused attempt even if the password would be right.
//
// addr should come from ClientKey.
func (t *throttle) reserve(username, addr string, now time.Time) (v Verdict, retryAfter time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()

	// Report the longest of the waits, so a client that honours
	// Retry-After is not refused again at once for another reason.
	inFlight := false // over a limit only by the attempts in flight
	pk := pairKey{username, addr}
	pair, _ := liveStreak(t.pairs, pk, now, t.cfg.Window)
	pairWait := t.pairWait(pair, now)
	switch {
	case pair.n >= t.cfg.PairFailures:
		if pairWait == 0 && pair.pending > 0 { // after the backoff, one attempt at a time
			inFlight = true
		}
	case pair.n+pair.pending >= t.cfg.PairFailures:
		inFlight = true
	}
	user, _ := liveStreak(t.users, username, now, t.cfg.Window)
	if user.n < t.cfg.UserFailures && user.n+user.pending >= t.cfg.UserFailures {
		inFlight = true
	}
	wait := max(pairWait, t.userWait(user, now), t.addrWait(addr, now))
	switch {
	case wait > 0:
		return Refused, ceilSecond(wait)
	case inFlight:
		return Wait, 0
	}
	pair.pending++
	t.pairs.Put(pk, pair)
	user.pending++
	t.users.Put(username, user)
	return Admitted, 0
}

// explain reports which limits refuse an attempt of username from addr at
// now, as reserve decides them on settled failures and the address's
// bucket; it changes nothing, not even an expired streak.
func (t *throttle) explain(username, addr string, now time.Time) Limits {
	t.mu.Lock()
	defer t.mu.Unlock()
	var l Limits
	if t.pairWait(peekStreak(t.pairs, pairKey{username, addr}, now, t.cfg.Window), now) > 0 {
		l |= LimitPair
	}
	if t.userWait(peekStreak(t.users, username, now, t.cfg.Window), now) > 0 {
		l |= LimitUser
	}
	if t.addrWait(addr, now) > 0 {
		l |= LimitClient
	}
	return l
}

// pairWait returns how long the pair's settled failures in s refuse
// attempts after now: 0 when they do not.
func (t *throttle) pairWait(s streak, now time.Time) time.Duration {
	if s.n < t.cfg.PairFailures {
		return 0
	}
	return max(0, s.last.Add(t.backoff(s.n)).Sub(now))
}

// userWait returns how long the user's settled failures in s refuse
// attempts from every address after now: 0 when they do not.
func (t *throttle) userWait(s streak, now time.Time) time.Duration {
	if s.n < t.cfg.UserFailures {
		return 0
	}
	return max(0, s.last.Add(t.cfg.Window).Sub(now))
}

// addrWait returns how long addr's bucket refuses attempts after now: 0
// while it holds a token.
func (t *throttle) addrWait(addr string, now time.Time) time.Duration {
	lim, ok := t.addrs.Get(addr)
	if !ok {
		return 0
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - tokens) / t.cfg.AddrRate * float64(time.Second)))
}

// failure settles a reserved attempt that failed at now: a wrong password,
// an unknown user or a disabled one alike. It extends the pair's and the
// user's streaks and takes a token from addr's bucket.
func (t *throttle) failure(username, addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	addFailure(t.pairs, pairKey{username, addr}, now, t.cfg.Window)
	addFailure(t.users, username, now, t.cfg.Window)
	lim, ok := t.addrs.Get(addr)
	if !ok {
		lim = rate.NewLimiter(rate.Limit(t.cfg.AddrRate), t.cfg.AddrBurst)
	}
	lim.ReserveN(now, 1) // may go below zero: failures that complete at once all count
	t.addrs.Put(addr, lim)
	trim(t.addrs, trimPerWrite, func(lim *rate.Limiter) bool {
		return lim.TokensAt(now) >= float64(t.cfg.AddrBurst) // a full bucket is as good as none
	})
}

// success settles a reserved attempt that succeeded: it clears the pair's
// failures. The pair's other attempts in flight stay counted: forgetting
// them would let a guesser sharing the client's address past the limit
// while they are checked. The username's count over all addresses stays,
// or the owner logging in would reset the ceiling in the middle of an
// attack; the address's bucket is not touched.
func (t *throttle) success(username, addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pk := pairKey{username, addr}
	if pair, ok := t.pairs.Get(pk); ok && pair.pending > 1 {
		t.pairs.Put(pk, streak{pending: pair.pending - 1})
	} else {
		t.pairs.Remove(pk)
	}
	unreserve(t.users, username)
}

// release settles a reserved attempt whose password was never checked
// (no hasher slot came free): it counts for nothing.
func (t *throttle) release(username, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	unreserve(t.pairs, pairKey{username, addr})
	unreserve(t.users, username)
}

// sizes returns how many keys each table holds, for tests and metrics.
func (t *throttle) sizes() (pairs, users, addrs int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pairs.Len(), t.users.Len(), t.addrs.Len()
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
func liveStreak[K comparable](l *lru.Cache[K, streak], k K, now time.Time, window time.Duration) (streak, bool) {
	s, ok := l.Get(k)
	if ok && s.n > 0 && now.Sub(s.last) >= window {
		if s.pending == 0 {
			l.Remove(k)
			return streak{}, false
		}
		s.n = 0 // the failures are forgotten; the attempts in flight still count
	}
	return s, ok
}

// peekStreak returns k's streak at now, as liveStreak does, but leaves an
// expired one in place: its failures count for nothing.
func peekStreak[K comparable](l *lru.Cache[K, streak], k K, now time.Time, window time.Duration) streak {
	s, _ := l.Get(k)
	if s.n > 0 && now.Sub(s.last) >= window {
		s.n = 0
	}
	return s
}

// unreserve ends one of k's pending attempts, if it still has one (a full
// table may have evicted it).
func unreserve[K comparable](l *lru.Cache[K, streak], k K) {
	s, ok := l.Get(k)
	if !ok || s.pending == 0 {
		return
	}
	s.pending--
	if s.n == 0 && s.pending == 0 {
		l.Remove(k)
		return
	}
	l.Put(k, s)
}

// addFailure settles one of k's pending attempts as a failure at now,
// starting a new streak if the old one has expired, and trims expired
// streaks from l.
func addFailure[K comparable](l *lru.Cache[K, streak], k K, now time.Time, window time.Duration) {
	s, _ := liveStreak(l, k, now, window)
	s.n++
	s.last = now
	s.pending = max(0, s.pending-1)
	l.Put(k, s)
	trim(l, trimPerWrite, func(s streak) bool { return s.pending == 0 && now.Sub(s.last) >= window })
}

// trim removes up to n of l's least recently put keys while expired reports
// true of their values. Removing an expired key changes no decision.
func trim[K comparable, V any](l *lru.Cache[K, V], n int, expired func(V) bool) {
	for range n {
		k, v, ok := l.Oldest()
		if !ok || !expired(v) {
			return
		}
		l.Remove(k)
	}
}

// ceilSecond rounds d > 0 up to a whole number of seconds, at least one:
// a Retry-After that is honoured is never early.
func ceilSecond(d time.Duration) time.Duration {
	return max(time.Second, (d + time.Second - 1).Truncate(time.Second))
}

// ClientKey returns the throttle key for a client's IP (from ClientIP):
// an IPv4-mapped IPv6 address as plain IPv4, and an IPv6 address as its /64
// prefix, since one subscriber usually holds a whole /64 and could otherwise
// rotate addresses for free.
func ClientKey(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}
