package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

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

// Second-factor limits (API.md, Two-factor authentication).
const (
	challengeTTL      = 5 * time.Minute // an mfa_token lives 5 minutes
	challengeAttempts = 5               // and allows 5 codes
	maxCodeLen        = 64              // bytes: a code is 6–8 digits or a 16-character recovery code with separators
)

// secondFactors checks codes and hands out mfa_tokens: the dependencies
// shared by login and the second-factor endpoints.
type secondFactors struct {
	users  users.Directory
	store  tokens.Store
	config MFAConfig
	now    func() time.Time
	log    *slog.Logger
}

// errCodeSpent: a recovery code matched, but another request spent it
// first.
var errCodeSpent = errors.New("recovery code already spent")

// errFactorGone: the code was checked against second factors the user no
// longer has (user reset-mfa, or an admin's, between the read of the user
// and the code's check). Only a login sees it (checkOrGone), and decides
// it again on the user as the directory has them now.
var errFactorGone = errors.New("the user's second factor is gone")

// challenge stores a second step for u, whose password (of stamp) was just
// found right, and returns the mfa_required reply that carries its token.
func (sf secondFactors) challenge(ctx context.Context, u *users.Account, stamp uint64) error {
	token, digest := tokens.New()
	now := sf.now()
	c := tokens.Challenge{Username: u.Username(), Stamp: stamp, ExpiresAt: now.Add(challengeTTL), Attempts: challengeAttempts}
	if err := sf.store.PutChallenge(ctx, digest, c, now); err != nil {
		return err
	}
	return mfaRequired(token)
}

// check reports whether code is a right second-factor code of username
// now, and spends it: a TOTP code of a counter above the last accepted
// one, recorded fleet-wide in the token store so that it works once on
// any instance, or one of the user's unused recovery codes, removed from
// the directory so that it works once.
func (sf secondFactors) check(ctx context.Context, username, code string) (bool, error) {
	m, ok, err := sf.match(ctx, username, code)
	if err != nil || !ok {
		return false, err
	}
	ok, err = sf.spend(ctx, username, m)
	if errors.Is(err, errFactorGone) {
		return false, nil
	}
	return ok, err
}

// checkOrGone is check, but errFactorGone when a wrong code, or a right
// one found unspendable, is so because the user has no second factor any
// more: for a login, whose password was found right of a user who had one.
func (sf secondFactors) checkOrGone(ctx context.Context, username, code string) (bool, error) {
	m, ok, err := sf.match(ctx, username, code)
	switch {
	case err != nil:
		return false, err
	case !ok:
		// As the directory has the user now, not this instance's copy,
		// which a change elsewhere may have left behind: a stat of a
		// users file, one read of PostgreSQL, for a wrong code alone.
		fresh, err := sf.users.Recheck(ctx, username)
		if err == nil && !fresh.HasSecondFactor() {
			return false, errFactorGone
		}
		return false, nil // fail closed: a directory that cannot say is a wrong code
	}
	return sf.spend(ctx, username, m)
}

// checkClaiming is check for the second step of the mfa_token under
// digest, which is spent with its first success: a right code claims the
// mfa_token before the code is spent, so that of right codes sent at once
// (on any instances) one spends its code and the mfa_token and gets a
// token; the others are errInvalidToken, and their codes stay unused. A
// code found spent meanwhile (a replay) gives the claim back: the
// mfa_token lives on with the attempts it had.
func (sf secondFactors) checkClaiming(ctx context.Context, digest tokens.Digest, username, code string) (bool, error) {
	m, ok, err := sf.match(ctx, username, code)
	if err != nil || !ok {
		return false, err
	}
	claimed, err := sf.store.ClaimChallenge(ctx, digest, sf.now())
	switch {
	case err != nil:
		return false, err
	case !claimed:
		return false, errInvalidToken // another request's right code spent it
	}
	// From here the claim is given back or spent even if the client
	// hangs up.
	ctx = context.WithoutCancel(ctx)
	ok, err = sf.spend(ctx, username, m)
	if errors.Is(err, errFactorGone) {
		err = nil // a wrong code: the next login finds no factor to ask for
	}
	if err != nil || !ok {
		if uerr := sf.store.UnclaimChallenge(ctx, digest); uerr != nil {
			sf.log.WarnContext(ctx, "cannot give back an mfa_token's claim; it dies when it expires", "username", username, "err", uerr)
		}
		return false, err
	}
	if serr := sf.store.SpendChallenge(ctx, digest); serr != nil {
		// Claimed, it is tried and claimed by no one: dead regardless.
		sf.log.WarnContext(ctx, "cannot spend an mfa_token; it stays claimed until it expires", "username", username, "err", serr)
	}
	return true, nil
}

// A codeMatch is a second-factor code found right and not yet spent: a
// TOTP code's counter, or the stored hash of a recovery code.
type codeMatch struct {
	totp     *mfa.TOTP // nil for a recovery code
	counter  int64
	recovery string
}

// match reports whether code is a right second-factor code of username
// now, and which, spending nothing: a TOTP code in the authenticator's
// window (whether its counter was used is for spend to say), or one of
// the user's unused recovery codes.
func (sf secondFactors) match(ctx context.Context, username, code string) (codeMatch, bool, error) {
	f, err := sf.users.Factors(ctx, username)
	if err != nil || f == nil {
		return codeMatch{}, false, err
	}
	if f.TOTP != nil {
		t, err := sf.open(f.TOTP, username)
		if err != nil {
			return codeMatch{}, false, err
		}
		if counter, ok := t.Check(code, sf.now()); ok {
			return codeMatch{totp: &t, counter: counter}, true, nil
		}
	}
	i, ok, err := f.MatchRecoveryCode(sf.config.Keys, code)
	switch {
	case err != nil:
		sf.log.ErrorContext(ctx, "cannot check a recovery code", "username", username, "err", err)
		return codeMatch{}, false, errSecretKey
	case !ok:
		return codeMatch{}, false, nil
	}
	return codeMatch{recovery: f.RecoveryCodes[i]}, true, nil
}

// spend spends m, a code of username, and reports whether this call did:
// false when another request (on any instance) spent it first.
func (sf secondFactors) spend(ctx context.Context, username string, m codeMatch) (bool, error) {
	if m.totp != nil {
		// A replay within the window is refused here, whichever
		// instance took the code first.
		return sf.store.UseTOTPCounter(ctx, username, m.counter, m.totp.LastT, sf.now(), counterUntil(*m.totp, m.counter))
	}
	spent := m.recovery
	err := users.Update(ctx, sf.users, username, func(x *users.User) error {
		if !x.HasSecondFactor() {
			return errFactorGone // removed since match read it
		}
		j := slices.Index(x.MFA.RecoveryCodes, spent)
		if j < 0 {
			return errCodeSpent
		}
		x.MFA.RecoveryCodes = slices.Delete(x.MFA.RecoveryCodes, j, j+1)
		if len(x.MFA.RecoveryCodes) == 0 {
			x.MFA.RecoveryKeyID = ""
		}
		return nil
	})
	if errors.Is(err, errCodeSpent) {
		return false, nil
	}
	return err == nil, err
}

// open returns the authenticator f stores for username, or errSecretKey
// (logged for the operator) when the key cannot open it.
func (sf secondFactors) open(f *users.TOTPFactor, username string) (mfa.TOTP, error) {
	t, _, err := f.Open(sf.config.Keys, username)
	if err != nil {
		sf.log.Error("cannot open a TOTP secret", "username", username, "err", err)
		return mfa.TOTP{}, errSecretKey
	}
	return t, nil
}

// counterUntil is how long the token store must keep counter as used: past
// the last moment a code of it can be accepted (|c − (now's counter +
// drift)| ≤ 1), with a step to spare for clocks that differ between
// instances. After that the window refuses the code by itself.
func counterUntil(t mfa.TOTP, counter int64) time.Time {
	return time.Unix(t.T0+(counter-t.Drift+3)*t.Step, 0)
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
// the login reply. In API.md's order: the body (400), the mfa_token (401
// invalid_token), the throttle (429), the code (401 invalid_credentials).
func handleLoginMFA(log *slog.Logger, tc tokenCheck, guard *LoginGuard, sf secondFactors) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		const event = "login mfa"
		req, err := readMFABody(w, r, "mfa_token", "code")
		var c tokens.Challenge
		var digest tokens.Digest
		var u *users.Account
		if err == nil {
			u, c, digest, err = takeChallenge(r.Context(), tc, req.MFAToken)
		}
		if err != nil {
			username := ""
			if u != nil {
				username = u.Username()
			}
			guard.auditRefused(w, r, event, username, err)
			tc.metrics.secondFactorStep("code", err)
			writeError(w, r, log, err)
			return
		}
		attempt := guard.attempt(w, r, tc.users, u.Username())
		attempt.event, attempt.codeLock = event, true
		// Spent by its first success, on every instance: one token.
		err = attempt.verifyCode(func() (bool, error) { return sf.checkClaiming(r.Context(), digest, u.Username(), req.Code) })
		tc.metrics.secondFactorStep("code", err)
		attempt.grant(log, tc, u, c.Stamp, err)
	})
}

// takeChallenge takes one attempt of the second step that mfaToken stands
// for and returns its user: errInvalidToken when it is malformed, unknown,
// expired, out of attempts, or its user's password, factors or tokens have
// changed since (the store ended it, or the directory says so).
func takeChallenge(ctx context.Context, tc tokenCheck, mfaToken string) (*users.Account, tokens.Challenge, tokens.Digest, error) {
	digest, err := tokens.DigestOf(mfaToken)
	if err != nil {
		return nil, tokens.Challenge{}, digest, errInvalidToken
	}
	c, err := tc.store.TryChallenge(ctx, digest, tc.now())
	switch {
	case errors.Is(err, tokens.ErrNotFound):
		return nil, c, digest, errInvalidToken
	case err != nil:
		return nil, c, digest, err
	}
	u, err := users.SessionUser(ctx, tc.users, c.Username, c.IssuedAt, c.Stamp)
	switch {
	case err != nil:
		return nil, c, digest, err
	case u == nil || !u.HasSecondFactor():
		tc.store.SpendChallenge(ctx, digest) // dead stays dead
		return nil, c, digest, errInvalidToken
	}
	return u, c, digest, nil
}

// mfaStatus is the reply of GET /api/auth/mfa/.
type mfaStatus struct {
	TOTP              bool `json:"totp"`
	RecoveryCodesLeft int  `json:"recovery_codes_left"`
}

// handleMFAStatus tells the token's user which second factors are active.
func handleMFAStatus(log *slog.Logger, tc tokenCheck, guard *LoginGuard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := tc.authenticate(r)
		var f *users.Factors
		username := ""
		if err == nil {
			username = p.user.Username()
			f, err = tc.users.Factors(r.Context(), username)
		}
		guard.auditRefused(w, r, "mfa status", username, err) // a second-factor endpoint: one audit line each
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
	attempt *loginAttempt
}

// startMFACall authenticates the token (401), reads the body (415, 413,
// 400) and prepares the attempt; on an error it has written the reply and
// the audit line, and returns nil.
func startMFACall(w http.ResponseWriter, r *http.Request, log *slog.Logger, tc tokenCheck, guard *LoginGuard, event, step string, required ...string) *mfaCall {
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
		guard.auditRefused(w, r, event, username, err)
		tc.metrics.secondFactorStep(step, err)
		writeError(w, r, log, err)
		return nil
	}
	a := guard.attempt(w, r, tc.users, p.user.Username())
	a.event = event
	return &mfaCall{w: w, r: r, p: p, req: req, attempt: a}
}

// end writes the audit line and the reply: err's, or status with body (nil: none).
func (c *mfaCall) end(log *slog.Logger, m *Metrics, step string, err error, status int, body any) {
	c.attempt.release()
	c.attempt.audit(err)
	m.secondFactorStep(step, err)
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
func mfaStep(log *slog.Logger, tc tokenCheck, guard *LoginGuard, event, step string, required []string, serve func(c *mfaCall) (status int, body any, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := startMFACall(w, r, log, tc, guard, event, step, required...)
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
func handleTOTPEnrol(log *slog.Logger, tc tokenCheck, guard *LoginGuard, sf secondFactors) http.Handler {
	return mfaStep(log, tc, guard, "mfa enrol", "enrol", []string{"password"}, func(c *mfaCall) (int, any, error) {
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
			c.attempt.hold, c.attempt.codeLock = true, true
			var u *users.Account
			if u, err = c.attempt.verify(c.req.Password); err == nil {
				err = c.attempt.verifyCode(func() (bool, error) { return sf.check(ctx, u.Username(), c.req.Code) })
			}
		} else if err == nil {
			_, err = c.attempt.verify(c.req.Password)
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
func handleTOTPConfirm(log *slog.Logger, tc tokenCheck, guard *LoginGuard, sf secondFactors) http.Handler {
	return mfaStep(log, tc, guard, "mfa confirm", "confirm", []string{"code"}, func(c *mfaCall) (int, any, error) {
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
			t, err = sf.open(f.PendingTOTP, username)
		}
		var counter int64
		if err == nil {
			err = c.attempt.verifyCode(func() (bool, error) {
				var ok bool
				if counter, ok = t.Check(c.req.Code, sf.now()); !ok {
					return false, nil
				}
				return tc.store.UseTOTPCounter(ctx, username, counter, t.LastT, sf.now(), counterUntil(t, counter))
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
func handleTOTPRemove(log *slog.Logger, tc tokenCheck, guard *LoginGuard, sf secondFactors) http.Handler {
	return mfaStep(log, tc, guard, "mfa remove", "remove", []string{"password", "code"}, func(c *mfaCall) (int, any, error) {
		err := sf.passwordAndCode(c)
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
func handleRecoveryCodes(log *slog.Logger, tc tokenCheck, guard *LoginGuard, sf secondFactors) http.Handler {
	return mfaStep(log, tc, guard, "mfa recovery codes", "recovery_codes", []string{"password", "code"}, func(c *mfaCall) (int, any, error) {
		err := sf.passwordAndCode(c)
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
func (sf secondFactors) passwordAndCode(c *mfaCall) error {
	if !c.p.user.HasSecondFactor() {
		return errNoSecondFactor
	}
	c.attempt.hold = true
	u, err := c.attempt.verify(c.req.Password)
	if err != nil {
		return err
	}
	if !c.attempt.held { // its factors went meanwhile
		return errNoSecondFactor
	}
	c.attempt.codeLock = true
	return c.attempt.verifyCode(func() (bool, error) { return sf.check(c.r.Context(), u.Username(), c.req.Code) })
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
