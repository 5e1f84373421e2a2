package usersfile

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"

	"authsvc/internal/users"
)

// Personal access tokens live in their user's entry ("access_tokens",
// digests only). A load indexes them by digest (userIndex.byDigest), so
// that a request bearing one costs a map lookup and its user's Lookup, as
// a session costs; users without tokens are in neither map, and a file
// without any keeps no map at all.
//
// What ends a token is a write of its user's entry: revoke removes it;
// Disable, Enable and SetPassword empty the list; Delete drops the entry.
// None of that may be undone by an older users file copied back over the
// current one, so each such write also leaves a record in the cut-offs
// file (cutoffs.go), which every load applies: a deletion's tombstone
// hides the deleted user's entry, tokens and all; a disable's keeps the
// user disabled until an enable, which empties the list; and every write
// that removes live tokens from a user (a revoke, a password set by an
// operator, a disable) records their ids ("event": "revoke"): a token of
// those ids loads as absent from whatever file. What is left: a users file edited
// by hand, or written by a tool other than authsvc, records nothing.

// A tokenRef is what an index finds by a personal access token's
// digest: the name of its user and, in an index (not a check of a file),
// the user as a Match of one, which every token of the user shares, so
// that LookupKey answers with it as it is.
type tokenRef struct {
	username string
	match    []users.Match
}

// tokenDigests finds personal access tokens by digest.
type tokenDigests map[[sha256.Size]byte]tokenRef

// add adds the tokens of list, those of entry i, the user named username,
// to *x, made when first needed, each found as match. A digest that is
// already another token's is an error naming the entry: the token would
// be two users', or one user's twice, and no one can tell which is meant.
func (x *tokenDigests) add(i int, username string, list []users.AccessToken, match []users.Match) error {
	for k := range list {
		d, ok := list[k].DigestBytes()
		if !ok {
			return fmt.Errorf("%s: access_tokens[%d]: digest: want the 64 hex characters of a SHA-256", entryAt(i, username), k)
		}
		if was, dup := (*x)[d]; dup {
			return fmt.Errorf("%s: access_tokens[%d]: digest: also that of a token of %q", entryAt(i, username), k, was.username)
		}
		if *x == nil {
			*x = make(tokenDigests)
		}
		(*x)[d] = tokenRef{username: username, match: match}
	}
	return nil
}

// remove removes the tokens of list from x.
func (x tokenDigests) remove(list []users.AccessToken) {
	for k := range list {
		if d, ok := list[k].DigestBytes(); ok {
			delete(x, d)
		}
	}
}

// putAccessTokens indexes list, the personal access tokens of entry i, the
// user u, in place of those of an earlier entry of the name. The index
// keeps list itself: every decoder makes it afresh.
func (x *userIndex) putAccessTokens(i int, u *users.Account, list []users.AccessToken) error {
	username := u.Username()
	if was := x.accessTokens[username]; was != nil {
		x.byDigest.remove(was)
		delete(x.accessTokens, username)
	}
	if len(list) == 0 {
		return nil
	}
	if err := x.byDigest.add(i, username, list, []users.Match{{Account: u, AccessTokens: list}}); err != nil {
		return err
	}
	if x.accessTokens == nil {
		x.accessTokens = make(map[string][]users.AccessToken)
	}
	x.accessTokens[username] = list
	return nil
}

// LookupKey answers from the file as last loaded, as Lookup does: a
// personal access token's digest from its index with no allocation, an
// email address from the index of addresses (emails.go).
func (s *Directory) LookupKey(_ context.Context, k users.Key) ([]users.Match, error) {
	return s.index().lookupKey(k)
}

// RecheckKey loads the file again when it has changed since it was last
// loaded or refused, then answers as LookupKey: see Recheck.
func (s *Directory) RecheckKey(_ context.Context, k users.Key) ([]users.Match, error) {
	if err := s.recheck(); err != nil {
		return nil, err
	}
	return s.index().lookupKey(k)
}

// lookupKey returns the users of x that k finds, or ErrNotFound.
func (x *userIndex) lookupKey(k users.Key) ([]users.Match, error) {
	switch k.Kind {
	case users.KeyAccessToken:
		if len(k.Value) != sha256.Size {
			return nil, users.ErrNotFound
		}
		var d [sha256.Size]byte
		copy(d[:], k.Value)
		if ref, ok := x.byDigest[d]; ok {
			return ref.match, nil
		}
		return nil, users.ErrNotFound
	case users.KeyUsername:
		u := x.byName[k.Value]
		if u == nil {
			return nil, users.ErrNotFound
		}
		return []users.Match{{Account: u, AccessTokens: x.accessTokens[k.Value]}}, nil
	case users.KeyEmail:
		return x.emails().find(k.Value, x.accessTokens)
	}
	return nil, fmt.Errorf("key kind %d: %w", k.Kind, users.ErrKeyKind)
}

// cloneAccessTokens returns a deep copy of list; nil for none.
func cloneAccessTokens(list []users.AccessToken) []users.AccessToken {
	if len(list) == 0 {
		return nil
	}
	c := slices.Clone(list)
	for k := range c {
		c[k].Scopes = slices.Clone(c[k].Scopes)
	}
	return c
}

// cloneResetLink returns a copy of l; nil for nil.
func cloneResetLink(l *users.ResetLink) *users.ResetLink {
	if l == nil {
		return nil
	}
	c := *l
	return &c
}
