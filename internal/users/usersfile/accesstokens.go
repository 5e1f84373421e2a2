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

// A tokenRef is where an index finds a personal access token: the name of
// its user (the user's Account's own string) and the token, in the slice
// the index keeps for that user.
type tokenRef struct {
	username string
	token    *users.AccessToken
}

// tokenDigests finds personal access tokens by digest.
type tokenDigests map[[sha256.Size]byte]tokenRef

// add adds the tokens of list, those of entry i, the user named username,
// to *m, made when first needed. A digest that is already another token's
// is an error naming the entry: the token would be two users', or one
// user's twice, and no one can tell which is meant.
func (m *tokenDigests) add(i int, username string, list []users.AccessToken) error {
	for k := range list {
		d, ok := list[k].DigestBytes()
		if !ok {
			return fmt.Errorf("%s: access_tokens[%d]: digest: want the 64 hex characters of a SHA-256", entryAt(i, username), k)
		}
		if was, dup := (*m)[d]; dup {
			return fmt.Errorf("%s: access_tokens[%d]: digest: also that of a token of %q", entryAt(i, username), k, was.username)
		}
		if *m == nil {
			*m = make(tokenDigests)
		}
		(*m)[d] = tokenRef{username: username, token: &list[k]}
	}
	return nil
}

// remove removes the tokens of list from m.
func (m tokenDigests) remove(list []users.AccessToken) {
	for k := range list {
		if d, ok := list[k].DigestBytes(); ok {
			delete(m, d)
		}
	}
}

// putAccessTokens indexes list, the personal access tokens of entry i, the
// user named username, in place of those of an earlier entry of the name.
// The index keeps list itself: every decoder makes it afresh.
func (x *userIndex) putAccessTokens(i int, username string, list []users.AccessToken) error {
	if was := x.accessTokens[username]; was != nil {
		x.byDigest.remove(was)
		delete(x.accessTokens, username)
	}
	if len(list) == 0 {
		return nil
	}
	if err := x.byDigest.add(i, username, list); err != nil {
		return err
	}
	if x.accessTokens == nil {
		x.accessTokens = make(map[string][]users.AccessToken)
	}
	x.accessTokens[username] = list
	return nil
}

// accessToken returns the token of digest and its user, or ErrNotFound:
// two map lookups, no allocation.
func (x *userIndex) accessToken(digest [sha256.Size]byte) (*users.Account, *users.AccessToken, error) {
	ref, ok := x.byDigest[digest]
	if !ok {
		return nil, nil, users.ErrNotFound
	}
	u := x.byName[ref.username]
	if u == nil { // never: both maps are of one load
		return nil, nil, users.ErrNotFound
	}
	return u, ref.token, nil
}

// AccessToken answers from the file as last loaded, as Lookup does.
func (s *Directory) AccessToken(_ context.Context, digest [sha256.Size]byte) (*users.Account, *users.AccessToken, error) {
	return s.index().accessToken(digest)
}

// RecheckAccessToken loads the file again when it has changed since it
// was last loaded or refused, then answers as AccessToken: see Recheck.
func (s *Directory) RecheckAccessToken(_ context.Context, digest [sha256.Size]byte) (*users.Account, *users.AccessToken, error) {
	if err := s.recheck(); err != nil {
		return nil, nil, err
	}
	return s.index().accessToken(digest)
}

// AccessTokens answers from the file as last loaded, as Lookup does: the
// directory's own writes reload it before they return.
func (s *Directory) AccessTokens(_ context.Context, username string) ([]users.AccessToken, error) {
	x := s.index()
	if x.byName[username] == nil {
		return nil, users.ErrNotFound
	}
	return cloneAccessTokens(x.accessTokens[username]), nil
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
