package httpapi

import (
	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
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
type LoginGuard struct {
	Throttle  throttle.Throttle
	Admission *Admission
	Hasher    *password.Pool // nil: compare on the caller's goroutine
	Tarpit    *Tarpit        // nil: refusals are immediate
	Trusted   []netip.Prefix // proxies whose X-Forwarded-For is believed
	Log       *slog.Logger   // for the audit lines
	Now       func() time.Time
	Policy    password.HashPolicy // a hash outside it is rehashed after a successful login
	Metrics   *Metrics
}

// atCapacity reports whether a password check would be refused at once,
// and if so holds the caller in the tarpit: a login at capacity is refused
// before its body is decoded, the cheapest 503.
func (g *LoginGuard) atCapacity(ctx context.Context) bool {
	if !g.Admission.full() {
		return false
	}
	g.Tarpit.hold(ctx)
	return true
}

// A loginAttempt is one password check of one username by one client.
type loginAttempt struct {
	g        *LoginGuard
	w        http.ResponseWriter // names the request id in the audit line
	r        *http.Request
	username string
	client   string // the throttle's key for the client
	users    users.Reader
	event    string // the audit line's message: "login", or what else checks a password
}

// attempt starts a password check of username from r's client against users.
func (g *LoginGuard) attempt(w http.ResponseWriter, r *http.Request, users users.Reader, username string) *loginAttempt {
	return &loginAttempt{g: g, w: w, r: r, users: users, username: username, client: throttle.ClientKey(ClientIP(r, g.Trusted)), event: "login"}
}

// verify checks password in three steps: admit (a place in the throttle,
// reserved before the compare, then a hasher slot: 429 or 503, held in the
// tarpit), the verdict (the password,
// against a dummy hash for unknown and disabled users: 401 for all three),
// and record (the verdict in the throttle). It returns the user on success.
func (a *loginAttempt) verify(password string) (*users.Account, error) {
	g, ctx := a.g, a.r.Context()
	// A directory that cannot say who exists fails closed: 503, not 401.
	if _, err := a.users.Lookup(ctx, a.username); err != nil && !errors.Is(err, users.ErrNotFound) {
		return nil, err
	}
	wait, ok, err := g.Throttle.Reserve(ctx, a.username, a.client, g.Now())
	switch {
	case err != nil:
		return nil, err // the throttle cannot decide: fail closed
	case !ok:
		g.Tarpit.hold(ctx)
		return nil, throttled(int(wait / time.Second))
	}
	release, err := g.Admission.Acquire(ctx)
	if err != nil {
		g.Throttle.Release(ctx, a.username, a.client)
		g.Tarpit.hold(ctx)
		return nil, errUnavailable
	}
	u, ok := users.Authenticate(ctx, a.users, a.username, password, g.Hasher.Verify)
	release()
	if !ok {
		if err := g.Throttle.Failure(ctx, a.username, a.client, g.Now()); err != nil {
			return nil, err
		}
		return nil, errInvalidCredentials
	}
	if err := g.Throttle.Success(ctx, a.username, a.client, g.Now()); err != nil {
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
	a.g.Log.LogAttrs(a.r.Context(), slog.LevelInfo, a.event, slog.String("outcome", outcomeName(err)), slog.String("username", username),
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
func (g *LoginGuard) Rehash(ctx context.Context, dir users.Directory, u *users.Account, pw string) {
	if !g.Policy.NeedsRehash(u.Hash()) {
		return
	}
	if g.Policy.Scheme == password.SchemeBcrypt && len(pw) > password.BcryptKeyBytes {
		g.Metrics.rehashed("skipped")
		return
	}
	hash, err := g.Policy.Hash([]byte(pw))
	if err == nil {
		err = dir.Update(ctx, u.Username(), func(x *users.User) error {
			if x.PasswordHash != u.StoredHash() {
				return errHashChanged
			}
			x.PasswordHash = hash
			return nil
		})
	}
	switch {
	case errors.Is(err, errHashChanged):
		g.Metrics.rehashed("skipped")
	case err != nil:
		g.Metrics.rehashed("error")
		g.Log.LogAttrs(ctx, slog.LevelWarn, "rehash on login failed; the old hash stays", slog.String("username", u.Username()), slog.Any("err", err))
	default:
		g.Metrics.rehashed("ok")
		g.Log.LogAttrs(ctx, slog.LevelInfo, "rehashed on login", slog.String("username", u.Username()),
			slog.String("from", u.Hash().Scheme()), slog.String("to", g.Policy.Scheme))
	}
}
