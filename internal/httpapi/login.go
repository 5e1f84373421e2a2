package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"time"
	"unicode/utf8"

	"authsvc/internal/login"
	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/users"
)

// A gate is what every handler that checks a password or a code shares:
// the ways to log in (internal/login), whose guard makes each attempt, and
// the audit line each such request gets.
type gate struct {
	logins  *login.Logins
	trusted []netip.Prefix // proxies whose X-Forwarded-For is believed
}

// guard returns the guard that makes the gate's attempts.
func (gt gate) guard() *login.Guard { return gt.logins.Guard }

// client returns who sends r, as an attempt and its session name them.
func (gt gate) client(w http.ResponseWriter, r *http.Request) login.Client {
	return login.Client{Key: throttle.ClientKey(ClientIP(r, gt.trusted)), RequestID: requestID(w), UserAgent: r.UserAgent()}
}

// attempt starts a check of username's password or code by r's client.
func (gt gate) attempt(w http.ResponseWriter, r *http.Request, username string) *login.Attempt {
	return gt.guard().Attempt(r.Context(), gt.client(w, r), gt.logins.Users, username)
}

// auditAttempt writes the audit line of an attempt of username by c to
// event that ends with err: one line per attempt. A username that names no
// user is not logged: people type passwords into username fields.
func (gt gate) auditAttempt(ctx context.Context, c login.Client, event, username string, err error, attrs ...slog.Attr) {
	if _, lookupErr := gt.logins.Users.Lookup(ctx, username); lookupErr != nil {
		username = ""
	}
	gt.audit(ctx, c, event, username, err, attrs...)
}

// audit writes the audit line of a request by c to event that ends with
// err, so that every request to the endpoints that check a password or a
// code has one: refused before any check (400, 413, 415, a capacity 503, a
// dead token), or, with a nil err, one that checks none (GET
// /api/auth/mfa/). username is "" when the request names no user it can be
// trusted with: a login's username is not logged before it is known to
// name a user. The limits that refused a 429, and an operator's note, are
// the audit line's alone.
func (gt gate) audit(ctx context.Context, c login.Client, event, username string, err error, attrs ...slog.Attr) {
	if username == "" {
		username = "(unknown)"
	}
	line := []slog.Attr{slog.String("outcome", outcomeName(err)), slog.String("username", username),
		slog.String("client", c.Key), slog.String("request_id", c.RequestID)}
	if err != nil {
		e, _ := errorReply(err)
		line = appendNonEmpty(appendNonEmpty(line, "limit", e.limit), "note", e.note)
	}
	gt.guard().Log.LogAttrs(ctx, slog.LevelInfo, event, append(line, attrs...)...)
}

// appendNonEmpty appends the attribute key=value to attrs unless value is "".
func appendNonEmpty(attrs []slog.Attr, key, value string) []slog.Attr {
	if value == "" {
		return attrs
	}
	return append(attrs, slog.String(key, value))
}

// outcomeName is the audit line's name for a request that ends with err:
// "success", or the code of the error reply it gets.
func outcomeName(err error) string {
	if err == nil {
		return "success"
	}
	e, _ := errorReply(err)
	return e.code
}

// LoginRequest is the login body. OTP is a one-step client's
// second-factor code, sent beside the password; "" when none.
type LoginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
	OTP      string `json:"otp"`
}

// LoginReply is the 200 login body; ExpiresAt is null for tokens that never expire.
type LoginReply struct {
	Token     string     `json:"token"`
	ExpiresAt *time.Time `json:"expires_at"`
	User      users.Info `json:"user"`
	// MFAEnrollmentRequired: the token may only enrol a second factor,
	// which --require-mfa requires of the user (tokens.Session.Enrolment).
	MFAEnrollmentRequired bool `json:"mfa_enrollment_required,omitempty"`
}

// decodeLogin parses a login body: one JSON object, with username and
// password non-empty strings within API.md's limits. Its errors never quote
// the body, which holds a password.
func decodeLogin(body []byte) (LoginRequest, error) {
	var req LoginRequest
	if err := decodeObject(body, &req); err != nil {
		return LoginRequest{}, err
	}
	if err := missingField(bodyField{"username", req.Username}, bodyField{"password", req.Password}); err != nil {
		return LoginRequest{}, err
	}
	switch {
	case utf8.RuneCountInString(req.Username) > users.MaxUsernameLen:
		return LoginRequest{}, invalidRequest("username is longer than 150 characters.")
	case len(req.Password) > password.MaxLen:
		return LoginRequest{}, invalidRequest("password is longer than 1024 bytes.")
	case len(req.OTP) > maxCodeLen:
		return LoginRequest{}, invalidRequest("otp is too long.")
	}
	// API.md: every request's username is matched, and throttled, in its NFKC form.
	req.Username = users.NormalizeUsername(req.Username)
	return req, nil
}

// A bodyField is a string field of a request body, by its JSON name.
type bodyField struct{ name, value string }

// missingField returns 400 invalid_request naming the first of fields
// that is empty, or nil.
func missingField(fields ...bodyField) error {
	for _, f := range fields {
		if f.value == "" {
			return invalidRequest(f.name + " is required.")
		}
	}
	return nil
}

// passwordTooLong returns 400 invalid_request naming the first of fields
// longer than a password may be (password.MaxLen bytes), or nil.
func passwordTooLong(fields ...bodyField) error {
	for _, f := range fields {
		if len(f.value) > password.MaxLen {
			return invalidRequest(f.name + " is longer than 1024 bytes.")
		}
	}
	return nil
}

// handleLogin exchanges a username and password for a new token, in
// API.md's order of checks: the media type (415) and the size (413), the
// capacity (503), the body (400), then the login itself (internal/login:
// 429, 503, 401, 401 mfa_required).
func handleLogin(log *slog.Logger, gt gate) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body is read even at capacity: net/http would close a
		// connection that left it.
		c := gt.client(w, r)
		body, err := readJSONBody(w, r)
		if err == nil && gt.guard().AtCapacity(r.Context()) {
			err = errUnavailable // before decoding: the cheapest refusal
		}
		var req LoginRequest
		if err == nil {
			req, err = decodeLogin(body)
		}
		if err != nil {
			gt.audit(r.Context(), c, "login", "", err)
			writeError(w, r, log, err)
			return
		}
		g, err := gt.logins.Password(r.Context(), c, req.Username, req.Password, req.OTP)
		gt.auditAttempt(r.Context(), c, "login", req.Username, err)
		writeGrant(w, r, log, g, err)
	})
}

// writeGrant writes the login reply of g, or err's.
func writeGrant(w http.ResponseWriter, r *http.Request, log *slog.Logger, g login.Grant, err error) {
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	reply := LoginReply{Token: g.Token, ExpiresAt: g.ExpiresAt, User: g.Account.Info(), MFAEnrollmentRequired: g.Enrolment}
	w.Header().Set("Cache-Control", "no-store")
	encode(w, http.StatusOK, reply)
}
