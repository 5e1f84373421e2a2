package httpapi

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/users"
)

// A ResetRequester mails reset links: POST /api/auth/password/reset/
// hands it each request, which it serves outside the request (finding
// the users, making their links, sending the mail), so that the reply
// says nothing of who exists. Nil: the route answers 404, as API.md has
// it without --smtp-url.
type ResetRequester interface {
	// RequestReset asks for a link to every enabled user with an email
	// address whom by ("email" or "username") and value name. It never
	// blocks, and never reports whether anyone was found.
	RequestReset(by, value, requestID string)
}

// resetRequest is the body of POST /api/auth/password/reset/ (djoser's
// shape, or a username).
type resetRequest struct {
	Email    string `json:"email"`
	Username string `json:"username"`
}

// resetRequestKey is the throttle's key for requests naming value: each
// address or name apart, so that requests for one lock out neither its
// logins nor anyone else's requests; the per-client limit counts them
// with failed logins.
func resetRequestKey(value string) string { return "\x00reset request " + strings.ToLower(value) }

// handleResetRequest asks for a reset link by email: the body (415, 413,
// 400), the throttle per client and per address (429), then 204, always,
// held to the reset policy's floor: whether the user exists, is disabled
// or has no address, the answer and its time are the same. Every request
// counts against the client, as a failed login does.
func handleResetRequest(log *slog.Logger, tc tokenCheck, gt gate, requester ResetRequester, policy ResetPolicy) http.Handler {
	const event = "password reset request"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		body, err := readJSONBody(w, r)
		var req resetRequest
		if err == nil {
			err = decodeResetRequest(body, &req)
		}
		if err != nil {
			gt.audit(r.Context(), gt.client(w, r), event, "", err)
			writeError(w, r, log, err)
			return
		}
		by, value := "email", req.Email
		if value == "" {
			by, value = "username", req.Username
		}
		a := gt.attempt(w, r, "")
		if err = a.Reserve(resetRequestKey(value)); err == nil {
			a.Settle(login.Failed)
			requester.RequestReset(by, value, requestID(w))
			users.HoldUntil(policy.floor(), time.Since(start))
		}
		// Never the address or name asked for: it may be no one's, and
		// people type passwords into such fields; and "accepted", never
		// whether anyone was found.
		if err == nil {
			gt.guard().Log.LogAttrs(r.Context(), slog.LevelInfo, event, slog.String("outcome", "accepted"),
				slog.String("client", gt.client(w, r).Key), slog.String("request_id", requestID(w)))
		} else {
			gt.audit(r.Context(), gt.client(w, r), event, "", err)
		}
		writeEmpty(w, r, log, err)
	})
}

// decodeResetRequest parses a request body: one JSON object with email or
// username, a non-empty string within the username limits; 400 otherwise.
func decodeResetRequest(body []byte, req *resetRequest) error {
	if err := decodeObject(body, req); err != nil {
		return err
	}
	switch {
	case req.Email == "" && req.Username == "":
		return invalidRequest("email or username is required.")
	case req.Email != "" && req.Username != "":
		return invalidRequest("Give email or username, not both.")
	case len(req.Email) > 254 || len(req.Username) > 4*users.MaxUsernameLen:
		return invalidRequest("email or username is too long.")
	}
	return nil
}
