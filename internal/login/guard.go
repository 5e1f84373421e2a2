// Package login is the domain of a login, without net/http: the guard
// that stands between a password and the hasher (the throttle's
// reservation, the admission, the tarpit), the attempt that checks a
// password or a second-factor code, and the ways to log in (Logins): the
// password, with or without a one-step code, and the second step of an
// mfa_token. It answers with values and with the errors of errors.go,
// which internal/httpapi maps to statuses.
package login

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/users"
)

// A Guard stands between a password and the hasher, for login and for any
// other request that checks a password: the throttle refuses guessing, the
// admission bounds the CPU spent on passwords, and the tarpit slows
// refused clients down.
type Guard struct {
	Throttle  throttle.Throttle
	Admission *Admission
	Hasher    *password.Pool // nil: compare on the caller's goroutine
	Tarpit    *Tarpit        // nil: refusals are immediate
	Log       *slog.Logger   // for the audit and warning lines
	Now       func() time.Time
	Policy    password.HashPolicy // a hash outside it is rehashed after a successful login
	Metrics   Metrics             // nil: counted nowhere
	// A rehash on login is written at most RehashDelay after the first
	// one waiting, or once RehashBatch are waiting (zero: 1 s and 256;
	// rehash.go). Call CloseRehashes at shutdown.
	RehashDelay time.Duration
	RehashBatch int

	dummyOnce sync.Once
	dummyHash *password.Hash // Policy's dummy (dummy); set once
	rehashes  rehashQueue
	unknown   unknownRechecks // which logins of unknown users recheck the directory
}

// Metrics counts what the login domain decides; internal/httpapi's
// Metrics is one. Every method is called with the metric's own labels, so
// that its names and series stay the server's.
type Metrics interface {
	// SecondFactorStep counts one second-factor step ("code",
	// "required") ending with err (nil: a success).
	SecondFactorStep(step string, err error)
	// MFALocked counts a user's code lock begun.
	MFALocked()
	// Rehashed counts a rehash on login: "ok", "error" or "skipped".
	Rehashed(result string)
	// Revoked counts n sessions ended by kind (RevokedEviction).
	Revoked(kind string, n int)
}

// RevokedEviction is Metrics.Revoked's kind of the sessions a login ends
// because their user holds too many (SessionPolicy.MaxPerUser).
const RevokedEviction = "eviction"

// noMetrics counts nothing: a Guard's Metrics when none is set.
type noMetrics struct{}

func (noMetrics) SecondFactorStep(string, error) {}
func (noMetrics) MFALocked()                     {}
func (noMetrics) Rehashed(string)                {}
func (noMetrics) Revoked(string, int)            {}

// metrics returns g's Metrics, or one that counts nothing.
func (g *Guard) metrics() Metrics {
	if g.Metrics == nil {
		return noMetrics{}
	}
	return g.Metrics
}

// dummy returns the hash an unknown or disabled user's password is checked
// against: one at the hash policy's cost, so that the check holds a slot no
// longer than a new user's login would; nil, if the policy cannot make one,
// means the slowest hash in the directory.
func (g *Guard) dummy() *password.Hash {
	g.dummyOnce.Do(func() {
		h, err := g.Policy.Dummy()
		if err != nil {
			if g.Log != nil {
				g.Log.Warn("cannot make the hash policy's dummy hash; unknown users are checked against the slowest hash", "err", err)
			}
			return
		}
		g.dummyHash = h
	})
	return g.dummyHash
}

// AtCapacity reports whether a password check would be refused at once,
// and if so holds the caller in the tarpit: a login at capacity is refused
// before its body is decoded, the cheapest 503.
func (g *Guard) AtCapacity(ctx context.Context) bool {
	if !g.Admission.full() {
		return false
	}
	g.Tarpit.hold(ctx)
	return true
}

// verifyReleasing returns a check with the hasher that gives back the
// caller's slot as soon as the check ends: a failed login is then held
// (Authenticate pads it up to the slowest check's time) with no slot, so
// the padding of one costs no other login its turn.
func (g *Guard) verifyReleasing(release func()) func(*password.Hash, []byte) bool {
	return func(h *password.Hash, pw []byte) bool {
		defer release()
		return g.Hasher.Verify(h, pw)
	}
}

// throttleKey returns the name the throttle counts username's failures
// under: the name itself, or, once the user has been unlocked (user
// unlock), the name and the moment of the unlock, so that the failures
// counted before it are under another key, which no attempt touches again
// and which expires with its window. Every instance derives the same key
// once its directory has the unlock (within 5 s), so a shared throttle
// needs no reset; a failure an instance counts under the old key before it
// sees the unlock is forgiven with the rest. A request that names
// "alice\x00unlocked …" itself names no user, and its failures count
// only as alice's own would: it gains nothing.
func throttleKey(username string, u *users.Account) string {
	if u == nil {
		return username
	}
	at := u.FailuresAfter()
	if at.IsZero() {
		return username
	}
	return username + "\x00unlocked " + strconv.FormatInt(at.UnixNano(), 10)
}
