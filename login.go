package main

import (
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
	throttle  *throttle
	admission *admission
	hasher    *hasherPool    // nil: compare on the caller's goroutine
	tarpit    *tarpit        // nil: refusals are immediate
	trusted   []netip.Prefix // proxies whose X-Forwarded-For is believed
	log       *slog.Logger   // for the audit lines
	now       func() time.Time
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
	return &loginAttempt{g: g, w: w, r: r, users: users, username: username, client: clientKey(clientIP(r, g.trusted)), event: "login"}
}

// verify checks password in three steps: admit (a place in the throttle,
// reserved before the compare, then a hasher slot: 429 or 503, held in the
// tarpit), the verdict (the password,
// against a dummy hash for unknown and disabled users: 401 for all three),
// and record (the verdict in the throttle). It returns the user on success.
func (a *loginAttempt) verify(password string) (*dirUser, error) {
	g, ctx := a.g, a.r.Context()
	if wait, ok := g.throttle.reserve(a.username, a.client, g.now()); !ok {
		g.tarpit.hold(ctx)
		return nil, throttled(int(wait / time.Second))
	}
	release, err := g.admission.acquire(ctx)
	if err != nil {
		g.throttle.release(a.username, a.client)
		g.tarpit.hold(ctx)
		return nil, errUnavailable
	}
	u, ok := authenticate(ctx, a.users, a.username, password, g.hasher.verify)
	release()
	if !ok {
		g.throttle.failure(a.username, a.client, g.now())
		return nil, errInvalidCredentials
	}
	g.throttle.success(a.username, a.client, g.now())
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
	case errors.Is(err, errStoreUnavailable):
		return errUnavailable.code
	}
	return errInternal.code
}
