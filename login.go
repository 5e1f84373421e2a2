package main

import (
	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"time"
)

// A loginGuard stands between a password and the hasher, for login and for
// any other request that checks a password: the throttle refuses guessing,
// the admission bounds the CPU spent on passwords, the tarpit slows
// refused clients down, and one audit line records each attempt's outcome.
type loginGuard struct {
	throttle  throttle.Throttle
	admission *admission
	hasher    *password.Pool // nil: compare on the caller's goroutine
	tarpit    *tarpit        // nil: refusals are immediate
	trusted   []netip.Prefix // proxies whose X-Forwarded-For is believed
	log       *slog.Logger   // for the audit lines
	now       func() time.Time
	policy    password.HashPolicy // a hash outside it is rehashed after a successful login
	metrics   *metrics
}

// atCapacity reports whether a password check would be refused at once,
// and if so holds the caller in the tarpit: a login at capacity is refused
// before its body is decoded, the cheapest 503.
func (g *loginGuard) atCapacity(ctx context.Context) bool {
	if !g.admission.full() {
		return false
	}
	g.tarpit.hold(ctx)
	return true
}

// A loginAttempt is one password check of one username by one client.
type loginAttempt struct {
	g        *loginGuard
	w        http.ResponseWriter // names the request id in the audit line
	r        *http.Request
	username string
	client   string // the throttle's key for the client
	users    userReader
	event    string // the audit line's message: "login", or what else checks a password
}

// attempt starts a password check of username from r's client against users.
func (g *loginGuard) attempt(w http.ResponseWriter, r *http.Request, users userReader, username string) *loginAttempt {
	return &loginAttempt{g: g, w: w, r: r, users: users, username: username, client: throttle.ClientKey(clientIP(r, g.trusted)), event: "login"}
}

// verify checks password in three steps: admit (a place in the throttle,
// reserved before the compare, then a hasher slot: 429 or 503, held in the
// tarpit), the verdict (the password,
// against a dummy hash for unknown and disabled users: 401 for all three),
// and record (the verdict in the throttle). It returns the user on success.
func (a *loginAttempt) verify(password string) (*dirUser, error) {
	g, ctx := a.g, a.r.Context()
	// A directory that cannot say who exists fails closed: 503, not 401.
	if _, err := a.users.Lookup(ctx, a.username); err != nil && !errors.Is(err, errUserNotFound) {
		return nil, err
	}
	wait, ok, err := g.throttle.Reserve(ctx, a.username, a.client, g.now())
	switch {
	case err != nil:
		return nil, err // the throttle cannot decide: fail closed
	case !ok:
		g.tarpit.hold(ctx)
		return nil, throttled(int(wait / time.Second))
	}
	release, err := g.admission.acquire(ctx)
	if err != nil {
		g.throttle.Release(ctx, a.username, a.client)
		g.tarpit.hold(ctx)
		return nil, errUnavailable
	}
	u, ok := authenticate(ctx, a.users, a.username, password, g.hasher.Verify)
	release()
	if !ok {
		if err := g.throttle.Failure(ctx, a.username, a.client, g.now()); err != nil {
			return nil, err
		}
		return nil, errInvalidCredentials
	}
	if err := g.throttle.Success(ctx, a.username, a.client, g.now()); err != nil {
		return nil, err
	}
	return u, nil
}

// audit logs the attempt's outcome, err being what the request ends with:
// one line per attempt. A username that names no user is not logged:
// people type passwords into username fields.
func (a *loginAttempt) audit(err error) {
	username := a.username
	if _, lookupErr := a.users.Lookup(a.r.Context(), username); lookupErr != nil {
		username = "(unknown)"
	}
	a.g.log.LogAttrs(a.r.Context(), slog.LevelInfo, a.event, slog.String("outcome", outcomeName(err)), slog.String("username", username),
		slog.String("client", a.client), slog.String("request_id", requestID(a.w)))
}

// outcomeName is the audit line's name for a request that ends with err:
// "success", or the code of the error reply it gets.
func outcomeName(err error) string {
	var e *apiError
	switch {
	case err == nil:
		return "success"
	case errors.As(err, &e):
		return e.code
	case errors.Is(err, tokens.ErrUnavailable):
		return errUnavailable.code
	}
	return errInternal.code
}

// errHashChanged: the stored hash changed between the check and the rehash
// (a concurrent user passwd, which wins).
var errHashChanged = errors.New("password hash changed meanwhile")

// rehash writes password's hash under the policy if u's stored hash is
// outside it (another scheme, other parameters, a Django form), as
// Django's must_update does. It never ends a session (a token's life does
// not hang on the hash), writes only if the stored hash is still the one
// just verified, never writes a bcrypt hash of a password bcrypt would cut,
// and when it fails the login still succeeds: the failure is logged.
func (g *loginGuard) rehash(ctx context.Context, users Directory, u *dirUser, pw string) {
	if !g.policy.NeedsRehash(u.hash()) {
		return
	}
	if g.policy.Scheme == password.SchemeBcrypt && len(pw) > password.BcryptKeyBytes {
		g.metrics.rehashed("skipped")
		return
	}
	hash, err := g.policy.Hash([]byte(pw))
	if err == nil {
		err = users.Update(ctx, u.Username(), func(x *User) error {
			if x.PasswordHash != u.StoredHash() {
				return errHashChanged
			}
			x.PasswordHash = hash
			return nil
		})
	}
	switch {
	case errors.Is(err, errHashChanged):
		g.metrics.rehashed("skipped")
	case err != nil:
		g.metrics.rehashed("error")
		g.log.LogAttrs(ctx, slog.LevelWarn, "rehash on login failed; the old hash stays", slog.String("username", u.Username()), slog.Any("err", err))
	default:
		g.metrics.rehashed("ok")
		g.log.LogAttrs(ctx, slog.LevelInfo, "rehashed on login", slog.String("username", u.Username()),
			slog.String("from", u.hash().Scheme()), slog.String("to", g.policy.Scheme))
	}
}
