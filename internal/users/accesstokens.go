package users

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"authsvc/internal/tokens"
)

// The scopes a personal access token may carry (API.md, "Personal access
// tokens"): each names the endpoints it opens, and nothing else is open
// to such a token.
const (
	ScopeInfo       = "info"       // GET /api/auth/info
	ScopeIntrospect = "introspect" // POST /api/auth/introspect/
	ScopeAdmin      = "admin"      // the admin API; admins only
)

// Scopes lists every scope, in API.md's order.
var Scopes = []string{ScopeInfo, ScopeIntrospect, ScopeAdmin}

// Limits of a user's personal access tokens.
const (
	// DefaultAccessTokenTTL is a token's life when its maker names no
	// expiry (API.md: 30 days), or the server's maximum if shorter.
	DefaultAccessTokenTTL = 30 * 24 * time.Hour
	MaxAccessTokenName    = 100 // characters
	// MaxAccessTokens bounds a user's live tokens: every reload and write
	// of the user carries them.
	MaxAccessTokens = 100
)

// Errors of the personal access token operations; each wraps the
// sentinel a caller maps to a status.
var (
	// ErrNoAccessToken: no live token of that id (revoked, expired, never
	// one of the user's).
	ErrNoAccessToken = fmt.Errorf("no such personal access token: %w", ErrNotFound)
	// ErrNoAccessTokenAtSource: LookupKey of a KeyAccessToken read the
	// backing itself, in a read begun after it was called, and found no
	// token of the digest, or such a read found none less than a second
	// ago and no change has reached the instance since: RecheckKey would say the same
	// (but for a change on its way), and AccessTokenUser does not ask it
	// (a made-up token costs one read, not two; repeated, one a second).
	ErrNoAccessTokenAtSource = fmt.Errorf("no personal access token of that digest in the backing: %w", ErrNotFound)
	// ErrAccessTokenName: the user has a live token of that name.
	ErrAccessTokenName = errors.New("a personal access token of that name exists")
	// ErrTooManyAccessTokens: the user holds MaxAccessTokens live tokens.
	ErrTooManyAccessTokens = fmt.Errorf("at most %d personal access tokens per user", MaxAccessTokens)
	// ErrDisabled: the operation needs an enabled user.
	ErrDisabled = errors.New("user is disabled")
	// ErrAdminScope: a token of scope admin for a user who is not an admin.
	ErrAdminScope = errors.New("only an admin's token may have the admin scope")
)

// An AccessToken is a personal access token as its user's record keeps
// it: the token's SHA-256, never the token.
type AccessToken struct {
	ID   string `json:"id"`   // names the token to its owner; random, unrelated to the token
	Name string `json:"name"` // the owner's name for it, unique among the user's live tokens
	// Digest is the hex SHA-256 of the token (tokens.PATDigestOf).
	Digest string `json:"digest"`
	// Prefix is the token's first tokens.PATShownPrefix characters, for
	// recognising it in a listing, never for finding it.
	Prefix     string    `json:"prefix"`
	Scopes     []string  `json:"scopes"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"` // never zero: a personal access token always expires
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
}

// MintAccessToken makes a personal access token named name, of scopes,
// created at createdAt and expiring at expiresAt: the token, shown once,
// and its record, which holds its SHA-256, never the token, and a fresh
// random id (16 lowercase hex characters, unrelated to the token).
func MintAccessToken(name string, scopes []string, createdAt, expiresAt time.Time) (string, AccessToken) {
	token, digest := tokens.NewPAT()
	var id [8]byte
	rand.Read(id[:]) // never returns an error; crashes the program if the OS cannot supply randomness
	return token, AccessToken{ID: hex.EncodeToString(id[:]), Name: name, Digest: hex.EncodeToString(digest[:]),
		Prefix: token[:tokens.PATShownPrefix], Scopes: scopes, CreatedAt: createdAt.UTC(), ExpiresAt: expiresAt.UTC()}
}

// Has reports whether t carries scope.
func (t *AccessToken) Has(scope string) bool { return slices.Contains(t.Scopes, scope) }

// Live reports whether t has not expired at now.
func (t *AccessToken) Live(now time.Time) bool { return now.Before(t.ExpiresAt) }

// DigestBytes returns t.Digest as bytes; ok is false when it is not 64
// hex characters (CheckAccessTokens refuses such a record).
func (t *AccessToken) DigestBytes() (d [sha256.Size]byte, ok bool) {
	if len(t.Digest) != 2*sha256.Size {
		return d, false
	}
	_, err := hex.Decode(d[:], []byte(t.Digest))
	return d, err == nil
}

// CheckAccessTokenName returns why name cannot name a personal access
// token, or nil.
func CheckAccessTokenName(name string) error {
	if name == "" {
		return errors.New("empty")
	}
	if err := checkText(name, MaxAccessTokenName, false); err != nil {
		return err
	}
	return nil
}

// CheckScopes returns why scopes cannot be a token's scopes, or nil: each
// one of Scopes, none twice, at least one.
func CheckScopes(scopes []string) error {
	if len(scopes) == 0 {
		return errors.New("no scope")
	}
	for i, s := range scopes {
		if !slices.Contains(Scopes, s) {
			return fmt.Errorf("unknown scope %q; want one of info, introspect, admin", s)
		}
		if slices.Contains(scopes[:i], s) {
			return fmt.Errorf("scope %q repeated", s)
		}
	}
	return nil
}

// CheckAccessTokens returns why list cannot be a user's stored tokens, or
// nil: what a load checks of each.
func CheckAccessTokens(list []AccessToken) error {
	ids := make(map[string]bool, len(list))
	for i := range list {
		t := &list[i]
		switch _, ok := t.DigestBytes(); {
		case t.ID == "" || len(t.ID) > 64 || !utf8.ValidString(t.ID):
			return fmt.Errorf("access_tokens[%d]: id: want 1-64 characters", i)
		case ids[t.ID]:
			return fmt.Errorf("access_tokens[%d]: id %q repeated", i, t.ID)
		case !ok:
			return fmt.Errorf("access_tokens[%d]: digest: want the 64 hex characters of a SHA-256", i)
		case t.ExpiresAt.IsZero():
			return fmt.Errorf("access_tokens[%d]: expires_at: missing; a personal access token always expires", i)
		}
		ids[t.ID] = true
		if err := CheckAccessTokenName(t.Name); err != nil {
			return fmt.Errorf("access_tokens[%d]: name: %v", i, err)
		}
		if err := CheckScopes(t.Scopes); err != nil {
			return fmt.Errorf("access_tokens[%d]: scopes: %v", i, err)
		}
	}
	return nil
}

// LiveAccessTokens returns the tokens of list not expired at now, newest
// first, as the caller's own copies.
func LiveAccessTokens(list []AccessToken, now time.Time) []AccessToken {
	live := make([]AccessToken, 0, len(list))
	for _, t := range list {
		if t.Live(now) {
			t.Scopes = slices.Clone(t.Scopes)
			live = append(live, t)
		}
	}
	slices.SortStableFunc(live, func(a, b AccessToken) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return live
}

// CreateAccessToken adds t to the tokens of the user named username, an
// enabled user: ErrDisabled for a disabled one. Expired tokens are
// dropped on the way; a live one of t's name is ErrAccessTokenName, and
// a user with MaxAccessTokens live ones, ErrTooManyAccessTokens. The
// caller checks t's name, scopes and expiry (and that only an admin asks
// for ScopeAdmin) before: this checks what only the user's record, under
// the directory's lock, can say.
func CreateAccessToken(ctx context.Context, d Directory, username string, t AccessToken) error {
	return Update(ctx, d, username, func(u *User) error {
		if u.Disabled {
			return ErrDisabled
		}
		if t.ScopesNeedAdmin() && !u.Admin {
			return ErrAdminScope
		}
		live := u.AccessTokens[:0:0]
		for _, x := range u.AccessTokens {
			if !x.Live(t.CreatedAt) {
				continue
			}
			if x.Name == t.Name {
				return ErrAccessTokenName
			}
			live = append(live, x)
		}
		if len(live) >= MaxAccessTokens {
			return ErrTooManyAccessTokens
		}
		u.AccessTokens = append(live, t)
		return nil
	})
}

// ScopesNeedAdmin reports whether t's scopes are for admins only.
func (t *AccessToken) ScopesNeedAdmin() bool { return t.Has(ScopeAdmin) }

// RevokeAccessToken removes the live token id of the user named username
// and returns it: ErrNoAccessToken when the user has no live token of
// that id at now. The token dies with the write: nothing keeps a revoked
// token, so nothing can bring it back.
func RevokeAccessToken(ctx context.Context, d Directory, username, id string, now time.Time) (AccessToken, error) {
	var gone AccessToken
	err := Update(ctx, d, username, func(u *User) error {
		i := slices.IndexFunc(u.AccessTokens, func(t AccessToken) bool { return t.ID == id && t.Live(now) })
		if i < 0 {
			return ErrNoAccessToken
		}
		gone = u.AccessTokens[i]
		u.AccessTokens = slices.Delete(slices.Clone(u.AccessTokens), i, i+1)
		return nil
	})
	return gone, err
}

// TouchAccessTokens records uses of personal access tokens: for each
// username, each token id's last use. A use moves LastUsedAt forward,
// never back, and a token no longer in the record (revoked, its user's
// tokens ended) stays gone. Users that are gone are skipped.
func TouchAccessTokens(ctx context.Context, d Directory, uses map[string]map[string]time.Time) error {
	changes := make(map[string]func(*User) error, len(uses))
	for name, byID := range uses {
		changes[name] = func(u *User) error {
			moved := false
			list := slices.Clone(u.AccessTokens)
			for i := range list {
				if at, ok := byID[list[i].ID]; ok && at.After(list[i].LastUsedAt) {
					list[i].LastUsedAt, moved = at.UTC(), true
				}
			}
			if !moved {
				return errUnchanged
			}
			u.AccessTokens = list
			return nil
		}
	}
	failed, err := d.UpdateAll(ctx, changes)
	if err != nil {
		return err
	}
	for _, e := range failed {
		if !errors.Is(e, errUnchanged) && !errors.Is(e, ErrNotFound) {
			return e
		}
	}
	return nil
}

// errUnchanged: a change that would write nothing.
var errUnchanged = errors.New("unchanged")

// FindAccessToken returns the name of the user in list holding a live
// token of id at now: ErrNoAccessToken when none does.
func FindAccessToken(list []User, id string, now time.Time) (string, error) {
	for i := range list {
		for _, t := range list[i].AccessTokens {
			if t.ID == id && t.Live(now) {
				return list[i].Username, nil
			}
		}
	}
	return "", ErrNoAccessToken
}

// AccessTokenUser returns the user and the live personal access token
// whose digest is digest at now, or nil when there is none: never made,
// revoked, expired, or its user disabled or deleted. As SessionUser does,
// it takes a token for dead only on a copy of the directory read after
// the call began (RecheckKey): Lookup's copy may be older than the token
// (made on another instance a moment ago). A live token costs one
// LookupKey.
//
// An error means the directory cannot say: the caller answers 503.
func AccessTokenUser(ctx context.Context, d Directory, digest [sha256.Size]byte, now time.Time) (*Account, *AccessToken, error) {
	u, t, err := LookupAccessToken(ctx, d, digest)
	switch {
	case err == nil && t.Live(now) && !u.Disabled():
		return u, t, nil
	case err == nil && !t.Live(now):
		return nil, nil, nil // expiry is not undone by a later read
	case errors.Is(err, ErrNoAccessTokenAtSource):
		return nil, nil, nil // as fresh as a recheck
	case err != nil && !errors.Is(err, ErrNotFound):
		return nil, nil, err
	}
	u, t, err = RecheckAccessToken(ctx, d, digest)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	case !t.Live(now) || u.Disabled():
		return nil, nil, nil
	}
	return u, t, nil
}
