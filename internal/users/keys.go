package users

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
)

// A KeyKind says what a Key's Value is.
type KeyKind uint8

// The kinds of Key a Directory finds users by (Directory.LookupKey).
// Each is an index in every backend, never a method of Directory. The
// next kinds, for passkeys, are a WebAuthn credential id (a user's
// passkey, one user) and a user handle (the random id a passkey returns
// for its user, one user); until a backend indexes a kind, LookupKey of
// it is an error (ErrKeyKind).
const (
	// KeyUsername: Value is a username, as stored; at most one user.
	KeyUsername KeyKind = iota + 1
	// KeyAccessToken: Value is the 32 bytes of a personal access
	// token's SHA-256 (AccessTokenKey); at most one user, as a digest is
	// one token's.
	KeyAccessToken
	// KeyEmail: Value is an email address, its ASCII letters matched in
	// either case (SameEmail, as Filter.Email); "" finds no one. Any
	// number of users, disabled ones included: Django does not make
	// addresses unique.
	KeyEmail
)

// ErrKeyKind: a Key of a kind the directory does not index.
var ErrKeyKind = errors.New("no index of that kind of key")

// A Key is what LookupKey finds users by: a value of a kind.
type Key struct {
	Kind  KeyKind
	Value string
}

// UsernameKey returns the key of the user named username.
func UsernameKey(username string) Key { return Key{Kind: KeyUsername, Value: username} }

// AccessTokenKey returns the key of the personal access token whose
// SHA-256 is digest.
func AccessTokenKey(digest [sha256.Size]byte) Key {
	return Key{Kind: KeyAccessToken, Value: string(digest[:])}
}

// EmailKey returns the key of the users whose email address is email.
func EmailKey(email string) Key { return Key{Kind: KeyEmail, Value: email} }

// A Match is a user LookupKey or RecheckKey found, as one copy of the
// directory holds them: their Account and their personal access tokens,
// expired ones included (of a KeyAccessToken's match, a backend may give
// the token found alone). Both are shared with the directory: the caller
// must not change them.
type Match struct {
	Account      *Account
	AccessTokens []AccessToken
}

// AccessToken returns m's personal access token whose SHA-256 is digest,
// or nil: a comparison of the digests' hex, with no allocation.
func (m *Match) AccessToken(digest [sha256.Size]byte) *AccessToken {
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], digest[:])
	for i := range m.AccessTokens {
		if m.AccessTokens[i].Digest == string(h[:]) {
			return &m.AccessTokens[i]
		}
	}
	return nil
}

// LookupAccessToken returns the personal access token whose SHA-256 is
// digest, with its user, as LookupKey finds them: ErrNotFound, or
// ErrNoAccessTokenAtSource, when there is none. It allocates little: a
// token check on the hot path asks it.
func LookupAccessToken(ctx context.Context, d Directory, digest [sha256.Size]byte) (*Account, *AccessToken, error) {
	found, err := d.LookupKey(ctx, AccessTokenKey(digest))
	return tokenOf(found, err, digest)
}

// RecheckAccessToken is LookupAccessToken as RecheckKey finds them: at a
// read of the backing that began after the call.
func RecheckAccessToken(ctx context.Context, d Directory, digest [sha256.Size]byte) (*Account, *AccessToken, error) {
	found, err := d.RecheckKey(ctx, AccessTokenKey(digest))
	return tokenOf(found, err, digest)
}

// tokenOf returns the token of digest in found, LookupKey's answer with err.
func tokenOf(found []Match, err error, digest [sha256.Size]byte) (*Account, *AccessToken, error) {
	if err != nil {
		return nil, nil, err
	}
	for i := range found {
		if t := found[i].AccessToken(digest); t != nil {
			return found[i].Account, t, nil
		}
	}
	return nil, nil, ErrNotFound // never: the index and the record are of one copy
}

// AccessTokens returns the personal access tokens d holds for the user
// named username (User.AccessTokens, expired ones included), as the
// caller's own copy, never from a copy older than Lookup's: ErrNotFound
// for no such user.
func AccessTokens(ctx context.Context, d Directory, username string) ([]AccessToken, error) {
	found, err := d.LookupKey(ctx, UsernameKey(username))
	if err != nil {
		return nil, err
	}
	if len(found) == 0 || len(found[0].AccessTokens) == 0 {
		return nil, nil
	}
	list := slices.Clone(found[0].AccessTokens)
	for i := range list {
		list[i].Scopes = slices.Clone(list[i].Scopes)
	}
	return list, nil
}

// UsersByEmail returns the names of the enabled users of d whose email
// address is email, ignoring the case of its ASCII letters (as Django's
// password reset finds them; Filter.Email), in byte order: one LookupKey
// of KeyEmail, which each backend answers from an index.
func UsersByEmail(ctx context.Context, d Directory, email string) ([]string, error) {
	if email == "" {
		return nil, nil // no address: not every user without one
	}
	found, err := d.LookupKey(ctx, EmailKey(email))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	var names []string
	for i := range found {
		if !found[i].Account.Disabled() {
			names = append(names, found[i].Account.Username())
		}
	}
	slices.Sort(names)
	return names, nil
}

// CompareEmails compares a and b as SameEmail matches them: byte by
// byte, ASCII letters in lower case. It is the order of an index of
// email addresses.
func CompareEmails(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if x, y := lowerASCII(a[i]), lowerASCII(b[i]); x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// Email returns u's email address, as stored.
func (u *Account) Email() string { return u.email }
