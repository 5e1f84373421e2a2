package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/mfa"
	"authsvc/internal/secret"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// MFAConfig is what the second-factor endpoints need beyond the users and
// the token store.
type MFAConfig struct {
	// Keys seal new TOTP secrets (under Keys.Current) and open stored
	// ones; old keys of the ring serve during a rotation. Without a
	// current key, enrolment answers 503 (API.md: PostgreSQL and no key).
	Keys   secret.Keyring
	Issuer string // the otpauth:// URL's issuer (--mfa-issuer)
}

// maxCodeLen bounds a code or an mfa_token in a body, in bytes (API.md,
// Two-factor authentication): a code is 6–8 digits or a 16-character
// recovery code with separators.
const maxCodeLen = 64

// secondFactors changes a user's second factors: the dependencies of the
// second-factor endpoints beside the checks of codes (login.SecondFactors).
type secondFactors struct {
	users  users.Directory
	config MFAConfig
	now    func() time.Time
	log    *slog.Logger
}

// decodeMFA parses a second-factor body into req, whose fields named in
// required must be non-empty strings; password fields within the
// password limit, codes and tokens within maxCodeLen.
func decodeMFA(body []byte, req *mfaRequest, required ...string) error {
	if err := decodeObject(body, req); err != nil {
		return err
	}
	return req.require(required...)
}

// require checks that r's fields named in required are non-empty and
// within their limits (decodeMFA): 400 invalid_request otherwise.
func (r *mfaRequest) require(required ...string) error {
	for _, field := range required {
		v := r.field(field)
		switch {
		case v == "":
			return invalidRequest(field + " is required.")
		case field == "password" && len(v) > 1024:
			return invalidRequest("password is longer than 1024 bytes.")
		case field != "password" && len(v) > maxCodeLen:
			return invalidRequest(field + " is too long.")
		}
	}
	return nil
}

// mfaRequest is the body of every second-factor request: each endpoint
// takes some of its fields (decodeMFA).
type mfaRequest struct {
	Password string `json:"password"`
	Code     string `json:"code"`
	MFAToken string `json:"mfa_token"`
}

// field returns the field of r named as in JSON.
func (r *mfaRequest) field(name string) string {
	switch name {
	case "password":
		return r.Password
	case "code":
		return r.Code
	}
	return r.MFAToken
}

// readMFABody reads and decodes a second-factor body: the media type
// (415), the size (413) and the shape (400), as login's.
func readMFABody(w http.ResponseWriter, r *http.Request, required ...string) (mfaRequest, error) {
	var req mfaRequest
	body, err := readJSONBody(w, r)
	if err == nil {
		err = decodeMFA(body, &req, required...)
	}
	return req, err
}

// handleLoginMFA is a login's second step: an mfa_token and a code give
// the login reply. In API.md's order: the body (400), then the second step
// itself (internal/login): the mfa_token (401 invalid_token), the throttle
// (429), the code (401 invalid_credentials).
func handleLoginMFA(log *slog.Logger, gt gate, m *Metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const event = "login mfa"
		c := gt.client(w, r)
		req, err := readMFABody(w, r, "mfa_token", "code")
		if err != nil {
			gt.audit(r.Context(), c, event, "", err)
			m.SecondFactorStep("code", err)
			writeError(w, r, log, err)
			return
		}
		username, g, err := gt.logins.SecondStep(r.Context(), c, req.MFAToken, req.Code)
		if username == "" {
			gt.audit(r.Context(), c, event, "", err) // the mfa_token names no user
		} else {
			gt.auditAttempt(r.Context(), c, event, username, err)
		}
		writeGrant(w, r, log, g, err)
	})
}

// mfaStatus is the reply of GET /api/auth/mfa/.
type mfaStatus struct {
	TOTP              bool `json:"totp"`
	RecoveryCodesLeft int  `json:"recovery_codes_left"`
}

// handleMFAStatus tells the token's user which second factors are active.
func handleMFAStatus(log *slog.Logger, tc tokenCheck, gt gate) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := tc.authenticate(r)
		var f *users.Factors
		username := ""
		if err == nil {
			username = p.user.Username()
			f, err = tc.users.Factors(r.Context(), username)
		}
		gt.audit(r.Context(), gt.client(w, r), "mfa status", username, err) // a second-factor endpoint: one audit line each
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		var reply mfaStatus
		if f != nil {
			reply = mfaStatus{TOTP: f.TOTP != nil, RecoveryCodesLeft: len(f.RecoveryCodes)}
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Vary", "Authorization")
		encode(w, http.StatusOK, reply)
	})
}

// enrolReply is the reply of POST /api/auth/mfa/totp/: the pending secret.
type enrolReply struct {
	Secret     string `json:"secret"`
	OTPAuthURL string `json:"otpauth_url"`
}

// recoveryCodesReply is the reply of confirm and of replacing the codes.
type recoveryCodesReply struct {
	RecoveryCodes []string `json:"recovery_codes"`
}

// An mfaCall is one request to a second-factor endpoint behind a token:
// its principal, body, and the attempt that checks its password or code.
type mfaCall struct {
	w       http.ResponseWriter
	r       *http.Request
	p       principal
	req     mfaRequest
	attempt *login.Attempt
	gt      gate   // writes the audit line
	event   string // the audit line's message
}

// startMFACall authenticates the token (401), reads the body (415, 413,
// 400) and prepares the attempt; on an error it has written the reply and
// the audit line, and returns nil.
func startMFACall(w http.ResponseWriter, r *http.Request, log *slog.Logger, tc tokenCheck, gt gate, event, step string, required ...string) *mfaCall {
	p, err := tc.authenticate(r)
	var req mfaRequest
	if err == nil {
		req, err = readMFABody(w, r, required...)
	}
	if err != nil {
		username := ""
		if p.user != nil {
			username = p.user.Username()
		}
		gt.audit(r.Context(), gt.client(w, r), event, username, err)
		tc.metrics.SecondFactorStep(step, err)
		writeError(w, r, log, err)
		return nil
	}
	return &mfaCall{w: w, r: r, p: p, req: req, attempt: gt.attempt(w, r, p.user.Username()), gt: gt, event: event}
}

// end writes the audit line and the reply: err's, or status with body (nil: none).
func (c *mfaCall) end(log *slog.Logger, m *Metrics, step string, err error, status int, body any) {
	c.attempt.Release()
	c.gt.auditAttempt(c.r.Context(), c.gt.client(c.w, c.r), c.event, c.p.user.Username(), err)
	m.SecondFactorStep(step, err)
	if err != nil {
		writeError(c.w, c.r, log, err)
		return
	}
	c.w.Header().Set("Cache-Control", "no-store")
	if body == nil {
		c.w.WriteHeader(status)
		return
	}
	encode(c.w, status, body)
}

// mfaStep serves a second-factor endpoint behind a token: startMFACall
// (event and step name the audit line and the metric; required, the
// body's fields), then serve, whose status and body (nil: none) or error
// end the call.
func mfaStep(log *slog.Logger, tc tokenCheck, gt gate, event, step string, required []string, serve func(c *mfaCall) (status int, body any, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := startMFACall(w, r, log, tc, gt, event, step, required...)
		if c == nil {
			return
		}
		status, body, err := serve(c)
		c.end(log, tc.metrics, step, err, status, body)
	})
}

// handleTOTPEnrol starts enrolling an authenticator: the password, then a
// new pending secret, which does nothing until confirmed and replaces a
// pending one; 409 while an authenticator is active. A user who has a
// second factor (recovery codes alone, say, from an imported django-otp
// static device) sends a code of it too, checked as on removal: no factor
// is ever replaced on the strength of the password alone, and confirming
// replaces the recovery codes and ends the user's other tokens.
func handleTOTPEnrol(log *slog.Logger, tc tokenCheck, gt gate, sf secondFactors) http.Handler {
	return mfaStep(log, tc, gt, "mfa enrol", "enrol", []string{"password"}, func(c *mfaCall) (int, any, error) {
		ctx, username := c.r.Context(), c.p.user.Username()
		var err error
		if sf.config.Keys.Current().IsZero() {
			log.WarnContext(ctx, "enrolment refused: serve has no secret key (--secret-key-file)")
			err = errUnavailable
		}
		var f *users.Factors
		if err == nil {
			f, err = tc.users.Factors(ctx, username)
		}
		coded := hasFactor(f)
		switch {
		case err != nil:
		case f != nil && f.TOTP != nil:
			err = errMFAEnrolled
		case coded:
			err = c.req.require("code") // 400 before any check, as removal's body
		}
		if err == nil && coded {
			// The password and the code as one attempt, as on removal.
			// Should the factors go meanwhile, the code is still checked
			// (and fails): no guess is let through unchecked.
			c.attempt.Hold, c.attempt.CodeLock = true, true
			var u *users.Account
			if u, err = c.attempt.Verify(c.req.Password); err == nil {
				err = c.attempt.VerifyCode(func() (bool, error) { return gt.logins.Factors.Check(ctx, u.Username(), c.req.Code) })
			}
		} else if err == nil {
			_, err = c.attempt.Verify(c.req.Password)
		}
		var reply enrolReply
		if err == nil {
			reply, err = sf.enrol(ctx, username, coded)
		}
		return http.StatusOK, reply, err
	})
}

// hasFactor reports whether f holds a second factor as API.md defines
// it: an active authenticator or unused recovery codes.
func hasFactor(f *users.Factors) bool {
	return f != nil && (f.TOTP != nil || len(f.RecoveryCodes) > 0)
}

// errCodeRequired: enrolment by a user who has a second factor, without
// a code of it.
var errCodeRequired = invalidRequest("code is required: a second factor is active.")

// enrol makes username a new pending authenticator and returns what the
// app needs of it. coded says that a code of the user's second factor was
// checked: without one, a user who has gained a factor since it was read
// is refused (errCodeRequired).
func (sf secondFactors) enrol(ctx context.Context, username string, coded bool) (enrolReply, error) {
	raw, err := mfa.NewSecret()
	if err != nil {
		return enrolReply{}, err
	}
	pending, err := users.SealTOTP(sf.config.Keys, username, mfa.NewTOTP(raw))
	if err != nil {
		return enrolReply{}, fmt.Errorf("seal a TOTP secret: %w", err)
	}
	err = users.Update(ctx, sf.users, username, func(x *users.User) error {
		if x.MFA == nil {
			x.MFA = &users.Factors{}
		}
		switch {
		case x.MFA.TOTP != nil:
			return errMFAEnrolled
		case !coded && hasFactor(x.MFA):
			return errCodeRequired
		}
		x.MFA.PendingTOTP = pending
		return nil
	})
	if err != nil {
		return enrolReply{}, err
	}
	return enrolReply{Secret: mfa.Base32(raw), OTPAuthURL: mfa.OTPAuthURL(sf.config.Issuer, username, raw)}, nil
}

// handleTOTPConfirm activates the pending authenticator with a code of it,
// gives ten recovery codes, and ends every other token of the user.
func handleTOTPConfirm(log *slog.Logger, tc tokenCheck, gt gate, sf secondFactors) http.Handler {
	return mfaStep(log, tc, gt, "mfa confirm", "confirm", []string{"code"}, func(c *mfaCall) (int, any, error) {
		ctx, username := c.r.Context(), c.p.user.Username()
		f, err := tc.users.Factors(ctx, username)
		if err == nil && (f == nil || f.PendingTOTP == nil) {
			// The enrolment may have been made on another instance a
			// moment ago, which this one has not reloaded yet: the
			// backing decides before a refusal.
			if _, err = tc.users.Recheck(ctx, username); err == nil {
				f, err = tc.users.Factors(ctx, username)
			}
		}
		if err == nil && (f == nil || f.PendingTOTP == nil) {
			err = invalidRequest("No authenticator enrolment is pending; start one with POST /api/auth/mfa/totp/.")
		}
		var t mfa.TOTP
		if err == nil {
			t, err = gt.logins.Factors.Open(f.PendingTOTP, username)
		}
		var counter int64
		if err == nil {
			err = c.attempt.VerifyCode(func() (bool, error) {
				var ok bool
				if counter, ok = t.Check(c.req.Code, sf.now()); !ok {
					return false, nil
				}
				return tc.store.UseTOTPCounter(ctx, username, counter, t.LastT, sf.now(), login.CounterUntil(t, counter))
			})
		}
		var codes []string
		if err == nil {
			codes, err = mfa.NewRecoveryCodes(mfa.RecoveryCodes)
		}
		if err == nil {
			pending := f.PendingTOTP.SealedSecret
			err = sf.changeFactors(ctx, tc, c.p, func(x *users.Factors) error {
				switch {
				case x.TOTP != nil:
					return errMFAEnrolled
				case x.PendingTOTP == nil || string(x.PendingTOTP.SealedSecret) != string(pending):
					return invalidRequest("The pending enrolment changed meanwhile; start again.")
				}
				x.TOTP, x.PendingTOTP = x.PendingTOTP, nil
				x.TOTP.LastT = counter // the confirming code is used
				return x.SetRecoveryCodes(sf.config.Keys.Current(), codes)
			})
		}
		return http.StatusOK, recoveryCodesReply{RecoveryCodes: codes}, err
	})
}

// handleTOTPRemove removes the authenticator and the recovery codes, with
// the password and a code, and ends every other token of the user.
func handleTOTPRemove(log *slog.Logger, tc tokenCheck, gt gate, sf secondFactors) http.Handler {
	return mfaStep(log, tc, gt, "mfa remove", "remove", []string{"password", "code"}, func(c *mfaCall) (int, any, error) {
		err := c.passwordAndCode()
		if err == nil {
			err = sf.changeFactors(c.r.Context(), tc, c.p, func(x *users.Factors) error {
				*x = users.Factors{}
				return nil
			})
		}
		return http.StatusNoContent, nil, err
	})
}

// handleRecoveryCodes replaces the recovery codes, with the password and a
// code: the old ones are dead.
func handleRecoveryCodes(log *slog.Logger, tc tokenCheck, gt gate, sf secondFactors) http.Handler {
	return mfaStep(log, tc, gt, "mfa recovery codes", "recovery_codes", []string{"password", "code"}, func(c *mfaCall) (int, any, error) {
		err := c.passwordAndCode()
		var codes []string
		if err == nil {
			codes, err = mfa.NewRecoveryCodes(mfa.RecoveryCodes)
		}
		if err == nil {
			err = users.Update(c.r.Context(), tc.users, c.p.user.Username(), func(x *users.User) error {
				if !x.HasSecondFactor() {
					return errNoSecondFactor
				}
				return x.MFA.SetRecoveryCodes(sf.config.Keys.Current(), codes)
			})
		}
		return http.StatusOK, recoveryCodesReply{RecoveryCodes: codes}, err
	})
}

// errNoSecondFactor: removing or replacing factors the user does not have.
var errNoSecondFactor = invalidRequest("No second factor is active.")

// passwordAndCode checks the call's password, then its code, as one
// attempt: a wrong password or a wrong code is one failure.
func (c *mfaCall) passwordAndCode() error {
	if !c.p.user.HasSecondFactor() {
		return errNoSecondFactor
	}
	c.attempt.Hold = true
	u, err := c.attempt.Verify(c.req.Password)
	if err != nil {
		return err
	}
	if !c.attempt.Held() { // its factors went meanwhile
		return errNoSecondFactor
	}
	c.attempt.CodeLock = true
	return c.attempt.VerifyCode(func() (bool, error) { return c.gt.logins.Factors.Check(c.r.Context(), u.Username(), c.req.Code) })
}

// changeFactors changes the principal's user's factors with change, with
// the reach of a password change: the next password generation and a
// cut-off end every other token of the user, here and through the store
// on every instance, and end their pending second steps; the presenting
// token is bound to the new generation and lives on, with its session
// id, expiry, client and user agent (401 if it ended meanwhile).
func (sf secondFactors) changeFactors(ctx context.Context, tc tokenCheck, p principal, change func(*users.Factors) error) error {
	username := p.user.Username()
	// The presenting session is read whole before the change: its own
	// write may end the user's tokens in the store at once (serve's watch
	// tells the store of every cut it loads), the presenting one included,
	// and then neither the store nor the Lookup that authenticated the
	// request (which leaves out the client and user agent, and on Redis
	// the id) could give back what the re-bound token must keep.
	sess, err := listedSession(ctx, tc, username, p.digest)
	if err != nil {
		return err
	}
	var cutoff time.Time
	var generation uint64
	var enrolment bool
	err = users.Update(ctx, tc.users, username, func(x *users.User) error {
		f := x.MFA.Clone()
		if f == nil {
			f = &users.Factors{}
		}
		if err := change(f); err != nil {
			return err
		}
		if f.TOTP == nil && f.PendingTOTP == nil && len(f.RecoveryCodes) == 0 {
			f = nil
		}
		x.MFA = f
		x.PasswordGeneration++
		cutoff = users.NextCutoff(x.TokensAfter, tc.now())
		x.TokensAfter, generation = cutoff, x.PasswordGeneration
		// Confirming makes an enrolment session a full one; removing the
		// last factor of a user the policy covers makes it one again.
		enrolment = tc.policy.RequireMFA.PendingUser(x)
		return nil
	})
	if err != nil {
		return err
	}
	stamp := users.SessionGeneration(generation)
	// The factors have changed: from here on nothing turns the reply into
	// an error; the old tokens are dead by the cut-off regardless.
	n, err := tc.store.Supersede(ctx, tc.policy.Supersession(username, stamp, cutoff, tc.now()))
	if err != nil {
		sf.log.WarnContext(ctx, "second factors changed; the user's old tokens stay in the store until they expire (the cut-off refuses them)", "username", username, "err", err)
	}
	tc.metrics.Revoked(RevokedUserChange, max(n-1, 0)) // the presenting token comes back
	sess.Stamp, sess.Enrolment = stamp, enrolment
	if _, err := tc.store.Issue(ctx, p.digest, sess, tc.policy.MaxPerUser, users.Later(tc.now(), cutoff)); err != nil {
		sf.log.WarnContext(ctx, "second factors changed; the presenting token could not be kept and has ended with the others", "username", username, "err", err)
	}
	return nil
}

// listedSession returns username's session of digest as the store lists
// it, with its id, client and user agent: errInvalidToken when the store
// no longer has it (it ended since the request was authenticated), a
// store error when the store cannot say.
func listedSession(ctx context.Context, tc tokenCheck, username string, digest tokens.Digest) (tokens.Session, error) {
	listed, err := tc.store.List(ctx, username, tc.now())
	if err != nil {
		return tokens.Session{}, err
	}
	for _, l := range listed {
		if l.Digest == digest {
			return l.Session, nil
		}
	}
	return tokens.Session{}, errInvalidToken
}
