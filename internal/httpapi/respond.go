package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// An apiError is an error a client is meant to see: API.md's error table.
type apiError struct {
	status     int
	code       string
	detail     string
	retryAfter int // seconds; sent as Retry-After when > 0
	// mfaToken is mfa_required's second-step token, sent as mfa_token in
	// the body; never in Error(), so never in a log line.
	mfaToken string
	// limit names, for the audit line alone (limit=…), the throttle's
	// limits that refused a 429: throttle.Limits' names, or "code" for
	// the code lock; "" when unknown. Never in the reply.
	limit string
	// note is for the audit line alone (note=…): what an operator must
	// know of the refusal; never in the reply.
	note string
}

func (e *apiError) Error() string { return e.code + ": " + e.detail }

// Errors with fixed wording. Details never echo a token or a password.
var (
	errInvalidCredentials = &apiError{status: http.StatusUnauthorized, code: "invalid_credentials", detail: "Invalid username or password."}
	errNotAuthenticated   = &apiError{status: http.StatusUnauthorized, code: "not_authenticated", detail: "Authentication credentials were not provided."}
	errInvalidToken       = &apiError{status: http.StatusUnauthorized, code: "invalid_token", detail: "Invalid token."}
	errPermissionDenied   = &apiError{status: http.StatusForbidden, code: "permission_denied", detail: "You do not have permission to perform this action."}
	errNotFound           = &apiError{status: http.StatusNotFound, code: "not_found", detail: "Not found."}
	errTooLarge           = &apiError{status: http.StatusRequestEntityTooLarge, code: "request_too_large", detail: "Request body too large."}
	errUnsupportedMedia   = &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type", detail: "Content-Type must be application/json."}
	errUnavailable        = &apiError{status: http.StatusServiceUnavailable, code: "unavailable", detail: "Service temporarily unavailable; try again later.", retryAfter: 1}
	errInternal           = &apiError{status: http.StatusInternalServerError, code: "internal_error", detail: "Internal server error."}
	errMFAEnrolled        = &apiError{status: http.StatusConflict, code: "mfa_enrolled", detail: "An authenticator is already active; remove it first."}
	errInsufficientScope  = &apiError{status: http.StatusForbidden, code: "insufficient_scope", detail: "This token's scopes do not cover this endpoint."}
	errTokenNameTaken     = &apiError{status: http.StatusConflict, code: "conflict", detail: "A live personal access token of that name exists."}
	errTooManyTokens      = &apiError{status: http.StatusConflict, code: "conflict", detail: "Too many live personal access tokens; revoke one first."}
	errEnrollmentRequired = &apiError{status: http.StatusForbidden, code: "mfa_enrollment_required",
		detail: "A second factor is required: this token may only enrol one (GET /api/auth/mfa/, POST /api/auth/mfa/totp/ and its confirm/) or log out."}
)

// mfaRequired is the 401 mfa_required reply of a right password whose user
// has a second factor: token is the mfa_token of the second step.
func mfaRequired(token string) *apiError {
	return &apiError{status: http.StatusUnauthorized, code: "mfa_required", detail: "A second factor is required: send a code with the mfa_token.", mfaToken: token}
}

func invalidRequest(detail string) error {
	return &apiError{status: http.StatusBadRequest, code: "invalid_request", detail: detail}
}

func methodNotAllowed(allow string) error {
	return &apiError{status: http.StatusMethodNotAllowed, code: "method_not_allowed", detail: "Method not allowed; allowed: " + allow + "."}
}

// weakPasswordReply is the 400 weak_password reply for a refused new
// password; its detail names the rule, never the password.
func weakPasswordReply(err error) error {
	detail := "The new password does not meet the password policy."
	var weak *password.WeakError
	if errors.As(err, &weak) {
		detail = "The new password is refused: " + weak.Reason + "."
	}
	return &apiError{status: http.StatusBadRequest, code: "weak_password", detail: detail}
}

// errCodeLocked refuses a second step of a user whose code lock holds
// throttle.MaxCodeFailures wrong codes: 429 until user unlock, which the
// audit line says.
var errCodeLocked = &apiError{status: http.StatusTooManyRequests, code: "throttled",
	detail:     "Too many wrong second-factor codes; an administrator must unlock the account.",
	retryAfter: int(throttle.CodeLockRetryAfter / time.Second),
	limit:      "code",
	note:       "100 consecutive wrong second-factor codes; lifted only by authsvc user unlock"}

// throttled is the 429 of an attempt the throttle refused for retryAfter
// seconds; limits names the limits that refused it ("" when unknown), for
// the audit line.
func throttled(retryAfter int, limits string) *apiError {
	return &apiError{status: http.StatusTooManyRequests, code: "throttled", detail: "Too many failed login attempts; try again later.", retryAfter: retryAfter, limit: limits}
}

// errorBody is the JSON of every error reply.
type errorBody struct {
	Detail   string `json:"detail"`
	Code     string `json:"code"`
	MFAToken string `json:"mfa_token,omitempty"`
}

// setOr returns d if a policy sets it (positive), def otherwise: a
// policy's zero value means the default.
func setOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// errorKinds are the sentinel errors errorReply answers with a reply of
// their own, first match first, and the warning the log gets for each
// (none: the client's doing).
var errorKinds = []struct {
	err     error
	reply   *apiError
	warning string
}{
	{login.ErrInvalidCredentials, errInvalidCredentials, ""},
	{login.ErrInvalidToken, errInvalidToken, ""},
	{login.ErrCodeLocked, errCodeLocked, ""},
	{login.ErrEnrolmentRequired, errMintEnrollmentRequired, ""},
	{login.ErrUnavailable, errUnavailable, ""},
	{users.ErrAccessTokenName, errTokenNameTaken, ""},
	{users.ErrTooManyAccessTokens, errTooManyTokens, ""},
	{users.ErrBadResetLink, errBadResetLink, ""},
	{users.ErrAdminScope, errPermissionDenied, ""}, // demoted since the request was checked
	{users.ErrDisabled, errInvalidToken, ""},       // disabled since its token was checked: the token is dead
	{users.ErrNotFound, errNotFound, ""},
	{users.ErrExists, errUserExists, ""},
	// The password the login checked has been changed since (on an
	// instance that has not seen the change yet): it is no longer the
	// user's.
	{tokens.ErrSuperseded, errInvalidCredentials, ""},
	{users.ErrUnavailable, errUnavailable, "user directory unavailable"},
	{tokens.ErrUnavailable, errUnavailable, "token store unavailable"},
	{throttle.ErrUnavailable, errUnavailable, "login throttle unavailable"},
	{login.ErrSecretKey, errUnavailable, "secret key cannot open a second factor"},
}

// errorReply returns the reply err gets, and what the log says of it: an
// apiError as itself (nothing to log), a refusal of internal/login as its
// API code, a dependency out of reach as 503 with a warning naming it,
// anything else as 500, an internal error. The one map from errors to
// statuses: the audit line's outcome reads it too.
func errorReply(err error) (e *apiError, warning string) {
	var throttledErr *login.ThrottledError
	var secondFactor *login.SecondFactorError
	switch {
	case errors.As(err, &e):
		return e, ""
	case errors.As(err, &throttledErr):
		return throttled(int(throttledErr.RetryAfter/time.Second), throttledErr.Limits), ""
	case errors.As(err, &secondFactor) && secondFactor.Token == "":
		return errCodeMissing, "" // the code goes beside the password
	case errors.As(err, &secondFactor):
		return mfaRequired(secondFactor.Token), ""
	case errors.Is(err, users.ErrInvalid):
		// The rule a username or profile field broke; it names the
		// field (as the CLI's flag), never a password.
		detail, _ := strings.CutPrefix(err.Error(), users.ErrInvalid.Error()+": ")
		return &apiError{status: http.StatusBadRequest, code: "invalid_request", detail: strings.TrimPrefix(detail, "--") + "."}, ""
	}
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.reply, k.warning
		}
	}
	return errInternal, "internal error"
}

// writeError writes err's reply (errorReply), logging what is not the
// client's doing; the log shows nobody the error's text but the operator.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	e, warning := errorReply(err)
	switch {
	case e == errInternal:
		log.ErrorContext(r.Context(), warning, "method", r.Method, "path", r.URL.Path, "err", err, "request_id", requestID(w))
	case warning != "":
		log.WarnContext(r.Context(), warning, "method", r.Method, "path", r.URL.Path, "err", err, "request_id", requestID(w))
	}
	if rec, ok := w.(interface{ setErrorCode(string) }); ok {
		rec.setErrorCode(e.code)
	}
	h := w.Header()
	if e.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Token realm="api"`)
	}
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	h.Set("Cache-Control", "no-store")
	encode(w, e.status, errorBody{Detail: e.detail, Code: e.code, MFAToken: e.mfaToken})
}

// writeEmpty writes err's reply (writeError), or 204 No Content when err
// is nil: the end of a handler whose success has no body.
func writeEmpty(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if err != nil {
		writeError(w, r, log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// encode writes v as the JSON reply with status. "&", "<" and ">" stay as
// they are: a reply is JSON, never HTML, and an otpauth:// URL must read
// as one when a person copies it.
func encode(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // with its newline
		// Only reply types reach here, and they always marshal.
		panic("encode: " + err.Error())
	}
	writeJSON(w, status, b.Bytes())
}

// writeJSON writes an already encoded JSON reply; net/http adds its
// Content-Length.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = []string{"application/json"}
	w.WriteHeader(status)
	w.Write(body)
}

// maxJSONBody bounds a request's JSON body (API.md: 16 KiB).
const maxJSONBody = 16 << 10

// readJSONBody checks that a request's body is JSON (415 otherwise) and
// reads it within maxJSONBody (413): the first step of every endpoint that
// takes a JSON body, the login and the admin API's alike.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" {
		return nil, errUnsupportedMedia
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, errTooLarge
	case err != nil:
		return nil, invalidRequest("Could not read the request body.")
	}
	return body, nil
}
