package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

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
)

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

func throttled(retryAfter int) error {
	return &apiError{status: http.StatusTooManyRequests, code: "throttled", detail: "Too many failed login attempts; try again later.", retryAfter: retryAfter}
}

// errorBody is the JSON of every error reply.
type errorBody struct {
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// writeError maps err to its reply: an apiError as itself, an unreachable
// store as 503, anything else as 500 — logged here, and shown to nobody.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var e *apiError
	switch {
	case errors.As(err, &e):
	case errors.Is(err, users.ErrNotFound):
		e = errNotFound
	case errors.Is(err, users.ErrUnavailable):
		log.WarnContext(r.Context(), "user directory unavailable", "method", r.Method, "path", r.URL.Path, "err", err, "request_id", requestID(w))
		e = errUnavailable
	case errors.Is(err, tokens.ErrUnavailable):
		log.WarnContext(r.Context(), "token store unavailable", "method", r.Method, "path", r.URL.Path, "err", err, "request_id", requestID(w))
		e = errUnavailable
	case errors.Is(err, throttle.ErrUnavailable):
		log.WarnContext(r.Context(), "login throttle unavailable", "method", r.Method, "path", r.URL.Path, "err", err, "request_id", requestID(w))
		e = errUnavailable
	default:
		log.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "err", err, "request_id", requestID(w))
		e = errInternal
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
	encode(w, e.status, errorBody{Detail: e.detail, Code: e.code})
}

// encode writes v as the JSON reply with status.
func encode(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		// Only reply types reach here, and they always marshal.
		panic("encode: " + err.Error())
	}
	writeJSON(w, status, append(data, '\n'))
}

// writeJSON writes an already encoded JSON reply; net/http adds its
// Content-Length.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = []string{"application/json"}
	w.WriteHeader(status)
	w.Write(body)
}
