package tokens

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors of the Store contract; callers test them with errors.Is.
var (
	// ErrNotFound: no live session under that digest (never issued,
	// revoked, evicted or expired), or for TryChallenge no live challenge
	// with an attempt left. The caller answers 401 invalid_token.
	ErrNotFound = errors.New("token not found")
	// ErrUnavailable: the store could not answer in time or at all.
	// The caller fails closed and answers 503 unavailable.
	ErrUnavailable = errors.New("token store unavailable")
	// ErrRefused: the store's backing answers but refuses the store's
	// configuration (its credentials, its database): waiting will not
	// help. Only Ping tells it apart; serve stops on it at start.
	ErrRefused = errors.New("token store refuses its configuration")
	// ErrSuperseded: Issue of a session (or PutChallenge of a challenge)
	// whose Stamp is not its user's current password stamp as the store
	// was last told (Supersede): the password the login checked has been
	// changed since. The caller answers 401 invalid_credentials.
	ErrSuperseded = errors.New("session issued on a superseded password")
	// ErrBadChallenge: PutChallenge of a challenge without an expiry or
	// without an attempt: a bug in the caller, since such a challenge
	// would live for ever or never.
	ErrBadChallenge = errors.New("challenge without expiry or attempts")
)

// A Session is what a token stands for. The token itself is never stored:
// the store keys sessions by the token's SHA-256 digest.
type Session struct {
	Username string
	// Stamp binds the session to the password it was issued on: the
	// user's password generation (users.SessionGeneration), which every
	// password change moves and a rehash keeps. Sessions stored by earlier
	// versions hold a digest of the hash instead, a number above
	// users.MaxSessionGeneration, and only the cut-off judges them. The
	// store keeps it as given, and removes or refuses a session whose
	// password has been superseded (Supersede).
	Stamp uint64
	// ExpiresAt is when the session stops being valid; zero means never.
	ExpiresAt time.Time
	// IssuedAt is when the token was issued: the now of Issue, which sets
	// it. A token issued before its user's cut-off is dead.
	IssuedAt time.Time
	// LastUsedAt is the token's last recorded use (Touch); IssuedAt before
	// the first. It may lag the real last use (see Touch).
	LastUsedAt time.Time
	// ID names the session to its owner; random, unrelated to the token.
	ID SessionID
	// Client is the login's client address as the throttle saw it, and
	// UserAgent its User-Agent, cut to MaxUserAgent bytes.
	Client, UserAgent string
	// Enrolment marks a session that may only enrol a second factor
	// (API.md, Required second factor): issued to a user whom the policy
	// required one of and who had none. Confirming an authenticator
	// issues it again without the mark. The store keeps it as given.
	Enrolment bool
}

// A Supersession tells a store that a user's password, or the user, has
// changed: what Supersede is given.
type Supersession struct {
	Username string
	// Stamp is the stamp of a session issued on the user's password now
	// (users.SessionGeneration); 0 when the user has no password any more
	// (deleted), and then the store forgets the stamp it kept.
	Stamp uint64
	// MaxStamp bounds the password stamps (users.MaxSessionGeneration): a
	// session whose Stamp is above it was stored by an earlier version and
	// is judged by Before alone.
	MaxStamp uint64
	// Before: every session of the user issued before it is dead.
	Before time.Time
	// Until is how long the store keeps Stamp and Before: no shorter than
	// the longest a session can live (now plus the token TTL); zero for
	// ever.
	Until time.Time
}

// An Imported is a session brought from another system (a Django REST
// framework key, byte for byte a token): what Import is given. Its
// Session's IssuedAt is when the other system created it.
type Imported struct {
	Digest  Digest
	Session Session
}

// ImportOutcome is what Import did, or in a dry run would do, with one
// Imported.
type ImportOutcome uint8

const (
	// ImportAdded: stored, and its digest remembered as imported.
	ImportAdded ImportOutcome = iota + 1
	// ImportRefreshed: imported before and still live; its expiry is set
	// anew (the imported session's ExpiresAt).
	ImportRefreshed
	// ImportDead: imported before and dead since (revoked, superseded,
	// expired, its user's sessions ended), or its digest stands for a
	// session the store did not import: nothing is stored, and a dead
	// token is never brought back.
	ImportDead
	// ImportSuperseded: its Stamp is not its user's current password stamp
	// (see Supersede); nothing is stored.
	ImportSuperseded
)

func (o ImportOutcome) String() string {
	switch o {
	case ImportAdded:
		return "added"
	case ImportRefreshed:
		return "refreshed"
	case ImportDead:
		return "dead"
	case ImportSuperseded:
		return "superseded"
	}
	return fmt.Sprintf("ImportOutcome(%d)", uint8(o))
}

// A Challenge is a login's pending second step: what an mfa_token stands
// for between a right password and a right code (API.md, "Two-factor
// authentication"). It is not a session: it authenticates nothing but the
// second step, and the store keeps it apart (Lookup and List never see
// it). Like a session it is keyed by its token's digest, never the token.
type Challenge struct {
	Username string
	// Stamp is the password stamp the password was checked on, as
	// Session.Stamp: a password change ends the challenge as it ends a
	// session (Supersede).
	Stamp uint64
	// IssuedAt is the now of PutChallenge, which sets it, rounded down at
	// most to the millisecond: a Supersede's Before judges it as it judges
	// a session's.
	IssuedAt time.Time
	// ExpiresAt is when the challenge dies; never zero, since an
	// mfa_token lives minutes.
	ExpiresAt time.Time
	// Attempts bounds the codes tried: given to PutChallenge, how many
	// TryChallenge calls may succeed (at least 1); returned by
	// TryChallenge, how many are left after the one it took.
	Attempts int
}

// A ListedSession is a session with the digest it is stored under, as List
// returns it: the digest tells the caller which one is its own token.
type ListedSession struct {
	Digest Digest
	Session
}

// A Store keeps sessions keyed by token digest.
//
// The contract every implementation meets, checked by Run:
//   - Issue stores s under d. If the user then holds more than limit
//     sessions (limit > 0), the oldest are revoked until limit remain, and
//     Issue reports how many it revoked so.
//     Issuing an existing digest is not expected (tokens are 160 random bits).
//   - Lookup returns the session under d, or ErrNotFound if there is
//     none or it expired at or before now.
//   - A store shared by several instances may keep the sessions it looked
//     up in memory (a cache). Then a session that Revoke, RevokeID,
//     RevokeUser, Supersede or Issue's limit removed is not found by the
//     Lookups of the instance that removed it once the call has returned,
//     and by every other instance sharing the store within a short bound
//     (API.md, Operations: 100 ms at the 99th percentile); one whose link
//     to the other instances breaks forgets what it kept before answering
//     from it again. A cached LastUsedAt may lag uses recorded by other
//     instances (this instance's Touch moves it): under a context marked
//     by WithFresh, Lookup reads the backing service, never the cache, and
//     a caller that would end a session on its LastUsedAt asks so first.
//   - Revoke removes the session under d; revoking an unknown digest is not
//     an error (logout is idempotent).
//   - Issue stores s's ID, Client and UserAgent as given, and sets its
//     IssuedAt and LastUsedAt to now. List returns Client and UserAgent;
//     Lookup, on the hot path, may leave them empty.
//   - Touch records a use of d at now, off the caller's path: it never
//     blocks on the backing service and may drop or delay the write, so
//     LastUsedAt may lag a real use by up to touchLag; a later use never
//     moves LastUsedAt back.
//   - List returns username's live sessions (not expired at now), newest
//     first; RevokeID removes the one with id and reports whether there
//     was one.
//   - RevokeUser removes every session of username and reports how many;
//     it removes the user's challenges too, uncounted (a logout ends a
//     pending second step on every instance).
//   - Supersede keeps sup.Stamp as sup.Username's current password stamp
//     until sup.Until (for ever if zero; a Stamp of 0 forgets the one
//     kept), and removes the user's sessions issued before sup.Before (to the
//     store's precision, erring towards removal) and, unless Stamp is 0, those whose Stamp is at
//     most sup.MaxStamp and is not sup.Stamp; it reports how many it
//     removed. It removes the user's challenges by the same rule, by their
//     IssuedAt and Stamp, uncounted. Supersessions are ordered by Before,
//     never by Stamp (stamps wrap): one whose Before is earlier than the
//     latest the store keeps for the user (kept as long as that one's
//     Until) is stale, told by an instance whose copy of the user is older
//     than the change the store was told last, and changes nothing (0,
//     nil); of two with the same Before the later call wins
//     (docs/design/tokens.md).
//   - Issue refuses with ErrSuperseded, storing nothing, a session whose
//     Stamp is not its user's current stamp while the store keeps one; a
//     user never superseded, or whose stamp was forgotten or outlived its
//     Until, takes any stamp. Issue and Supersede are atomic with respect
//     to each other: a session issued on a superseded password is either
//     removed by the Supersede or refused, on every instance sharing the
//     store.
//   - Lookup returns a session's IssuedAt: the now Issue was called with,
//     rounded down at most to the millisecond (and, for logins of one user
//     in one millisecond, at most a millisecond per login later).
//   - Import stores each session of batch as Issue would, with three
//     differences: it keeps the session's IssuedAt as given (LastUsedAt
//     is now), no per-user limit applies, and the store remembers the
//     digest as imported, for ever.
//     A digest it remembers is refreshed (its ExpiresAt set to the one
//     given) while its session is live, and otherwise left dead: an
//     import never brings back a token that died. A digest that stands for
//     a session it did not import is left as it is (ImportDead). The
//     stamp is checked as Issue checks it. outcomes[i] is batch[i]'s. With
//     dryRun, Import writes nothing and reports what it would have done.
//     A failure part way leaves the sessions imported before it stored:
//     importing the batch again finishes the job.
//   - PutChallenge stores c under d, with its IssuedAt set to now; it
//     refuses with ErrSuperseded, storing nothing, a challenge whose Stamp
//     is not its user's current stamp, as Issue does, and atomically with
//     Supersede as Issue is; and with ErrBadChallenge one with a zero
//     ExpiresAt or Attempts below 1. d is a fresh token's digest, never
//     one of a session (tokens are 160 random bits).
//   - TryChallenge takes one attempt of the challenge under d: it returns
//     the challenge, with Attempts the ones left after this, if there is
//     one, not expired at now, not claimed, with an attempt left;
//     otherwise ErrNotFound. Taking an attempt is atomic: of any number of
//     calls, in parallel and on every instance sharing the store, at most
//     the Attempts given to PutChallenge succeed. The attempt that leaves
//     none keeps the challenge (for that attempt's claim) until it is
//     spent or expires. The caller judges the
//     challenge's Stamp and IssuedAt against its user as it judges a
//     session's. A challenge is never a session: Lookup and List never
//     return one, and TryChallenge never returns a session.
//   - ClaimChallenge reports whether this call claimed the challenge
//     under d: there is one, not expired at now and not claimed (with or
//     without attempts left: an attempt's code is claimed after the
//     attempt was taken). Claiming is atomic: of any number of calls, in
//     parallel and on every instance sharing the store, at most one
//     reports true, until UnclaimChallenge gives the claim back. A
//     claimed challenge is neither tried (TryChallenge: ErrNotFound) nor
//     claimed again; Supersede, RevokeUser and expiry remove it as any.
//     So the second step spends an mfa_token with its first success: the
//     one caller whose code was right and who claimed it.
//   - UnclaimChallenge gives back the claim on the challenge under d, if
//     it is still there (the claimed code could not be spent after all):
//     it can be tried, with the attempts it had, and claimed again. An
//     unknown digest is not an error. Only the caller whose claim
//     succeeded calls it.
//   - SpendChallenge removes the challenge under d (its code was right),
//     claimed or not; spending an unknown or spent digest is not an error.
//   - UseTOTPCounter records that a TOTP code of counter was accepted for
//     username (API.md's last_t, fleet-wide): if counter is above both
//     floor (the directory's last_t, -1 for none) and the counter the
//     store keeps for username, it keeps counter until until (for ever if
//     zero) and reports true; otherwise it changes nothing and reports
//     false. It is atomic: of calls with one counter, in parallel and on
//     every instance sharing the store, exactly one reports true. A
//     counter kept until at or before now counts as none (the store
//     forgets it then). Supersede with Stamp 0 forgets it; nothing else
//     does (a used code stays used across logouts and password changes).
//     Counter and floor lie within ±2^53 (a TOTP counter counts steps).
//   - Sweep removes the sessions expired at now and reports how many; a
//     store whose backing expires sessions on its own returns 0. It also
//     removes the challenges expired at now, uncounted, and forgets
//     the TOTP counters kept until now or before. The caller calls
//     it now and then; Lookup never returns an expired session, nor
//     TryChallenge an expired challenge, either way.
//   - Len reports how many sessions the store holds (challenges not
//     counted), expired ones not yet
//     swept included, and ok; ok is false when counting would cost a
//     round trip to the backing service (the caller then does not ask).
//   - Ping reports whether the store can serve requests now: nil, an error
//     wrapping ErrRefused when its backing answers but refuses the store's
//     configuration (credentials, database), or one wrapping
//     ErrUnavailable when it cannot be reached.
//   - Any failure to reach the backing service wraps ErrUnavailable;
//     no method ever returns a session it could not confirm (fail closed).
//   - All methods are safe for concurrent use; ctx bounds each call.
//   - No method stores or logs a usable token: only digests reach the store.
type Store interface {
	Issue(ctx context.Context, d Digest, s Session, limit int, now time.Time) (evicted int, err error)
	Lookup(ctx context.Context, d Digest, now time.Time) (Session, error)
	Revoke(ctx context.Context, d Digest) error
	Touch(ctx context.Context, d Digest, now time.Time)
	List(ctx context.Context, username string, now time.Time) ([]ListedSession, error)
	RevokeID(ctx context.Context, username string, id SessionID) (bool, error)
	RevokeUser(ctx context.Context, username string) (int, error)
	Supersede(ctx context.Context, sup Supersession) (int, error)
	Import(ctx context.Context, batch []Imported, now time.Time, dryRun bool) (outcomes []ImportOutcome, err error)
	PutChallenge(ctx context.Context, d Digest, c Challenge, now time.Time) error
	TryChallenge(ctx context.Context, d Digest, now time.Time) (Challenge, error)
	ClaimChallenge(ctx context.Context, d Digest, now time.Time) (claimed bool, err error)
	UnclaimChallenge(ctx context.Context, d Digest) error
	SpendChallenge(ctx context.Context, d Digest) error
	UseTOTPCounter(ctx context.Context, username string, counter, floor int64, now, until time.Time) (ok bool, err error)
	Sweep(now time.Time) int
	Len() (n int, ok bool)
	Ping(ctx context.Context) error
	Close() error
}

// A UserNotifier is a store shared by several instances that can also
// tell them that a user's record changed in the directory (a personal
// access token revoked), so that each reads the user again at once rather
// than at its next reload of the directory: personal access tokens live
// in the directory, not in the store, and the store is what the instances
// share a fast link through (API.md: revoked within Operations' 100 ms
// where they share a token store). A store of one instance (memory) does
// not implement it.
//
//   - NotifyUser tells every instance sharing the store, this one
//     included, that username's record changed; an error wraps
//     ErrUnavailable (the change stands: the others see it at their next
//     reload).
//   - OnUserNotice registers hook, called off the store's own loops for
//     every notice heard, within the store's revocation bound, with the
//     username notified; with "" when notices may have been lost (a link
//     to the others broke and was made again, or more arrived than could
//     be queued), meaning every user. Called once, before the first
//     NotifyUser that hook must hear; a later call replaces hook.
type UserNotifier interface {
	NotifyUser(ctx context.Context, username string) error
	OnUserNotice(hook func(username string))
}
