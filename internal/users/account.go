package users

import "context"

// SamePassword reports whether x, the user as a write reads it under the
// directory's lock, still holds the password that u, as read for a check
// of it, held: what a write conditional on that check (a password change
// over current_password) compares. Not the hash's bytes alone: a rehash
// on login writes another hash of the same password, and a password
// change that raced one was refused. So either the hash is the one u
// held, or the password generation, which every password change moves
// and a rehash keeps, is u's, and so is the cut-off, which no user added
// again under a deleted user's name shares with it (its cut-off is no
// earlier than the deletion), though its generation may be the same. A
// disabled x holds no password a check could have passed.
//
// The generation is compared in the 16 bits an Account keeps: 65,536
// changes between a check and its write are not possible.
func (u *Account) SamePassword(x *User) bool {
	switch {
	case x.Disabled:
		return false
	case x.PasswordHash == u.storedHash:
		return true
	}
	return uint16(x.PasswordGeneration) == u.generation && packCutoff(x.TokensAfter) == u.cutoff
}

// A ConfirmingReader is a Reader whose Lookup may answer from a copy kept
// through an outage of its backing (PostgreSQL's: token checks go on from
// the last known state for up to 5 s), and which can also answer only
// from its backing as it is now.
type ConfirmingReader interface {
	Reader
	// LookupConfirmed is Lookup answered from the backing itself, now:
	// an error wrapping ErrUnavailable when it cannot be reached, never
	// a kept copy.
	LookupConfirmed(ctx context.Context, username string) (*Account, error)
}

// LookupConfirmed returns the user named username as d's backing has them
// now (ConfirmingReader), for a password check: API.md answers login and
// password change 503 while PostgreSQL cannot be reached, and a verdict
// from a kept copy would also tell who logged in recently. A Reader whose
// Lookup never answers from such a copy (a users file, in memory) is
// asked its Lookup.
func LookupConfirmed(ctx context.Context, d Reader, username string) (*Account, error) {
	if c, ok := d.(ConfirmingReader); ok {
		return c.LookupConfirmed(ctx, username)
	}
	return d.Lookup(ctx, username)
}
