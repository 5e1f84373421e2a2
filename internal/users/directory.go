package users

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"authsvc/internal/password"
)

// Sentinel errors of the Directory contract; callers test them with errors.Is.
var (
	// ErrNotFound: no user of that name.
	ErrNotFound = errors.New("no such user")
	// ErrExists: Add of a name that is taken.
	ErrExists = errors.New("user already exists")
	// ErrUnavailable: the backing cannot be reached, or has not
	// been for longer than what was loaded may be trusted. The caller
	// fails closed and answers 503 unavailable.
	ErrUnavailable = errors.New("user directory unavailable")
	// ErrLastAdmin: a write with KeepAnAdmin of the last enabled admin,
	// which would leave none (KeepsAnAdmin).
	ErrLastAdmin = errors.New("no other enabled admin would remain")
)

// A Directory is where users live: the users file (usersfile.Directory),
// PostgreSQL (postgres.Directory), or any other backing that keeps the same
// promises.
//
// The contract every implementation meets, checked by Run:
//   - Lookup returns the user named username as the server uses it, or
//     ErrNotFound. It answers from what was last loaded, so the token
//     check on the hot path never waits for the backing.
//   - Len reports how many users Lookup knows; Slowest is the check every
//     failed login is made to cost: against a hash at the slowest
//     parameters in the directory, so that unknown, disabled and wrong
//     look alike in time whatever mix of costs the users have.
//   - Add, Update and Delete write one user through to the backing under
//     the backing's own lock (concurrent writers, in this process or
//     another, never lose an entry) and are visible to this Directory's
//     Lookup when they return. Add of a taken name is ErrExists;
//     Update and Delete of a missing one, ErrNotFound. When change or
//     the backing fails, nothing is written (but for a cut-off recorded
//     just before a write that then failed: a token killed early, never
//     one kept alive).
//   - With the option KeepAnAdmin, a write of one user (UpdateAll of
//     one change, Delete) never takes the last enabled admin away
//     (KeepsAnAdmin): when the user was an enabled admin and the write
//     would leave no other, nothing is written and the error wraps
//     ErrLastAdmin. The other admins are counted inside the write (under
//     the users file's lock, in the transaction, ordered after every
//     write committed before it), so that of two writes racing to take
//     away the last two admins, from this process or another, one fails.
//     UpdateAll of several changes with it is an error, nothing written.
//   - With the option ResetLinkOnly, UpdateAll of one change keeps only
//     what the change leaves in the user's ResetLink and ResetMails: a
//     reset request, which anyone may send, writes through it, and a
//     backing may keep the two beside the record rather than rewrite it
//     (the users file appends them to its resets file; PostgreSQL writes
//     the two columns and moves no generation, so that no instance
//     drops its cache for it).
//   - A deleted user leaves its cut-off behind (a tombstone): a user
//     added later under the same name, by Add or AddAll, has a cut-off no
//     earlier than the deletion, so no token of the deleted user comes back.
//   - Bootstrap adds admin when the backing has never held a user (no
//     users file; a database with no user) and reports whether it did; of
//     several processes bootstrapping at once only one adds it.
//   - AddAll adds, in one write, every user whose name is free, and
//     returns the names that were taken (those users are left alone).
//   - UpdateAll is Update of many users in one write, with Update's rules
//     for each (cut-offs, validation, visibility); a change that fails, or
//     makes a user that could not be stored, fails alone. Update (the
//     package's function) is UpdateAll of one user, its failure returned
//     as its error.
//   - List returns every user from the backing, in its stored order.
//   - Page returns the users f matches (Filter.Match) whose usernames sort
//     after after in byte order, in that order, at most limit (1 to
//     MaxPage) of them, as one read of the backing found them: keyset
//     pagination, so that paging through the directory while users are
//     added and deleted returns every user that existed throughout exactly
//     once. It reads what Lookup reads (the backing's current state,
//     within Watch's bound), never a user twice. Its users carry what a
//     listing shows (username, profile, flags, cut-offs, factors, access
//     tokens); a backend may leave out the password hash, the password
//     generation, the Django fingerprint and the reset link. Count
//     returns how many users f matches, by the same read rules.
//   - Reload loads the backing's current state now. A backing that cannot
//     be read or does not validate is an error, and the previous users stay
//     in force (fail closed: nothing is half-loaded).
//   - Watch reloads when the backing changes, within interval (and on
//     every value from hup), until ctx is done: writes from other
//     processes reach Lookup within 5 s. It tells hooks.reloaded of each
//     attempt, and hooks.cut of every user whose tokens the change killed
//     (deleted, disabled, password changed, a new cut-off) or whose
//     password generation moved (an older file put back), with the stamp
//     of the user's password now, so that the caller can remove them from
//     the token store for good and have it refuse the old password's.
//   - Factors returns the second factors the backing holds for username
//     (User.MFA), as the caller's own copy: nil for a user without any,
//     ErrNotFound for no such user, an error wrapping ErrUnavailable when
//     the backing cannot answer (the caller fails closed). It reflects
//     this Directory's own writes when they return, and never answers
//     from a copy older than Lookup's.
//   - Recheck returns the user named username as the backing holds them
//     at a read that began after Recheck was called, or ErrNotFound, and
//     brings Lookup up to that read (or a later one) for that user, or
//     leaves Lookup as it was: it never makes Lookup older. It is what
//     SessionUser asks before it takes a token for dead: Lookup's copy may
//     be older than the token (docs/design/tokens.md). An error wrapping
//     ErrUnavailable when the backing cannot answer, or when what it holds
//     now could not be loaded (the caller answers 503, never 401).
//   - LookupKey returns the users a Key finds (KeyKind: by username,
//     by a personal access token's digest, by email address), in byte
//     order of their usernames, as Matches: each user's Account, as
//     Lookup has it, and their personal access tokens. ErrNotFound when
//     none; ErrKeyKind for a kind the backend does not index. It never
//     answers from a copy older than Lookup's. For a KeyAccessToken it
//     answers from memory, as Lookup does, and allocates no more than
//     the key: it is on the hot path. There, when it does not find the
//     digest in memory and reads the backing for this call and finds
//     none, or such a read found none less than a second ago and no
//     change of the backing has reached this instance since
//     (PostgreSQL's record of digests found absent: a flood of one
//     made-up token), the error is ErrNoAccessTokenAtSource, which wraps
//     ErrNotFound. An expired token is found (the caller judges expiry),
//     and so is a disabled user. The Matches are shared: the caller must
//     not change them.
//   - RecheckKey is LookupKey at a read of the backing that began after
//     it was called, and brings Lookup up to that read (or a later one)
//     for the users it finds, as Recheck does: a token made on another
//     instance a moment ago is found. An error wrapping ErrUnavailable
//     when the backing cannot answer.
//   - FactorKeys returns, for every key ID the directory's second factors
//     need (Factors.KeyIDs: sealed authenticator secrets, active and
//     pending, and recovery codes), how many users need it, each user
//     counted once per key; an empty map when no one has second factors.
//     It is for start-up, to refuse a key file that cannot serve them.
//   - Ping reports whether Lookup can answer now: nil from a directory
//     whose users are in memory (a users file: serve does not listen
//     before it loads, and a failed reload keeps the previous users), an
//     error wrapping ErrUnavailable from one that cannot reach its backing.
//   - String names the backing (the file's path, the database's name)
//     for messages; it never holds a password.
//   - All methods are safe for concurrent use. No method logs or returns
//     a password or a hash outside the Account and User values it is asked for.
type Directory interface {
	Reader
	fmt.Stringer // names the backing in messages, never with a password
	Len() int
	Add(ctx context.Context, u User) error
	Bootstrap(ctx context.Context, admin User) (added bool, err error)
	AddAll(ctx context.Context, users []User) (existing []string, err error)
	// UpdateAll applies each change to its user, under one lock and in one
	// write (the file: one atomic rewrite, its cut-off records appended in one
	// synced append; PostgreSQL: one transaction). A change that returns an
	// error leaves its user as it was and the others go on; UpdateAll returns
	// those errors by username, with ErrNotFound for a username it does not hold.
	// err is for the write itself: on err nothing was changed.
	UpdateAll(ctx context.Context, changes map[string]func(*User) error, opts ...WriteOption) (failed map[string]error, err error)
	Delete(ctx context.Context, username string, opts ...WriteOption) error
	List(ctx context.Context) ([]User, error)
	Page(ctx context.Context, after string, limit int, f Filter) ([]User, error)
	Count(ctx context.Context, f Filter) (int, error)
	Reload(ctx context.Context) error
	Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal, hooks WatchHooks)
	Ping(ctx context.Context) error
	Recheck(ctx context.Context, username string) (*Account, error)
	Factors(ctx context.Context, username string) (*Factors, error)
	FactorKeys(ctx context.Context) (map[string]int, error)
	LookupKey(ctx context.Context, k Key) ([]Match, error)
	RecheckKey(ctx context.Context, k Key) ([]Match, error)
}

// A WriteOption asks a write (Directory.UpdateAll, Delete) for more than
// the contract's rules.
type WriteOption uint8

const (
	// KeepAnAdmin refuses, with ErrLastAdmin, a write of one user that
	// would leave no enabled admin (KeepsAnAdmin), decided inside it.
	KeepAnAdmin WriteOption = iota + 1
	// ResetLinkOnly says the change of one user writes only its ResetLink
	// and ResetMails, which a backing may keep beside the record.
	ResetLinkOnly
)

// HasOption reports whether opts holds o: how a backend reads its options.
func HasOption(opts []WriteOption, o WriteOption) bool { return slices.Contains(opts, o) }

// ErrOneUser: an option of a write of one user (KeepAnAdmin,
// ResetLinkOnly) given to a write of several.
var ErrOneUser = errors.New("a write of one user only")

// UpdateOptions reads the options of an UpdateAll of n users, as every
// backend does: ErrOneUser when one that asks for a write of one user
// comes with several.
func UpdateOptions(opts []WriteOption, n int) (keepAdmin, linkOnly bool, err error) {
	keepAdmin, linkOnly = HasOption(opts, KeepAnAdmin), HasOption(opts, ResetLinkOnly)
	if (keepAdmin || linkOnly) && n != 1 {
		return false, false, ErrOneUser
	}
	return keepAdmin, linkOnly, nil
}

// Update changes the user named username: UpdateAll of one user, with
// its failure returned as its error: ErrNotFound for a missing name, a
// change's error as it returned it, with nothing written.
func Update(ctx context.Context, d Directory, username string, change func(*User) error, opts ...WriteOption) error {
	failed, err := d.UpdateAll(ctx, map[string]func(*User) error{username: change}, opts...)
	if err != nil {
		return err
	}
	return failed[username]
}

// WatchHooks tell Watch's caller what a reload did; either may be nil.
type WatchHooks struct {
	Reloaded func(err error) // each reload attempt; nil on success
	Cut      func(c Cut)     // a user's tokens died in the change, or the user's password generation moved
}

// A Cut is what a change did to one user's tokens, as WatchHooks.Cut is
// told it.
type Cut struct {
	Username string
	// Before: every token of the user issued before it died.
	Before time.Time
	// Stamp is what a session issued on the user's password now carries
	// (SessionGeneration): a token of any other stamp (up to
	// MaxSessionGeneration) is dead. 0 for a deleted user.
	Stamp uint64
}

// BootstrapAdmin adds the admin user "admin" to dir if dir has never held a
// user (Directory.Bootstrap), with a random password hashed under policy,
// and prints that password once to stderr.
func BootstrapAdmin(ctx context.Context, dir Directory, policy password.HashPolicy, stderr io.Writer) error {
	var secret [18]byte
	rand.Read(secret[:])
	pw := base64.RawURLEncoding.EncodeToString(secret[:])
	hash, err := policy.Hash([]byte(pw))
	if err != nil {
		return err
	}
	admin := User{Username: "admin", PasswordHash: hash, Name: "Administrator", Groups: []string{}, Admin: true, TokensAfter: time.Now().UTC()}
	added, err := dir.Bootstrap(ctx, admin)
	if err != nil || !added {
		return err
	}
	fmt.Fprintf(stderr, "authsvc: created the admin user \"admin\" in %s; change its password with 'authsvc user passwd admin'; password: %s\n", dir, pw)
	return nil
}

// CutOf returns what a change of the user named name, from was to is as a
// read begun at readAt found them, did to their tokens, and whether it
// killed any: deleted (is nil) or newly disabled, every token issued
// before readAt; a later cut-off, which every password change sets, every
// token issued before it; another password generation (an older file put
// back moves it back), the tokens of every other generation. Another hash
// alone is not a death: a rehash on login writes one. A was of nil (a user
// the caller did not know before) is judged conservatively: a disabled
// user, and one with a cut-off, are told.
func CutOf(name string, was, is *Account, readAt time.Time) (Cut, bool) {
	switch {
	case is == nil:
		return Cut{Username: name, Before: readAt}, true
	case is.isDisabled() && (was == nil || !was.isDisabled()):
		return Cut{Username: name, Before: readAt, Stamp: is.SessionGeneration()}, true
	case was == nil && is.cutoff != noCutoff,
		was != nil && (is.cutoff > was.cutoff || is.generation != was.generation):
		return Cut{Username: name, Before: is.TokensAfter(), Stamp: is.SessionGeneration()}, true
	}
	return Cut{}, false
}

// A SlowestCheck is what every failed login is made to cost: a check
// against a hash at the slowest parameters in the directory. Unknown and
// disabled users are checked against its hash, and every failure, theirs
// and a wrong password's alike, is held until it has taken as long as such
// a check takes (a sleep, no CPU), so that neither mixed costs nor the
// holding itself tells which users exist.
type SlowestCheck struct {
	Hash  *password.Hash
	Shape string       // the scheme and parameters hash was made with (passwordHash.shape)
	Took  atomic.Int64 // nanoseconds a check against hash takes: measured when it is made, then tracked as the 90th percentile of the checks of its shape (observe)
}

// observe folds the duration d of a check against a hash of the slowest
// shape into Took, which every failed login is held up to. Took climbs by
// nine steps of 1/160 of itself when d outlasts it and falls by one when
// not, which balances where one check in ten outlasts it: a target above
// most checks, so that few failures show their own check's time, and one
// that a stall moves by a step, not by its length. (Held up to the
// average instead, about half of the failures would show their own time,
// and each stall would jolt the target.)
func (c *SlowestCheck) observe(d time.Duration) {
	// A lost update between racing logins only delays the tracking.
	old := c.Took.Load()
	step := max(old/160, int64(time.Microsecond)) // never stuck at zero
	if int64(d) > old {
		c.Took.Store(old + 9*step)
	} else {
		c.Took.Store(max(0, old-step))
	}
}

// HoldUntil sleeps until something that has taken took has taken target:
// a failed check is held to what the slowest check costs (SlowestCheck),
// so that its time does not tell why it failed.
func HoldUntil(target, took time.Duration) {
	if rest := target - took; rest > 0 {
		time.Sleep(rest)
	}
}

// Account is a user as the handlers need it, kept small: a server holds one
// for every user in the file. Its strings share one allocation (the index's
// key is its info.Username), its groups are interned, its hash is kept as
// text and parsed when a login needs it, and its info reply is encoded on
// demand (appendInfoJSON). It is never changed once made, so a reload keeps
// the Account of a user whose entry did not change.
type Account struct {
	// The info reply's fields, apart: an Info inside would pad its Admin
	// to 8 bytes.
	username, name, email string
	groups                []string
	storedHash            string // as stored: a rehash writes only if it is still this
	cutoff                int64  // tokensAfter, in 8 bytes rather than time.Time's 24 (packCutoff)
	failuresAfter         int64  // FailuresAfter, packed as cutoff is
	codesAfter            int64  // CodesAfter, packed as cutoff is
	// flags are Admin, Disabled and HasSecondFactor, in one byte: the
	// struct is at its 120 bytes (TestDirUserSize).
	flags accountFlags
	// generation is the low 16 bits of User.PasswordGeneration: enough to
	// tell the password a session was issued on from the ones after it,
	// since every change also moves the cut-off, which kills the sessions
	// of older passwords whatever their generation.
	generation uint16
	work       float32 // hash().work() when usable, else 0: the index's slowest without parsing every hash again
}

// accountFlags are an Account's yes-or-no properties.
type accountFlags uint8

const (
	flagAdmin accountFlags = 1 << iota
	flagDisabled
	flagSecondFactor
)

// makeFlags returns the flags of an account with these properties.
func makeFlags(admin, disabled, secondFactor bool) accountFlags {
	var f accountFlags
	if admin {
		f |= flagAdmin
	}
	if disabled {
		f |= flagDisabled
	}
	if secondFactor {
		f |= flagSecondFactor
	}
	return f
}

func (u *Account) isAdmin() bool    { return u.flags&flagAdmin != 0 }
func (u *Account) isDisabled() bool { return u.flags&flagDisabled != 0 }

// HasSecondFactor reports whether u has a second factor (User.HasSecondFactor).
func (u *Account) HasSecondFactor() bool { return u.flags&flagSecondFactor != 0 }

// Username returns u's name, as stored.
func (u *Account) Username() string { return u.username }

// Info returns u's public view: the info reply, the login reply's "user".
func (u *Account) Info() Info {
	return Info{Username: u.username, Name: u.name, Email: u.email, Groups: u.groups, Admin: u.isAdmin()}
}

// Admin reports whether u may act on other users.
func (u *Account) Admin() bool { return u.isAdmin() }

// Disabled reports whether u is disabled: no login, no live token.
func (u *Account) Disabled() bool { return u.isDisabled() }

// StoredHash returns u's hash as stored, for a write conditional on it.
func (u *Account) StoredHash() string { return u.storedHash }

// TokensAfter returns u's cut-off: tokens issued before it are dead.
func (u *Account) TokensAfter() time.Time { return unpackCutoff(u.cutoff) }

// FailuresAfter returns when u was last unlocked (User.FailuresAfter):
// failed logins before it no longer count; zero if never.
func (u *Account) FailuresAfter() time.Time { return unpackCutoff(u.failuresAfter) }

// CodesAfter returns when u's code lock was last lifted (User.CodesAfter):
// wrong second-factor codes before it no longer count; zero if never.
func (u *Account) CodesAfter() time.Time { return unpackCutoff(u.codesAfter) }

// Bounds of a cut-off packed in nanoseconds since 1970 (years 1678 to
// 2262): one outside them is held at the bound, which kills or spares the
// same tokens (none were issued before 1678, all before 2262).
const (
	noCutoff  = math.MinInt64 // the zero time: no cut-off
	minCutoff = math.MinInt64 + 1
	maxCutoff = math.MaxInt64
)

// packCutoff returns t as Account.cutoff holds it.
func packCutoff(t time.Time) int64 {
	switch {
	case t.IsZero():
		return noCutoff
	case t.Before(time.Unix(0, minCutoff)):
		return minCutoff
	case t.After(time.Unix(0, maxCutoff)):
		return maxCutoff
	}
	return t.UnixNano()
}

// unpackCutoff returns the cut-off packCutoff made c of, in UTC.
func unpackCutoff(c int64) time.Time {
	if c == noCutoff {
		return time.Time{}
	}
	return time.Unix(0, c).UTC()
}

// Hash returns u's password hash, parsed; validated when u was made, so it
// does not fail, and fails closed (never matching) if it did.
func (u *Account) Hash() *password.Hash {
	h, err := password.ParseHash(u.storedHash)
	if err != nil {
		return password.Unusable()
	}
	return h
}

// Later returns the later of a and b.
func Later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// NextCutoff returns the cut-off a change made at now writes over a user
// whose cut-off is prev: now to the millisecond (a token's issue time in
// Redis), and later than prev, so that the directory's cut-offs, and with
// them the Supersedes they make (ordered by their Before), follow the
// order of the writes even when two instances' clocks disagree.
func NextCutoff(prev, now time.Time) time.Time {
	now = now.UTC().Truncate(time.Millisecond)
	if floor := prev.Truncate(time.Millisecond).Add(time.Millisecond); now.Before(floor) {
		return floor.UTC()
	}
	return now
}

// SessionGeneration returns what a session issued now on u's password
// carries as its stamp (see SessionUser).
func (u *Account) SessionGeneration() uint64 { return SessionGeneration(uint64(u.generation)) }

// SessionGeneration returns the stamp of a session issued on password
// generation g (User.PasswordGeneration): 1 to MaxSessionGeneration.
func SessionGeneration(g uint64) uint64 { return uint64(uint16(g)) + 1 }

// MaxSessionGeneration is the largest stamp SessionGeneration returns. A
// larger stamp is what versions before password generations stored (a
// digest of the hash): such a session is judged by the cut-off alone.
const MaxSessionGeneration = 1 << 16

// NewSlowestCheck returns what every failed login costs in a directory
// whose slowest usable hash is slowest (nil when it has none: then the
// default hash policy's), its time measured as it is made; or prev, when
// prev is of the same scheme and parameters, keeping what its checks
// have tracked.
func NewSlowestCheck(slowest *password.Hash, prev *SlowestCheck) (*SlowestCheck, error) {
	if slowest == nil { // no usable hash: check against the default policy's
		var err error
		if slowest, err = password.DefaultHashPolicy().Dummy(); err != nil {
			return nil, err
		}
	}
	shape := slowest.Shape()
	if prev != nil && prev.Shape == shape {
		return prev, nil
	}
	start := time.Now()
	dummy, err := password.DummyLike(slowest)
	if err != nil {
		return nil, err
	}
	c := &SlowestCheck{Hash: dummy, Shape: shape}
	c.Took.Store(int64(time.Since(start))) // making a hash costs what checking one does
	return c, nil
}

// Validate returns why list could not be served, or nil: what a load
// checks of each user (its Django fingerprint, its second factors, its
// hash) and of them all (the check failed logins cost), offline (authsvc
// user check).
func Validate(list []User) error {
	var slowest *password.Hash
	var most float32 // slowest's work: the first of the most work wins
	for i := range list {
		u := &list[i]
		if err := CheckDjangoHash(u.DjangoHash); err != nil {
			return fmt.Errorf("users[%d] (%q): django_hash: %v", i, u.Username, err)
		}
		if err := CheckFactors(u.MFA); err != nil {
			return fmt.Errorf("users[%d] (%q): mfa: %v", i, u.Username, err)
		}
		if err := CheckAccessTokens(u.AccessTokens); err != nil {
			return fmt.Errorf("users[%d] (%q): %v", i, u.Username, err)
		}
		if err := CheckResetLink(u.ResetLink); err != nil {
			return fmt.Errorf("users[%d] (%q): %v", i, u.Username, err)
		}
		hash, err := password.ParseHash(u.PasswordHash)
		if err != nil {
			return fmt.Errorf("users[%d] (%q): password_hash: %v", i, u.Username, err)
		}
		if hash.Usable() && float32(hash.Work()) > most {
			slowest, most = hash, float32(hash.Work())
		}
	}
	_, err := NewSlowestCheck(slowest, nil)
	return err
}

// NewAccount returns u as the server uses it, its hash validated.
func NewAccount(u *User) (*Account, error) {
	groups := u.Groups
	if groups == nil {
		groups = []string{}
	}
	a, err := MakeAccount(&AccountParts{Username: []byte(u.Username), PasswordHash: []byte(u.PasswordHash),
		Name: []byte(u.Name), Email: []byte(u.Email), Groups: groups, Admin: u.Admin, Disabled: u.Disabled,
		TokensAfter: u.TokensAfter, FailuresAfter: u.FailuresAfter, CodesAfter: u.CodesAfter, PasswordGeneration: u.PasswordGeneration, MFA: u.MFA}, nil)
	if err != nil {
		return nil, fmt.Errorf("user %q: password_hash: %w", u.Username, err)
	}
	return a, nil
}

// A Reader answers the questions a login and a token check ask: a
// Directory, or one index of one.
type Reader interface {
	Lookup(ctx context.Context, username string) (*Account, error)
	Slowest() *SlowestCheck
}

// Authenticate returns the user, as d's backing has them now
// (LookupConfirmed), if password is theirs, checked with verify (a
// Pool's). Unknown and disabled users, and users whose password is
// unusable, cost one check against dummy, a hash at the hash policy's cost
// (nil: the slowest hash in the directory), so that one slow hash in the
// directory costs failed logins time but no check capacity; then
// every failure, theirs and a wrong password's alike, is held until it has
// taken as long as the slowest check's Took: every failure takes the
// same time, whatever mix of schemes and costs the directory holds. verify
// is called once, and the holding comes after it returns, so a caller that
// gives back its hasher slot then holds none while it waits.
//
// The dummy check is held too: were only wrong passwords held up to the
// target, on a directory of one scheme they would take max(check, target),
// longer than an unknown user's bare check. And the target is fed by every
// check of the slowest shape, known users' included, so that it is not
// left at a stale value while only known users fail.
func Authenticate(ctx context.Context, d Reader, username, pw string, verify func(*password.Hash, []byte) bool, dummy *password.Hash) (*Account, bool, error) {
	// Confirmed: a password is checked against the backing as it is now,
	// never against a copy kept through an outage, which token checks
	// alone may use.
	u, err := LookupConfirmed(ctx, d, username)
	if err != nil && !errors.Is(err, ErrNotFound) {
		// The directory cannot say who exists (PostgreSQL out of reach):
		// no verdict, neither a match nor a failure to record.
		return nil, false, err
	}
	var hash *password.Hash
	if u != nil && !u.isDisabled() {
		hash = u.Hash()
	}
	usable := hash != nil && hash.Usable()
	slowest := d.Slowest()
	if !usable {
		hash = dummy
		if hash == nil {
			hash = slowest.Hash
		}
	}
	start := time.Now()
	ok := verify(hash, []byte(pw))
	took := time.Since(start)
	// The target is the one before this check: had it counted, an unknown
	// user's (slow) check would move its own target and a fast hash's would
	// not.
	target := time.Duration(slowest.Took.Load())
	if !usable || hash.Shape() == slowest.Shape {
		slowest.observe(took)
	}
	if usable && ok {
		return u, true, nil
	}
	HoldUntil(target, took)
	return nil, false, nil
}

// SessionUser returns the user named username whose token was issued at
// issuedAt on the password generation stamp (SessionGeneration), or nil
// when the token has died with its user: deleted, disabled, issued before
// the user's cut-off (TokensAfter), which every password change moves on,
// or issued on a password the user has since changed. The last catches a
// login that checked the old password while a change was written: its
// token is issued after the cut-off but stamped with the old generation.
// The hash itself does not decide: a rehash on login must not end a
// session. A stamp above MaxSessionGeneration (a session stored by an
// earlier version) is judged by the rest alone.
//
// Only the directory's state now decides (docs/design/tokens.md): d's copy
// of the user may be older than the token (another instance changed the
// password and handed out the token; this one has not reloaded yet), so a
// token that copy finds dead is judged again on a copy read after the call
// began (Recheck) before nil is returned. A live token costs one Lookup.
//
// An error means the directory cannot say (PostgreSQL unreachable past its
// grace, a users file that no longer loads): the caller answers 503 and
// must not take the token for dead.
func SessionUser(ctx context.Context, d Directory, username string, issuedAt time.Time, stamp uint64) (*Account, error) {
	u, err := d.Lookup(ctx, username)
	switch {
	case err == nil && sessionLive(u, issuedAt, stamp):
		return u, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return nil, err
	}
	u, err = d.Recheck(ctx, username)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case !sessionLive(u, issuedAt, stamp):
		return nil, nil
	}
	return u, nil
}

// sessionLive reports whether u, as one copy of the directory has them,
// lets a session issued at issuedAt on stamp live (SessionUser).
func sessionLive(u *Account, issuedAt time.Time, stamp uint64) bool {
	switch {
	case u.isDisabled() || issuedAt.Before(u.TokensAfter()):
		return false
	case stamp <= MaxSessionGeneration && stamp != u.SessionGeneration():
		return false
	}
	return true
}
