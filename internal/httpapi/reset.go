package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/users"
)

// ResetPolicy says how password reset links work (API.md, "Password
// reset").
type ResetPolicy struct {
	// Floor is the least time a confirm's answer takes once its body is
	// read, whatever the link: well above a hash and a write of the user,
	// so that a good link and a wrong one answer alike. 0: DefaultResetFloor.
	Floor time.Duration
	// URL is --reset-url, the pattern of the links the admin API makes
	// ({uid} and {token}); "": the parts alone, "{uid}/{token}".
	URL string
	// TTL is --reset-ttl, how long those links work; 0: users.DefaultResetTTL.
	TTL time.Duration
}

// url returns the pattern of the links the admin API makes.
func (p ResetPolicy) url() string {
	if p.URL != "" {
		return p.URL
	}
	return "{uid}/{token}"
}

// ttl returns how long the links the admin API makes work.
func (p ResetPolicy) ttl() time.Duration { return setOr(p.TTL, users.DefaultResetTTL) }

// DefaultResetFloor is a confirm's least time unless told otherwise.
const DefaultResetFloor = 250 * time.Millisecond

// floor returns the least time of a confirm's answer.
func (p ResetPolicy) floor() time.Duration { return setOr(p.Floor, DefaultResetFloor) }

// resetConfirmRequest is the body of POST /api/auth/password/reset/confirm/
// (djoser's shape).
type resetConfirmRequest struct {
	UID         string `json:"uid"`
	Token       string `json:"token"`
	NewPassword string `json:"new_password"`
}

// errBadResetLink is the reply to a link that is not a user's live one.
var errBadResetLink = &apiError{status: http.StatusBadRequest, code: "invalid_token", detail: "Invalid or expired reset link."}

// resetThrottleKey is the throttle's key for the confirms of username's
// links: apart from the user's logins, so that wrong links sent for a
// user lock out neither the user's logins nor, per user, anyone else's
// resets; the per-client limit counts them with failed logins.
func resetThrottleKey(username string) string { return "\x00reset " + username }

// handleResetConfirm sets a new password with a reset link, in API.md's
// order: the body (415, 413, 400), the throttle per client (429), the
// policy (400 weak_password: the link is not spent), then the link (400
// invalid_token for a wrong, used, expired or superseded one). The new
// password is hashed for every link that gets so far, good or not, with a
// hasher slot (503 when there is none), and every answer from then on is
// held to the policy's floor: the time tells nothing of the link. A good
// link ends every session and personal access token of the user, here,
// through the token store on every instance sharing it, and through the
// directory everywhere; it lifts the user's lockouts and keeps second
// factors.
func handleResetConfirm(log *slog.Logger, tc tokenCheck, gt gate, setter PasswordSetter, policy ResetPolicy) http.Handler {
	const event = "password reset confirm"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := readJSONBody(w, r)
		var req resetConfirmRequest
		if err == nil {
			err = decodeResetConfirm(body, &req)
		}
		username := ""
		if err == nil {
			// A uid that is no username is a link of no user: the same
			// answer, in the same time, as a wrong token.
			username, _ = users.ParseResetUID(req.UID)
		}
		if err != nil {
			gt.audit(r.Context(), gt.client(w, r), event, "", err)
			writeError(w, r, log, err)
			return
		}
		a := gt.attempt(w, r, username)
		if err = a.Reserve(resetThrottleKey(username)); err == nil {
			start := time.Now()
			err = confirmReset(r.Context(), tc, gt.guard(), setter, username, req)
			users.HoldUntil(policy.floor(), time.Since(start))
			a.Settle(resetOutcome(err))
		}
		if err == nil {
			tc.notifyUser(r.Context(), log, username)
		}
		gt.auditAttempt(r.Context(), gt.client(w, r), event, username, err)
		writeEmpty(w, r, log, err)
	})
}

// decodeResetConfirm parses a confirm body: the three fields present, the
// password within its limit; 400 otherwise, never quoting the body.
func decodeResetConfirm(body []byte, req *resetConfirmRequest) error {
	if err := decodeObject(body, req); err != nil {
		return err
	}
	fields := []bodyField{{"uid", req.UID}, {"token", req.Token}, {"new_password", req.NewPassword}}
	if err := missingField(fields...); err != nil {
		return err
	}
	if len(req.UID) > 1024 || len(req.Token) > 1024 {
		return invalidRequest("uid or token is too long.")
	}
	return passwordTooLong(fields[2])
}

// confirmReset checks the new password against the policy, hashes it
// with a hasher slot, and sets it if req's link is username's live one;
// then it tells the token store the user's new stamp, which removes the
// user's sessions on every instance sharing it.
func confirmReset(ctx context.Context, tc tokenCheck, guard *login.Guard, setter PasswordSetter, username string, req resetConfirmRequest) error {
	if err := setter.Policy.Check(username, req.NewPassword); err != nil {
		return weakPasswordReply(err)
	}
	release, err := guard.Admission.Acquire(ctx)
	if err != nil {
		return errUnavailable
	}
	hash, err := setter.Hash(req.NewPassword)
	release()
	if err != nil {
		return weakPasswordReply(err) // bcrypt's 72 bytes: the only way hashing fails
	}
	now := tc.now()
	if err := users.ConfirmReset(ctx, tc.users, username, req.Token, hash, now); err != nil {
		return err
	}
	if u, err := tc.users.Lookup(ctx, username); err == nil {
		n, err := tc.store.Supersede(ctx, tc.policy.Supersession(username, u.SessionGeneration(), u.TokensAfter(), now))
		if err != nil {
			guard.Log.WarnContext(ctx, "password reset; the user's old sessions stay in the store until they expire (the cut-off refuses them)", "username", username, "err", err)
		}
		tc.metrics.Revoked(RevokedUserChange, n)
	}
	return nil
}

// resetOutcome is how a confirm that got a place in the throttle ended,
// for the throttle: a bad link is a failure of the client's, a good one a
// success, anything else (a weak password, no slot) neither.
func resetOutcome(err error) login.Outcome {
	switch {
	case err == nil:
		return login.Succeeded
	case errors.Is(err, users.ErrBadResetLink):
		return login.Failed
	}
	return login.Neither
}
