package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
)

// TestWriteErrorLogin: each error of internal/login gets its status, API
// code, Retry-After and mfa_token, wrapped or not, and no other header
// or field.
func TestWriteErrorLogin(t *testing.T) {
	codeLockRetry := strconv.Itoa(int(throttle.CodeLockRetryAfter / time.Second))
	for _, tt := range []struct {
		err        error
		status     int
		code       string
		retryAfter string // "" for none
		mfaToken   string
	}{
		{err: login.ErrInvalidCredentials, status: http.StatusUnauthorized, code: "invalid_credentials"},
		{err: tokens.ErrSuperseded, status: http.StatusUnauthorized, code: "invalid_credentials"},
		{err: login.ErrInvalidToken, status: http.StatusUnauthorized, code: "invalid_token"},
		{err: &login.ThrottledError{RetryAfter: 7 * time.Second, Limits: "pair"}, status: http.StatusTooManyRequests, code: "throttled", retryAfter: "7"},
		{err: login.ErrCodeLocked, status: http.StatusTooManyRequests, code: "throttled", retryAfter: codeLockRetry},
		{err: &login.SecondFactorError{Token: "mfa-token-1", Methods: []string{login.MethodCode}}, status: http.StatusUnauthorized, code: "mfa_required", mfaToken: "mfa-token-1"},
		{err: &login.SecondFactorError{Methods: []string{login.MethodCode}}, status: http.StatusUnauthorized, code: "mfa_required"},
		{err: login.ErrEnrolmentRequired, status: http.StatusForbidden, code: "mfa_enrollment_required"},
		{err: login.ErrUnavailable, status: http.StatusServiceUnavailable, code: "unavailable", retryAfter: "1"},
		{err: login.ErrSecretKey, status: http.StatusServiceUnavailable, code: "unavailable", retryAfter: "1"},
		{err: errors.New("something else"), status: http.StatusInternalServerError, code: "internal_error"},
	} {
		for _, err := range []error{tt.err, fmt.Errorf("wrapped: %w", tt.err)} {
			w := httptest.NewRecorder()
			writeError(w, httptest.NewRequest("POST", "/api/auth/login/", nil), slog.New(slog.DiscardHandler), err)
			var body map[string]string
			if jerr := json.Unmarshal(w.Body.Bytes(), &body); jerr != nil {
				t.Fatalf("writeError(%v) body %q: %v", err, w.Body, jerr)
			}
			if w.Code != tt.status || body["code"] != tt.code {
				t.Errorf("writeError(%v) = %d %s; want %d %s", err, w.Code, body["code"], tt.status, tt.code)
			}
			if got := w.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("writeError(%v): Retry-After = %q; want %q", err, got, tt.retryAfter)
			}
			if body["mfa_token"] != tt.mfaToken {
				t.Errorf("writeError(%v): mfa_token = %q; want %q", err, body["mfa_token"], tt.mfaToken)
			}
			if got, want := w.Header().Get("WWW-Authenticate") != "", tt.status == http.StatusUnauthorized; got != want {
				t.Errorf("writeError(%v): WWW-Authenticate set = %v; want %v", err, got, want)
			}
		}
	}
}

// TestAuditLimitNotInReply: a refusal's audit line names the limits that
// refused it, which its reply never shows.
func TestAuditLimitNotInReply(t *testing.T) {
	e, _ := errorReply(&login.ThrottledError{RetryAfter: time.Second, Limits: "pair user"})
	if e.limit != "pair user" {
		t.Errorf("errorReply(ThrottledError of pair user).limit = %q; want %q", e.limit, "pair user")
	}
	w := httptest.NewRecorder()
	writeError(w, httptest.NewRequest("POST", "/", nil), slog.New(slog.DiscardHandler), &login.ThrottledError{RetryAfter: time.Second, Limits: "pair user"})
	var body map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || len(body) != 2 {
		t.Errorf("throttled reply = %s, %v; want detail and code alone", w.Body, err)
	}
}
