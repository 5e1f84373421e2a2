package users

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
