package users

import (
	"context"
	"strings"
	"time"

	"authsvc/internal/password"
)

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

// AccountParts are what MakeAccount makes an Account of: a user's fields
// as a backend reads them, its text as bytes that MakeAccount copies (they
// may be the reader's buffer), its groups as the Account is to keep them
// (shared by every user of the same groups), and its second factors only
// to note whether it has one.
type AccountParts struct {
	Username, PasswordHash, Name, Email []byte
	Groups                              []string
	Admin, Disabled                     bool
	TokensAfter, FailuresAfter          time.Time
	CodesAfter                          time.Time
	PasswordGeneration                  uint64
	MFA                                 *Factors
}

// MakeAccount returns the Account p makes, for a backend that makes many
// at a time (the users file's index, as it reads the file): was itself
// when was is what p makes, so that a reload keeps the Account of every
// user whose entry did not change; otherwise a new Account, its text in
// one allocation, sharing was's username when was is not nil. Its hash is
// parsed unless it is was's, parsed when was was made. The error is the
// hash's (password.ParseHash's), returned beside the Account, which is
// made all the same: the caller reports it in the order of its own checks.
func MakeAccount(p *AccountParts, was *Account) (*Account, error) {
	if was != nil && was.is(p) {
		return was, nil
	}
	var u *Account
	if was != nil {
		u = makeAccount(p, was.username, was.work)
		if u.storedHash == was.storedHash { // a known hash was checked when it was loaded
			return u, nil
		}
	} else {
		u = makeAccount(p, "", 0)
	}
	hash, err := password.ParseHash(u.storedHash)
	if err != nil {
		return u, err
	}
	u.work = 0
	if hash.Usable() {
		u.work = float32(hash.Work())
	}
	return u, nil
}

// Work returns the work of u's hash (password.Hash.Work) when it is
// usable, else 0: what a directory finds its slowest hash by without
// parsing every hash again.
func (u *Account) Work() float32 { return u.work }

// is reports whether u is what p makes, p's groups the very slice u has.
func (u *Account) is(p *AccountParts) bool {
	return u.storedHash == string(p.PasswordHash) && u.name == string(p.Name) && u.email == string(p.Email) &&
		u.flags == makeFlags(p.Admin, p.Disabled, p.MFA.has()) && u.cutoff == packCutoff(p.TokensAfter) &&
		u.failuresAfter == packCutoff(p.FailuresAfter) && u.codesAfter == packCutoff(p.CodesAfter) &&
		u.generation == uint16(p.PasswordGeneration) &&
		len(u.groups) == len(p.Groups) && (len(p.Groups) == 0 || &u.groups[0] == &p.Groups[0])
}

// makeAccount returns the Account of p, its strings in one allocation.
// username, when not "", is the name to share (the replaced index's);
// work is its hash's.
func makeAccount(p *AccountParts, username string, work float32) *Account {
	var sb strings.Builder
	sb.Grow(len(p.PasswordHash) + len(p.Name) + len(p.Email) + len(p.Username))
	sb.Write(p.PasswordHash)
	sb.Write(p.Name)
	sb.Write(p.Email)
	if username == "" {
		sb.Write(p.Username)
	}
	s := sb.String()
	a, c, d := len(p.PasswordHash), len(p.PasswordHash)+len(p.Name), len(p.PasswordHash)+len(p.Name)+len(p.Email)
	if username == "" {
		username = s[d:]
	}
	return &Account{
		username:      username,
		name:          s[a:c],
		email:         s[c:d],
		groups:        p.Groups,
		storedHash:    s[:a],
		cutoff:        packCutoff(p.TokensAfter),
		failuresAfter: packCutoff(p.FailuresAfter),
		codesAfter:    packCutoff(p.CodesAfter),
		flags:         makeFlags(p.Admin, p.Disabled, p.MFA.has()),
		generation:    uint16(p.PasswordGeneration),
		work:          work,
	}
}
