package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// TokenPolicy says how long tokens live and how many a user may hold.
type TokenPolicy struct {
	TTL        time.Duration // 0: tokens never expire
	Idle       time.Duration // 0: no idle limit
	MaxPerUser int           // 0: no limit
}

// maxTouchLag is how far a session's recorded last use may lag a real one
// (API.md: at most 60 s).
const maxTouchLag = time.Minute

// touchLag is how stale a recorded last use may get before a use records
// it again: 60 s, or a quarter of the idle limit when that is shorter, so
// that writing last use costs the hot path at most one store write per
// token per lag.
func (p TokenPolicy) touchLag() time.Duration {
	if p.Idle > 0 {
		return min(maxTouchLag, p.Idle/4)
	}
	return maxTouchLag
}

// idleExpired reports whether sess has died of idleness at now. A recorded
// last use lags a real one by less than touchLag, so a token is refused
// only once idle + touchLag has passed since it: one used within the idle
// limit is never refused, and one unused for longer is refused at most
// touchLag late.
func (p TokenPolicy) idleExpired(sess tokens.Session, now time.Time) bool {
	return p.Idle > 0 && now.Sub(sess.LastUsedAt) > p.Idle+p.touchLag()
}

// Supersession is what the token store is told when username's password,
// or the user, changed (tokens.Store's Supersede): the stamp of the
// password now (0 for a deleted user), the cut-off before, and how long
// the store keeps the stamp: as long as a token issued at now may live, for
// ever when tokens never expire.
func (p TokenPolicy) Supersession(username string, stamp uint64, before, now time.Time) tokens.Supersession {
	sup := tokens.Supersession{Username: username, Stamp: stamp, MaxStamp: users.MaxSessionGeneration, Before: before}
	if p.TTL > 0 {
		sup.Until = now.Add(p.TTL)
	}
	return sup
}

// afresh answers the store's refusal (tokens.ErrSuperseded) of a session
// or challenge of u issued on stamp by the directory as it is now
// (Recheck): it returns the user as the directory has them and the stamp a
// session of theirs carries now, and ok when the password checked is
// still theirs there (enabled, the same hash), so that the caller may
// decide once more on them. The directory decides
// (docs/design/tokens.md): the refusal came either from this instance's
// copy being behind (a factor change on another instance moved the stamp,
// the password unchanged) or from the store's stamp being behind (a
// change it was never told of, say while Redis was away); either way the
// store is told the directory's state. Otherwise (another password, the user
// disabled, a directory that cannot say) the refusal stands.
func (c tokenCheck) afresh(ctx context.Context, u *users.Account, stamp uint64) (*users.Account, uint64, bool) {
	fresh, err := c.users.Recheck(ctx, u.Username())
	if err != nil || fresh.Disabled() || fresh.StoredHash() != u.StoredHash() {
		return nil, 0, false
	}
	// The store is told the directory's state whatever stamp it holds: a
	// stamp that is neither the login's nor the directory's is one the
	// directory has left (a change the store missed), and a Supersede
	// older than one the store was told is ignored by it.
	now := fresh.SessionGeneration()
	if _, err := c.store.Supersede(ctx, c.policy.Supersession(u.Username(), now, fresh.TokensAfter(), c.now())); err != nil {
		return nil, 0, false
	}
	return fresh, now, true
}

// A principal is who a request's token speaks for.
type principal struct {
	digest  tokens.Digest
	session tokens.Session
	user    *users.Account
}

// A tokenCheck authenticates requests by their token: the dependencies
// every handler behind a token shares.
type tokenCheck struct {
	users   users.Directory
	store   tokens.Store
	policy  TokenPolicy
	metrics *Metrics
	now     func() time.Time
}

// authenticate returns the principal of the request's token:
// errNotAuthenticated or errInvalidToken when there is none, a store error
// when the store cannot say. It records the token's use.
func (c tokenCheck) authenticate(r *http.Request) (principal, error) {
	digest, _, err := tokens.ParseAuthorization(r.Header)
	switch {
	case errors.Is(err, tokens.ErrNoCredentials):
		return principal{}, errNotAuthenticated
	case err != nil:
		return principal{}, errInvalidToken
	}
	now := c.now()
	sess, err := c.lookup(r.Context(), digest, now)
	if err != nil {
		return principal{}, err
	}
	if c.policy.idleExpired(sess, now) {
		// A store's cache may hold a last use that another instance has
		// since moved: the token dies only on what the store itself says.
		if sess, err = c.lookup(tokens.WithFresh(r.Context()), digest, now); err != nil {
			return principal{}, err
		}
		if c.policy.idleExpired(sess, now) {
			c.store.Revoke(r.Context(), digest) // dead stays dead
			c.metrics.Revoked(revokedIdle, 1)
			return principal{}, errInvalidToken
		}
	}
	u, err := users.SessionUser(r.Context(), c.users, sess.Username, sess.IssuedAt, sess.Stamp)
	if err != nil {
		return principal{}, err
	}
	if u == nil {
		// Dead stays dead: remove it, so that no later change of the user
		// (enable, a re-add, an older file put back) brings it back, on
		// this instance or any other sharing the store.
		c.store.Revoke(r.Context(), digest)
		return principal{}, errInvalidToken
	}
	if now.Sub(sess.LastUsedAt) >= c.policy.touchLag() {
		c.store.Touch(r.Context(), digest, now)
	}
	return principal{digest: digest, session: sess, user: u}, nil
}

// lookup returns the session of digest at now: errInvalidToken when the
// store has none, a store error when it cannot say.
func (c tokenCheck) lookup(ctx context.Context, digest tokens.Digest, now time.Time) (tokens.Session, error) {
	sess, err := c.store.Lookup(ctx, digest, now)
	if errors.Is(err, tokens.ErrNotFound) {
		return tokens.Session{}, errInvalidToken
	}
	return sess, err
}

// authenticateTarget authenticates the request's token (authenticate)
// and returns its principal and the user the request is about (target).
func (c tokenCheck) authenticateTarget(r *http.Request) (principal, *users.Account, error) {
	p, err := c.authenticate(r)
	if err != nil {
		return p, nil, err
	}
	target, err := c.target(r, p)
	return p, target, err
}

// target returns the user a request's ?username= names, with info's rules:
// the principal's own user when absent or their own name; another user for
// admins (not_found if none); permission_denied for others, whether or not
// that user exists.
func (c tokenCheck) target(r *http.Request, p principal) (*users.Account, error) {
	name, err := usernameParam(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	name = users.NormalizeUsername(name)
	if name == "" || name == p.user.Username() {
		return p.user, nil
	}
	if !p.user.Admin() {
		return nil, errPermissionDenied
	}
	return c.users.Lookup(r.Context(), name)
}
