package httpapi

import (
	"authsvc/internal/password"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// maxLoginBody bounds the login request body (API.md: 16 KiB).
const maxLoginBody = 16 << 10

// tokenPolicy says how long tokens live and how many a user may hold.
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

// loginRequest is the login body.
type LoginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// loginReply is the 200 login body; ExpiresAt is null for tokens that never expire.
type LoginReply struct {
	Token     string     `json:"token"`
	ExpiresAt *time.Time `json:"expires_at"`
	User      users.Info `json:"user"`
}

// decodeLogin parses a login body: one JSON object, with username and
// password non-empty strings within API.md's limits. Its errors never quote
// the body, which holds a password.
func decodeLogin(body []byte) (LoginRequest, error) {
	var req LoginRequest
	if err := decodeObject(body, &req); err != nil {
		return LoginRequest{}, err
	}
	switch {
	case req.Username == "":
		return LoginRequest{}, invalidRequest("username is required.")
	case req.Password == "":
		return LoginRequest{}, invalidRequest("password is required.")
	case utf8.RuneCountInString(req.Username) > users.MaxUsernameLen:
		return LoginRequest{}, invalidRequest("username is longer than 150 characters.")
	case len(req.Password) > password.MaxLen:
		return LoginRequest{}, invalidRequest("password is longer than 1024 bytes.")
	}
	// API.md: every request's username is matched, and throttled, in its NFKC form.
	req.Username = users.NormalizeUsername(req.Username)
	return req, nil
}

// decodeObject decodes a JSON request body into the struct v points to,
// as invalid_request errors that name the field at fault and never quote
// the body (it holds passwords).
func decodeObject(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return invalidRequest(typeErr.Field + " must be a string.")
	case errors.As(err, &typeErr):
		return invalidRequest("Body must be a JSON object.")
	}
	return invalidRequest("Body is not valid JSON.")
}

// readLoginBody checks the media type and reads the body within its limit.
func readLoginBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return nil, errUnsupportedMedia
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLoginBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, errTooLarge
	case err != nil:
		return nil, invalidRequest("Could not read the request body.")
	}
	return body, nil
}

// handleLogin exchanges a username and password for a new token, in
// API.md's order of checks.
func handleLogin(log *slog.Logger, users users.Directory, store tokens.Store, policy TokenPolicy, guard *LoginGuard, now func() time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The media type (415) and size (413). The body is read even at
		// capacity: net/http would close a connection that left it.
		body, err := readLoginBody(w, r)
		if err == nil && guard.atCapacity(r.Context()) {
			err = errUnavailable // before decoding, and with no audit line: no credentials were read
		}
		// The body's shape and field limits (400).
		var req LoginRequest
		if err == nil {
			req, err = decodeLogin(body)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		// The throttle (429), a hasher slot (503), the password (401).
		attempt := guard.attempt(w, r, users, req.Username)
		u, err := attempt.verify(req.Password)
		if err == nil {
			guard.Rehash(r.Context(), users, u, req.Password)
		}
		// A new token (503 when the store cannot keep it).
		var reply LoginReply
		if err == nil {
			reply, err = issueToken(r.Context(), store, policy, guard.Metrics, u, now(), attempt.client, r.UserAgent())
		}
		attempt.audit(err)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		encode(w, http.StatusOK, reply)
	})
}

// issueToken stores a new session of u, logged in from client with
// userAgent, and returns the login reply with its token.
func issueToken(ctx context.Context, store tokens.Store, policy TokenPolicy, m *Metrics, u *users.Account, now time.Time, client, userAgent string) (LoginReply, error) {
	token, digest := tokens.New()
	sess := tokens.Session{Username: u.Username(), Stamp: u.Stamp(), ID: tokens.NewSessionID(), Client: client, UserAgent: CutUTF8(userAgent, MaxUserAgent)}
	reply := LoginReply{Token: token, User: u.Info()}
	if policy.TTL > 0 {
		expires := now.Add(policy.TTL).Truncate(time.Second).UTC()
		sess.ExpiresAt = expires
		reply.ExpiresAt = &expires
	}
	evicted, err := store.Issue(ctx, digest, sess, policy.MaxPerUser, now)
	if err != nil {
		return LoginReply{}, err
	}
	m.Revoked(revokedEviction, evicted)
	return reply, nil
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
	digest, err := tokens.ParseAuthorization(r.Header)
	switch {
	case errors.Is(err, tokens.ErrNoCredentials):
		return principal{}, errNotAuthenticated
	case err != nil:
		return principal{}, errInvalidToken
	}
	now := c.now()
	sess, err := c.store.Lookup(r.Context(), digest, now)
	switch {
	case errors.Is(err, tokens.ErrNotFound):
		return principal{}, errInvalidToken
	case err != nil:
		return principal{}, err
	}
	if c.policy.idleExpired(sess, now) {
		c.store.Revoke(r.Context(), digest) // dead stays dead
		c.metrics.Revoked(revokedIdle, 1)
		return principal{}, errInvalidToken
	}
	u, err := users.SessionUser(r.Context(), c.users, sess.Username, sess.IssuedAt)
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

// handleInfo answers with the token's user, or, for admins, any user.
func handleInfo(log *slog.Logger, tc tokenCheck) http.Handler {
	// Header values shared by every reply (net/http never writes into them):
	// the hot path allocates no header.
	noStore, varyAuth, contentType := []string{"no-store"}, []string{"Authorization"}, []string{"application/json"}
	// Reply buffers, reused: Write copies the body into the connection's buffer.
	bodies := sync.Pool{New: func() any { return new([]byte) }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := tc.authenticate(r)
		var target *users.Account
		if err == nil {
			target, err = tc.target(r, p)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		h := w.Header()
		h["Cache-Control"] = noStore
		if _, ok := h["Vary"]; ok {
			h.Add("Vary", "Authorization") // after CORS's Origin
		} else {
			h["Vary"] = varyAuth
		}
		h["Content-Type"] = contentType
		buf := bodies.Get().(*[]byte)
		body, length := target.InfoReply(*buf)
		h["Content-Length"] = length
		w.WriteHeader(http.StatusOK)
		w.Write(body)
		*buf = body
		bodies.Put(buf)
	})
}

// usernameParam returns the value of the query's username parameter, ""
// when absent, and invalid_request when it is repeated or badly escaped.
func usernameParam(rawQuery string) (string, error) {
	var value string
	found := false
	for rawQuery != "" {
		var part string
		part, rawQuery, _ = strings.Cut(rawQuery, "&")
		key, val, _ := strings.Cut(part, "=")
		if key != "username" {
			if k, err := url.QueryUnescape(key); err != nil || k != "username" {
				continue
			}
		}
		if found {
			return "", invalidRequest("username is repeated.")
		}
		found = true
		if strings.ContainsAny(val, "%+") {
			v, err := url.QueryUnescape(val)
			if err != nil {
				return "", invalidRequest("username is badly escaped.")
			}
			val = v
		}
		value = val
	}
	return value, nil
}

// handleLogout revokes the presented token.
func handleLogout(log *slog.Logger, tc tokenCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := tc.authenticate(r)
		if err == nil {
			err = tc.store.Revoke(r.Context(), p.digest)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		tc.metrics.Revoked(revokedLogout, 1)
		w.WriteHeader(http.StatusNoContent)
	})
}

// handleLogoutAll revokes every token of the presented token's user.
func handleLogoutAll(log *slog.Logger, tc tokenCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := tc.authenticate(r)
		n := 0
		if err == nil {
			n, err = tc.store.RevokeUser(r.Context(), p.session.Username)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		tc.metrics.Revoked(revokedLogoutAll, n)
		w.WriteHeader(http.StatusNoContent)
	})
}

// statusReply is the body of /healthz and /readyz.
type statusReply struct {
	Status string `json:"status"`
}

// handleHealthz reports that the process serves HTTP.
func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		encode(w, http.StatusOK, statusReply{Status: "ok"})
	})
}

// handleReadyz reports whether the store, and a remote user directory, answer. Users are always loaded:
// serve does not listen before the users file loads, and a reload that fails
// keeps the previous users.
func handleReadyz(log *slog.Logger, store tokens.Store, users users.Directory) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := store.Ping(r.Context())
		if p, ok := users.(interface{ Ping(context.Context) error }); ok && err == nil {
			err = p.Ping(r.Context()) // a directory that can be unreachable: PostgreSQL
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		encode(w, http.StatusOK, statusReply{Status: "ready"})
	})
}

// handleNotFound answers every path no route claims.
func handleNotFound(log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, log, errNotFound)
	})
}
