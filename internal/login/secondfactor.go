package login

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"authsvc/internal/mfa"
	"authsvc/internal/secret"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// Second-step limits (API.md, Two-factor authentication).
const (
	challengeTTL      = 5 * time.Minute // an mfa_token lives 5 minutes
	challengeAttempts = 5               // and allows 5 codes
)

// SecondFactors checks second-factor codes and hands out mfa_tokens.
type SecondFactors struct {
	Users users.Directory
	Store tokens.Store
	// Keys open the stored TOTP secrets and recovery codes' keys.
	Keys secret.Keyring
	Now  func() time.Time
	Log  *slog.Logger
}

// takeChallenge takes one attempt of the second step that mfaToken stands
// for and returns its user: ErrInvalidToken when it is malformed, unknown,
// expired, out of attempts, or its user's password, factors or tokens have
// changed since (the store ended it, or the directory says so).
func (sf SecondFactors) takeChallenge(ctx context.Context, mfaToken string) (*users.Account, tokens.Challenge, tokens.Digest, error) {
	digest, err := tokens.DigestOf(mfaToken)
	if err != nil {
		return nil, tokens.Challenge{}, digest, ErrInvalidToken
	}
	c, err := sf.Store.TryChallenge(ctx, digest, sf.Now())
	switch {
	case errors.Is(err, tokens.ErrNotFound):
		return nil, c, digest, ErrInvalidToken
	case err != nil:
		return nil, c, digest, err
	}
	u, err := users.SessionUser(ctx, sf.Users, c.Username, c.IssuedAt, c.Stamp)
	switch {
	case err != nil:
		return nil, c, digest, err
	case u == nil || !u.HasSecondFactor():
		sf.Store.SpendChallenge(ctx, digest) // dead stays dead
		return nil, c, digest, ErrInvalidToken
	}
	return u, c, digest, nil
}

// Check reports whether code is a right second-factor code of username
// now, and spends it: a TOTP code of a counter above the last accepted
// one, recorded fleet-wide in the token store so that it works once on
// any instance, or one of the user's unused recovery codes, removed from
// the directory so that it works once.
func (sf SecondFactors) Check(ctx context.Context, username, code string) (bool, error) {
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

// checkOrGone is Check, but errFactorGone when a wrong code, or a right
// one found unspendable, is so because the user has no second factor any
// more: for a login, whose password was found right of a user who had one.
func (sf SecondFactors) checkOrGone(ctx context.Context, username, code string) (bool, error) {
	m, ok, err := sf.match(ctx, username, code)
	switch {
	case err != nil:
		return false, err
	case !ok:
		// As the directory has the user now, not this instance's copy,
		// which a change elsewhere may have left behind: a stat of a
		// users file, one read of PostgreSQL, for a wrong code alone.
		fresh, err := sf.Users.Recheck(ctx, username)
		if err == nil && !fresh.HasSecondFactor() {
			return false, errFactorGone
		}
		return false, nil // fail closed: a directory that cannot say is a wrong code
	}
	return sf.spend(ctx, username, m)
}

// checkClaiming is Check for the second step of the mfa_token under
// digest, which is spent with its first success: a right code claims the
// mfa_token before the code is spent, so that of right codes sent at once
// (on any instances) one spends its code and the mfa_token and gets a
// token; the others are ErrInvalidToken, and their codes stay unused. A
// code found spent meanwhile (a replay) gives the claim back: the
// mfa_token lives on with the attempts it had.
func (sf SecondFactors) checkClaiming(ctx context.Context, digest tokens.Digest, username, code string) (bool, error) {
	m, ok, err := sf.match(ctx, username, code)
	if err != nil || !ok {
		return false, err
	}
	claimed, err := sf.Store.ClaimChallenge(ctx, digest, sf.Now())
	switch {
	case err != nil:
		return false, err
	case !claimed:
		return false, ErrInvalidToken // another request's right code spent it
	}
	// From here the claim is given back or spent even if the client
	// hangs up.
	ctx = context.WithoutCancel(ctx)
	ok, err = sf.spend(ctx, username, m)
	if errors.Is(err, errFactorGone) {
		err = nil // a wrong code: the next login finds no factor to ask for
	}
	if err != nil || !ok {
		if uerr := sf.Store.UnclaimChallenge(ctx, digest); uerr != nil {
			sf.Log.WarnContext(ctx, "cannot give back an mfa_token's claim; it dies when it expires", "username", username, "err", uerr)
		}
		return false, err
	}
	if serr := sf.Store.SpendChallenge(ctx, digest); serr != nil {
		// Claimed, it is tried and claimed by no one: dead regardless.
		sf.Log.WarnContext(ctx, "cannot spend an mfa_token; it stays claimed until it expires", "username", username, "err", serr)
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
func (sf SecondFactors) match(ctx context.Context, username, code string) (codeMatch, bool, error) {
	f, err := sf.Users.Factors(ctx, username)
	if err != nil || f == nil {
		return codeMatch{}, false, err
	}
	if f.TOTP != nil {
		t, err := sf.Open(f.TOTP, username)
		if err != nil {
			return codeMatch{}, false, err
		}
		if counter, ok := t.Check(code, sf.Now()); ok {
			return codeMatch{totp: &t, counter: counter}, true, nil
		}
	}
	i, ok, err := f.MatchRecoveryCode(sf.Keys, code)
	switch {
	case err != nil:
		sf.Log.ErrorContext(ctx, "cannot check a recovery code", "username", username, "err", err)
		return codeMatch{}, false, ErrSecretKey
	case !ok:
		return codeMatch{}, false, nil
	}
	return codeMatch{recovery: f.RecoveryCodes[i]}, true, nil
}

// spend spends m, a code of username, and reports whether this call did:
// false when another request (on any instance) spent it first.
func (sf SecondFactors) spend(ctx context.Context, username string, m codeMatch) (bool, error) {
	if m.totp != nil {
		// A replay within the window is refused here, whichever
		// instance took the code first.
		return sf.Store.UseTOTPCounter(ctx, username, m.counter, m.totp.LastT, sf.Now(), CounterUntil(*m.totp, m.counter))
	}
	spent := m.recovery
	err := users.Update(ctx, sf.Users, username, func(x *users.User) error {
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

// Open returns the authenticator f stores for username, or ErrSecretKey
// (logged for the operator) when the key cannot open it.
func (sf SecondFactors) Open(f *users.TOTPFactor, username string) (mfa.TOTP, error) {
	t, _, err := f.Open(sf.Keys, username)
	if err != nil {
		sf.Log.Error("cannot open a TOTP secret", "username", username, "err", err)
		return mfa.TOTP{}, ErrSecretKey
	}
	return t, nil
}

// CounterUntil is how long the token store must keep counter as used: past
// the last moment a code of it can be accepted (|c − (now's counter +
// drift)| ≤ 1), with a step to spare for clocks that differ between
// instances. After that the window refuses the code by itself.
func CounterUntil(t mfa.TOTP, counter int64) time.Time {
	return time.Unix(t.T0+(counter-t.Drift+3)*t.Step, 0)
}
