package users

import (
	"context"
	"errors"
	"time"
)

// The operations an operator performs on one user, whatever asks for them
// (the CLI today, an admin API tomorrow): each is one Directory.Update,
// and each says which tokens it ends. A token dies by its user's record
// alone (SessionUser; docs/design/tokens.md): disabled, issued before the
// cut-off (TokensAfter), or stamped with another password generation. A
// reload on every instance turns the change into a Cut (CutOf), which the
// token store is told. Deleting a user is Directory.Delete: its tombstone
// keeps every token of the name dead.
//
// Each reads the clock inside the change, under the directory's write
// lock, rather than before it: a cut-off taken before waiting for the lock
// would spare the tokens issued while it waited. A user not in d is an
// error wrapping ErrNotFound.

// Disable disables the user named username and ends every token of theirs:
// SessionUser refuses a disabled user's tokens outright, and the cut-off,
// moved to now, keeps the tokens issued before the disable dead after a
// later Enable.
func Disable(ctx context.Context, d Directory, username string) error {
	return d.Update(ctx, username, func(u *User) error {
		u.Disabled, u.TokensAfter, u.AccessTokens, u.ResetLink = true, time.Now().UTC(), nil, nil
		return nil
	})
}

// Enable enables the user named username. It moves the cut-off to now too
// (never back): a token an instance issued while the user was disabled,
// before it had reloaded, dies with the enable rather than living on. No
// token is live while a user is disabled, so none that was is lost.
func Enable(ctx context.Context, d Directory, username string) error {
	return d.Update(ctx, username, func(u *User) error {
		// Disable emptied the personal access tokens; an older file put back
		// while the user was disabled may hold some, dead all the same.
		u.Disabled, u.TokensAfter, u.AccessTokens = false, Later(u.TokensAfter, time.Now().UTC()), nil
		return nil
	})
}

// SetPassword gives the user named username the password hash and ends
// every session of the old password: the cut-off, moved to now, ends
// those issued before the change, and the password generation, moved on,
// ends the one of a login that checked the old password while the change
// was written (issued after the cut-off, but stamped with the old
// generation), however recent. It is a password set by someone other
// than the user knowing the current one (an operator, a reset link), so
// it ends the user's personal access tokens too (API.md); the user's own
// change (POST /api/auth/password/) keeps them.
func SetPassword(ctx context.Context, d Directory, username, hash string) error {
	return d.Update(ctx, username, func(u *User) error {
		u.PasswordHash, u.TokensAfter, u.AccessTokens, u.ResetLink = hash, time.Now().UTC(), nil, nil
		u.PasswordGeneration++
		return nil
	})
}

// Logout ends every token of the user named username issued until now, by
// moving the cut-off to now. The password and second factors stay, so a
// login afterwards gets a live token.
func Logout(ctx context.Context, d Directory, username string) error {
	return d.Update(ctx, username, func(u *User) error {
		u.TokensAfter = time.Now().UTC()
		return nil
	})
}

// Unlock lifts the lockout of the user named username: the failed logins
// before now (FailuresAfter) no longer count. It ends no token.
func Unlock(ctx context.Context, d Directory, username string) error {
	return d.Update(ctx, username, func(u *User) error {
		u.FailuresAfter = time.Now().UTC()
		return nil
	})
}

// errNoFactors: ResetFactors found no second factor to remove.
var errNoFactors = errors.New("no second factor")

// ResetFactors removes the second factors of the user named username,
// confirmed and pending, and ends their tokens as SetPassword does (the
// cut-off moved to now, the password generation moved on): whoever held a
// token may have been the one who enrolled the authenticator being
// removed, so none of them survives it, and the generation ends the
// session of a login in flight too. It reports whether there was anything
// to remove, and whether that was only an enrolment never confirmed. A
// user without factors is left as it was, cut-off included: a reset run
// twice, or on the wrong user, ends no one's sessions.
func ResetFactors(ctx context.Context, d Directory, username string) (removed, pendingOnly bool, err error) {
	err = d.Update(ctx, username, func(u *User) error {
		f := u.MFA
		if f == nil || f.TOTP == nil && f.PendingTOTP == nil && len(f.RecoveryCodes) == 0 {
			return errNoFactors
		}
		pendingOnly = !u.HasSecondFactor()
		u.MFA, u.TokensAfter = nil, time.Now().UTC()
		u.PasswordGeneration++
		return nil
	})
	switch {
	case errors.Is(err, errNoFactors):
		return false, false, nil
	case err != nil:
		return false, false, err
	}
	return true, pendingOnly, nil
}
