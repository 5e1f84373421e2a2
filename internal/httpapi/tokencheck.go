package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// TokenPolicy says how long tokens live and how many a user may hold.
type TokenPolicy struct {
	TTL        time.Duration // 0: tokens never expire
	Idle       time.Duration // 0: no idle limit
	MaxPerUser int           // 0: no limit
	PATMaxTTL  time.Duration // the longest a personal access token may live; 0: DefaultPATMaxTTL
	// RequireMFA is --require-mfa: a login of a user it covers who has no
	// second factor gets an enrolment session (tokens.Session.Enrolment).
	RequireMFA users.MFAPolicy
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
// or the user, changed (tokens.Store's Supersede): login.SessionPolicy's.
func (p TokenPolicy) Supersession(username string, stamp uint64, before, now time.Time) tokens.Supersession {
	return p.sessions().Supersession(username, stamp, before, now)
}

// sessions returns what a login needs of the policy.
func (p TokenPolicy) sessions() login.SessionPolicy {
	return login.SessionPolicy{TTL: p.TTL, MaxPerUser: p.MaxPerUser, RequireMFA: p.RequireMFA}
}

// A principal is who a request's token speaks for: a session, or a
// personal access token (pat set).
type principal struct {
	digest  tokens.Digest
	session tokens.Session
	pat     *users.AccessToken // shared with the directory: never changed
	user    *users.Account
	// mfaMissing: a personal access token's user has no second factor and
	// the policy requires one (tokenCheck.mfaMissing).
	mfaMissing bool
}

// kind returns the kind of the principal's token.
func (p principal) kind() tokens.Kind {
	if p.pat != nil {
		return tokens.KindPAT
	}
	return tokens.KindSession
}

// enrolmentOnly reports whether the principal's token may do no more than
// a user without the second factor --require-mfa asks of them may (API.md,
// Required second factor): an enrolment session whose user has none yet,
// or a personal access token of a user whom the policy covers and who has
// none (mfaMissing), whenever it was minted. A personal access token
// cannot enrol, so it opens nothing then. Once the user has a factor, on
// whatever instance it was confirmed, the token is a full one here too, as
// soon as this instance knows of the factor; confirming also issues the
// session again without the mark.
func (p principal) enrolmentOnly() bool {
	if p.pat != nil {
		return p.mfaMissing
	}
	return p.session.Enrolment && !p.user.HasSecondFactor()
}

// mfaMissing reports whether u has no second factor and the policy
// requires one of them: such a user's personal access tokens open
// nothing, and no session of theirs mints one, whenever either was made.
// The policy is read at every request, so it holds from the start of the
// instance that applies it.
func (c tokenCheck) mfaMissing(u *users.Account) bool {
	return c.policy.RequireMFA.Covers(u) && !u.HasSecondFactor()
}

// errPATEnrollmentRequired: a personal access token of a user whom
// --require-mfa covers and who has no second factor.
var errPATEnrollmentRequired = &apiError{status: http.StatusForbidden, code: "mfa_enrollment_required",
	detail: "A second factor is required of this token's user: it opens nothing until they enrol one (log in, then POST /api/auth/mfa/totp/)."}

// A tokenCheck authenticates requests by their token: the dependencies
// every handler behind a token shares.
type tokenCheck struct {
	users   users.Directory
	store   tokens.Store
	policy  TokenPolicy
	metrics *Metrics
	uses    *AccessTokenUses
	now     func() time.Time
	// enrolment: the endpoint serves an enrolment session too (the
	// second-factor status, enrolment and confirm, and logout); every
	// other answers it 403 mfa_enrollment_required.
	enrolment bool
}

// authenticate returns the principal of the request's session token:
// errNotAuthenticated or errInvalidToken when there is none, a store or
// directory error when they cannot say. A live personal access token is
// errInsufficientScope: an endpoint that takes one says so with
// authenticateScope. It records the token's use.
func (c tokenCheck) authenticate(r *http.Request) (principal, error) {
	return c.authenticateScope(r, "", true)
}

// authenticateScope returns the principal of the request's token, as
// authenticate does, but for a personal access token carrying scope
// (none: "", which none carries), which it takes too; with sessions
// false, a live session is errInsufficientScope.
func (c tokenCheck) authenticateScope(r *http.Request, scope string, sessions bool) (principal, error) {
	digest, kind, err := tokens.ParseAuthorization(r.Header)
	switch {
	case errors.Is(err, tokens.ErrNoCredentials):
		return principal{}, errNotAuthenticated
	case err != nil:
		// A malformed token, or one whose checksum fails: refused before
		// any store or directory is read.
		c.metrics.tokenChecked(kind, errInvalidToken)
		return principal{}, errInvalidToken
	}
	p, err := c.check(r.Context(), digest, kind)
	switch {
	case err != nil:
	case p.pat != nil && p.enrolmentOnly():
		err = errPATEnrollmentRequired
	case p.session.Enrolment && !c.enrolment && p.enrolmentOnly():
		err = errEnrollmentRequired
	case kind == tokens.KindPAT && !p.pat.Has(scope) || kind == tokens.KindSession && !sessions:
		err = errInsufficientScope
	}
	c.metrics.tokenChecked(kind, err)
	return p, err
}

// check returns the principal of the token of kind whose digest is digest:
// errInvalidToken when it is not live, a store or directory error when
// they cannot say. It records the token's use.
func (c tokenCheck) check(ctx context.Context, digest tokens.Digest, kind tokens.Kind) (principal, error) {
	if kind == tokens.KindPAT {
		return c.checkPAT(ctx, digest)
	}
	now := c.now()
	sess, err := c.lookup(ctx, digest, now)
	if err != nil {
		return principal{}, err
	}
	if c.policy.idleExpired(sess, now) {
		// A store's cache may hold a last use that another instance has
		// since moved: the token dies only on what the store itself says.
		if sess, err = c.lookup(tokens.WithFresh(ctx), digest, now); err != nil {
			return principal{}, err
		}
		if c.policy.idleExpired(sess, now) {
			c.store.Revoke(ctx, digest) // dead stays dead
			c.metrics.Revoked(revokedIdle, 1)
			return principal{}, errInvalidToken
		}
	}
	u, err := users.SessionUser(ctx, c.users, sess.Username, sess.IssuedAt, sess.Stamp)
	if err != nil {
		return principal{}, err
	}
	if u == nil {
		// Dead stays dead: remove it, so that no later change of the user
		// (enable, a re-add, an older file put back) brings it back, on
		// this instance or any other sharing the store.
		c.store.Revoke(ctx, digest)
		return principal{}, errInvalidToken
	}
	if now.Sub(sess.LastUsedAt) >= c.policy.touchLag() {
		c.store.Touch(ctx, digest, now)
	}
	return principal{digest: digest, session: sess, user: u}, nil
}

// checkPAT returns the principal of the personal access token whose
// digest is digest: errInvalidToken unless the directory holds it, live,
// of an enabled user. Its life is the directory's alone: the token store
// is not read.
func (c tokenCheck) checkPAT(ctx context.Context, digest tokens.Digest) (principal, error) {
	now := c.now()
	u, t, err := users.AccessTokenUser(ctx, c.users, digest, now)
	switch {
	case err != nil:
		return principal{}, err
	case u == nil:
		return principal{}, errInvalidToken
	}
	c.uses.record(u.Username(), t, now)
	return principal{digest: digest, pat: t, user: u, mfaMissing: c.mfaMissing(u)}, nil
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
