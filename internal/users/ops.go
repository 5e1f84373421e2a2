package users

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The operations an operator performs on one user, whatever asks for them
// (the CLI and the admin API): each is one Update,
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
//
// A user already disabled is left as it is: none of their tokens lives.
func Disable(ctx context.Context, d Directory, username string) error {
	return Update(ctx, d, username, func(u *User) error {
		if !u.Disabled {
			disable(u)
		}
		return nil
	})
}

func disable(u *User) {
	u.Disabled, u.TokensAfter, u.AccessTokens, u.ResetLink = true, time.Now().UTC(), nil, nil
}

// Enable enables the user named username. It moves the cut-off to now too
// (never back): a token an instance issued while the user was disabled,
// before it had reloaded, dies with the enable rather than living on. No
// token is live while a user is disabled, so none that was is lost.
//
// A user already enabled is left as it is, their tokens alive.
func Enable(ctx context.Context, d Directory, username string) error {
	return Update(ctx, d, username, func(u *User) error {
		if u.Disabled {
			enable(u)
		}
		return nil
	})
}

func enable(u *User) {
	// Disable emptied the personal access tokens; an older file put back
	// while the user was disabled may hold some, dead all the same.
	u.Disabled, u.TokensAfter, u.AccessTokens = false, Later(u.TokensAfter, time.Now().UTC()), nil
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
	return Update(ctx, d, username, func(u *User) error {
		u.PasswordHash, u.TokensAfter, u.AccessTokens, u.ResetLink = hash, time.Now().UTC(), nil, nil
		u.PasswordGeneration++
		return nil
	})
}

// Logout ends every token of the user named username issued until now, by
// moving the cut-off to now, and their pending reset link: an operator who
// ends a user's sessions for fear of a stolen account must not leave a
// way back in (a users file ends it with the cut-off already). The
// password and second factors stay, so a login afterwards gets a live
// token.
func Logout(ctx context.Context, d Directory, username string) error {
	return Update(ctx, d, username, func(u *User) error {
		u.TokensAfter, u.ResetLink = time.Now().UTC(), nil
		return nil
	})
}

// Unlock lifts the lockouts of the user named username: the failed logins
// (FailuresAfter) and the wrong second-factor codes (CodesAfter) before
// now no longer count. It ends no token.
func Unlock(ctx context.Context, d Directory, username string) error {
	return Update(ctx, d, username, func(u *User) error {
		at := time.Now().UTC()
		u.FailuresAfter, u.CodesAfter = at, at
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
	err = Update(ctx, d, username, func(u *User) error {
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

// ErrInvalid wraps why Create or Edit refused a user as given: a username
// outside the rule, a profile field over its limits. Its text names the
// field, never a password.
var ErrInvalid = errors.New("invalid user")

// A NewUser is what Create makes a user of.
type NewUser struct {
	Username string // as stored: in NFKC form (NormalizeUsername) and within the rule
	// PasswordHash is the password's hash under the hash policy; "" for
	// none: the user logs in only once a reset link has set one.
	PasswordHash string
	Name, Email  string
	Groups       []string
	Admin        bool
}

// Check returns why Create would refuse nu's username or profile, an
// error wrapping ErrInvalid, or nil: what a caller checks before it
// pays for hashing the password.
func (nu NewUser) Check() error {
	if err := CheckUsername(nu.Username); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := CheckProfile(nu.Name, nu.Email, nu.Groups); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// unusablePassword is the hash of a user created without a password:
// Django's unusable form, which no password matches.
const unusablePassword = "!"

// Create adds the user nu describes to d: an error wrapping ErrInvalid
// for a username or profile the rules refuse, ErrExists for a taken
// name. Its cut-off is now: the tokens of an earlier user of that name
// stay dead.
func Create(ctx context.Context, d Directory, nu NewUser) (User, error) {
	if err := nu.Check(); err != nil {
		return User{}, err
	}
	u := User{Username: nu.Username, PasswordHash: nu.PasswordHash, Name: nu.Name, Email: nu.Email,
		Groups: slices.Clone(nu.Groups), Admin: nu.Admin, TokensAfter: time.Now().UTC()}
	if u.PasswordHash == "" {
		u.PasswordHash = unusablePassword
	}
	if u.Groups == nil {
		u.Groups = []string{}
	}
	if err := d.Add(ctx, u); err != nil {
		return User{}, err
	}
	return u, nil
}

// A Change is what Edit changes of a user; a nil field is left as it is.
type Change struct {
	Name, Email     *string
	Groups          *[]string
	Admin, Disabled *bool
	// KeepAdmin refuses, with ErrLastAdmin, a change that would leave no
	// enabled admin (KeepsAnAdmin): the admin API's rule, decided inside
	// the write (the write option KeepAnAdmin). The CLI, whose operator
	// can always add an admin again, does without it.
	KeepAdmin bool
}

// SetAdmin makes u an admin, or not: every change of the flag goes
// through it (Edit, an import's update). A personal access token keeps the
// admin scope only while its user is an admin throughout: demoting u ends
// those u holds, so that no token keeps a power its user lost, to come
// back with a later promotion; and promoting u ends any a user who was not
// an admin still holds (one a demotion of an earlier version left
// behind), which only an admin could have made.
func SetAdmin(u *User, admin bool) {
	if !u.Admin || !admin {
		if slices.ContainsFunc(u.AccessTokens, func(t AccessToken) bool { return t.Has(ScopeAdmin) }) {
			// A copy: u's slice may be shared with the caller's (a dry run's).
			u.AccessTokens = slices.DeleteFunc(slices.Clone(u.AccessTokens), func(t AccessToken) bool { return t.Has(ScopeAdmin) })
		}
	}
	u.Admin = admin
}

// EnabledAdmin reports whether u, nil for a user deleted, is an admin who
// is not disabled: one who can use the admin API.
func EnabledAdmin(u *User) bool { return u != nil && u.Admin && !u.Disabled }

// KeepsAnAdmin is the last-admin rule (API.md, "Admin API": at least one
// enabled admin always remains): it returns an error wrapping
// ErrLastAdmin when a change of one user from was to is (nil: deleted)
// takes an enabled admin away and others, the enabled admins besides that
// user as the same write finds them, returns 0; the error of others when
// it fails; nil otherwise. others is called only when the change takes an
// enabled admin away. The directories decide it inside their write
// (the write option KeepAnAdmin), never from a read
// before it: two admins demoting each other at once would each find the
// other still there.
func KeepsAnAdmin(was, is *User, others func() (int, error)) error {
	if !EnabledAdmin(was) || EnabledAdmin(is) {
		return nil
	}
	n, err := others()
	switch {
	case err != nil:
		return err
	case n == 0:
		return fmt.Errorf("user %q: %w", was.Username, ErrLastAdmin)
	}
	return nil
}

// Edit applies c to the user named username and returns the user as
// changed. Disabling ends every token of the user as Disable does, and
// enabling is Enable; each only when it changes the user. Demoting an
// admin ends their personal access tokens with the admin scope: no token
// keeps a power its user lost, to come back with a later promotion.
// Sessions live on; each request judges them by the user as they are.
func Edit(ctx context.Context, d Directory, username string, c Change) (User, error) {
	var out User
	var opts []WriteOption
	if c.KeepAdmin {
		opts = append(opts, KeepAnAdmin)
	}
	err := Update(ctx, d, username, func(u *User) error {
		name, email, groups := u.Name, u.Email, u.Groups
		if c.Name != nil {
			name = *c.Name
		}
		if c.Email != nil {
			email = *c.Email
		}
		if c.Groups != nil {
			groups = slices.Clone(*c.Groups)
			if groups == nil {
				groups = []string{}
			}
		}
		if err := CheckProfile(name, email, groups); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		u.Name, u.Email, u.Groups = name, email, groups
		if c.Admin != nil {
			SetAdmin(u, *c.Admin)
		}
		switch {
		case c.Disabled == nil || *c.Disabled == u.Disabled:
		case *c.Disabled:
			disable(u)
		default:
			enable(u)
		}
		out = *u
		return nil
	}, opts...)
	return out, err
}
