package httpapi

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/password"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// PasswordRequest is the body of POST /api/auth/password/.
type PasswordRequest struct {
	CurrentPassword string `json:"current_password"`
	NewPassword     string `json:"new_password"`
}

// decodePasswordChange parses a password-change body: one JSON object with
// both fields non-empty strings of at most 1024 bytes. Its errors never
// quote the body, which holds two passwords.
func decodePasswordChange(body []byte) (PasswordRequest, error) {
	var req PasswordRequest
	if err := decodeObject(body, &req); err != nil {
		return PasswordRequest{}, err
	}
	fields := []bodyField{{"current_password", req.CurrentPassword}, {"new_password", req.NewPassword}}
	if err := missingField(fields...); err != nil {
		return PasswordRequest{}, err
	}
	if err := passwordTooLong(fields...); err != nil {
		return PasswordRequest{}, err
	}
	return req, nil
}

// A PasswordSetter makes the hash of a new password: the policy that
// decides whether it may be set, and the hash policy that hashes it.
type PasswordSetter struct {
	Policy password.Policy
	Hash   func(password string) (string, error)
}

// handlePassword changes the token's user's own password, in API.md's
// order of checks. The current password goes through the login pipeline
// (throttle, hasher slot, audit); on success every earlier token of the
// user dies, on this instance, in the shared store and, through the cut-off
// written with the new hash, wherever the directory is read, and the
// shared store refuses every later login on the old password, whichever
// instance checked it; the reply carries a new token.
func handlePassword(log *slog.Logger, tc tokenCheck, gt gate, setter PasswordSetter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The token (401), the media type (415), the size (413), the shape (400).
		p, err := tc.authenticate(r)
		var body []byte
		if err == nil {
			body, err = readJSONBody(w, r)
		}
		var req PasswordRequest
		if err == nil {
			req, err = decodePasswordChange(body)
		}
		if err != nil {
			username := ""
			if p.user != nil {
				username = p.user.Username() // the token's: known to name a user
			}
			gt.audit(r.Context(), gt.client(w, r), "password change", username, err)
			writeError(w, r, log, err)
			return
		}
		// The throttle (429), a hasher slot (503), the current password (401).
		username := p.user.Username()
		attempt := gt.attempt(w, r, username)
		u, err := attempt.Verify(req.CurrentPassword)
		// The policy (400 weak_password), then the new hash, written under the lock.
		var stamp uint64
		if err == nil {
			u, stamp, err = changePassword(log, r, tc, setter, u, req.NewPassword)
		}
		var g login.Grant
		if err == nil {
			g, err = gt.logins.Issue(attempt, u, stamp)
			if errors.Is(err, tokens.ErrSuperseded) {
				// The change has just told the store this stamp; only a
				// later change can have moved it on since. The password
				// did change: never 401, as if current_password were wrong.
				err = errUnavailable
			}
		}
		gt.auditAttempt(r.Context(), gt.client(w, r), "password change", username, err)
		writeGrant(w, r, log, g, err)
	})
}

// changePassword sets u's new password if the policy allows it, with the
// next password generation and a cut-off that kill every earlier token,
// tells the store the new generation's stamp, which removes those tokens
// and those of logins that checked the old password meanwhile and makes it
// refuse any later one, on every instance sharing it (Supersede), and
// returns the user as the directory now has them, with that stamp.
func changePassword(log *slog.Logger, r *http.Request, tc tokenCheck, setter PasswordSetter, u *users.Account, password string) (*users.Account, uint64, error) {
	username := u.Username()
	if err := setter.Policy.Check(username, password); err != nil {
		return nil, 0, weakPasswordReply(err)
	}
	hash, err := setter.Hash(password)
	if err != nil {
		return nil, 0, weakPasswordReply(err) // bcrypt's 72 bytes: the only way hashing fails
	}
	var cutoff time.Time
	var generation uint64
	err = users.Update(r.Context(), tc.users, username, func(x *users.User) error {
		// Only over the password current_password was checked against: of
		// two changes racing with one token, the second finds another
		// password generation; a rehash on login in between (another hash
		// of the same password) changes nothing.
		if !u.SamePassword(x) {
			return errInvalidCredentials
		}
		x.PasswordGeneration++
		cutoff = users.NextCutoff(x.TokensAfter, tc.now())
		x.PasswordHash, x.TokensAfter, generation = hash, cutoff, x.PasswordGeneration
		x.ResetLink = nil // a password change makes older reset links dead (API.md)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	stamp := users.SessionGeneration(generation)
	// The password has changed: from here on nothing turns the reply into
	// an error that would tell the client the old password still stands.
	// The old tokens are dead anyway, by the generation and cut-off just
	// written, on this instance at once and on the others within 5 s.
	n, err := tc.store.Supersede(r.Context(), tc.policy.Supersession(username, stamp, cutoff, tc.now()))
	if err != nil {
		log.WarnContext(r.Context(), "password changed; its old tokens stay in the store until they expire (the cut-off refuses them), and other instances take logins on the old password until they reload", "username", username, "err", err)
	}
	tc.metrics.Revoked(RevokedUserChange, n)
	changed, err := tc.users.Lookup(r.Context(), username)
	if err != nil {
		log.WarnContext(r.Context(), "password changed; replying with the user as it was read before", "username", username, "err", err)
		return u, stamp, nil
	}
	return changed, stamp, nil
}
