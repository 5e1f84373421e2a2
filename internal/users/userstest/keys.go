package userstest

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"testing"
	"time"

	"authsvc/internal/users"
)

// runKeys checks LookupKey and RecheckKey (users.Directory) for every kind
// of key once: found, not found, found by RecheckKey on a handle that has
// not reloaded since another handle's change, and gone once the change
// that ends it is written.
func runKeys(t *testing.T, fx fixture) {
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, fx fixture)
	}{
		{"by username", testKeyUsername},
		{"by a personal access token's digest", testKeyAccessToken},
		{"by email address", testKeyEmail},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, fx) })
	}
}

// names returns the usernames of found, in its order.
func names(found []users.Match) []string {
	var list []string
	for _, m := range found {
		list = append(list, m.Account.Username())
	}
	return list
}

// wantKey checks that look finds the users named want, in that order (none:
// ErrNotFound).
func wantKey(t *testing.T, what string, look func(context.Context, users.Key) ([]users.Match, error), k users.Key, want ...string) []users.Match {
	t.Helper()
	found, err := look(context.Background(), k)
	switch {
	case len(want) == 0 && !errors.Is(err, users.ErrNotFound):
		t.Errorf("%s = %v, %v; want users.ErrNotFound", what, names(found), err)
	case len(want) > 0 && (err != nil || !slices.Equal(names(found), want)):
		t.Errorf("%s = %v, %v; want %v", what, names(found), err, want)
	}
	return found
}

// testKeyUsername: a username finds its user with their tokens, on a
// handle behind too; an unknown name and an unknown kind find no one.
func testKeyUsername(t *testing.T, fx fixture) {
	ctx := context.Background()
	a, b := fx.aliceOnTwo(t)
	wantKey(t, "LookupKey(alice)", a.LookupKey, users.UsernameKey("alice"), "alice")
	wantKey(t, "LookupKey(nobody)", a.LookupKey, users.UsernameKey("nobody"))
	wantKey(t, "RecheckKey(nobody)", a.RecheckKey, users.UsernameKey("nobody"))
	ci := liveToken("ci")
	create(t, a, "alice", ci)
	found := wantKey(t, "RecheckKey(alice) on a handle behind, after a token was made", b.RecheckKey, users.UsernameKey("alice"), "alice")
	if len(found) == 1 && found[0].AccessToken(ci.digest) == nil {
		t.Errorf("RecheckKey(alice) on a handle behind = tokens %s; want the one made on another handle", jsonOf(found[0].AccessTokens))
	}
	if err := a.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	wantKey(t, "LookupKey(alice) after Delete", a.LookupKey, users.UsernameKey("alice"))
	wantKey(t, "RecheckKey(alice) after Delete on another handle", b.RecheckKey, users.UsernameKey("alice"))
	if _, err := a.LookupKey(ctx, users.Key{Kind: 99, Value: "x"}); !errors.Is(err, users.ErrKeyKind) {
		t.Errorf("LookupKey(a kind of key no one indexes) = %v; want users.ErrKeyKind", err)
	}
}

// testKeyAccessToken: a token's digest finds its user, an expired token's
// too (the caller judges expiry), and a disabled user's (AccessTokenUser
// refuses it); a token made on another handle is found by RecheckKey; a
// revoked token is found by neither.
func testKeyAccessToken(t *testing.T, fx fixture) {
	ctx := context.Background()
	a, b := fx.aliceOnTwo(t)
	ci := liveToken("ci")
	create(t, a, "alice", ci)
	found := wantKey(t, "LookupKey(ci's digest)", a.LookupKey, users.AccessTokenKey(ci.digest), "alice")
	if len(found) == 1 {
		if got := found[0].AccessToken(ci.digest); got == nil || !sameToken(*got, ci.AccessToken) {
			t.Errorf("LookupKey(ci's digest).AccessToken(ci's digest) = %s; want ci, as created", jsonOf(got))
		}
	}
	unknown := sha256.Sum256([]byte("authsvc_pat_unknown"))
	wantKey(t, "LookupKey(an unknown digest)", a.LookupKey, users.AccessTokenKey(unknown))
	wantKey(t, "RecheckKey(an unknown digest)", b.RecheckKey, users.AccessTokenKey(unknown))
	wantKey(t, "RecheckKey(ci's digest) on a handle behind", b.RecheckKey, users.AccessTokenKey(ci.digest), "alice")
	wantKey(t, "LookupKey(ci's digest) once RecheckKey found it", b.LookupKey, users.AccessTokenKey(ci.digest), "alice")

	old := newAccessToken("old", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	if err := users.Update(ctx, a, "alice", func(u *users.User) error {
		u.AccessTokens = append(u.AccessTokens, old.AccessToken)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	wantKey(t, "LookupKey(an expired token's digest)", a.LookupKey, users.AccessTokenKey(old.digest), "alice")

	if _, err := users.RevokeAccessToken(ctx, a, "alice", ci.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	wantKey(t, "LookupKey(a revoked token's digest)", a.LookupKey, users.AccessTokenKey(ci.digest))
	wantKey(t, "RecheckKey(a token's digest revoked on another handle)", b.RecheckKey, users.AccessTokenKey(ci.digest))
	if u, tok, err := users.AccessTokenUser(ctx, a, ci.digest, time.Now()); u != nil || tok != nil || err != nil {
		t.Errorf("AccessTokenUser(a revoked token) = %v, %s, %v; want nil, nil, nil", u, jsonOf(tok), err)
	}
}

// testKeyEmail: an address finds every user of it, disabled ones too,
// its ASCII letters in either case, in byte order of username; a user
// added on another handle is found by RecheckKey; UsersByEmail leaves the
// disabled out; an address changed away finds no one.
func testKeyEmail(t *testing.T, fx fixture) {
	ctx := context.Background()
	a, b := fx.aliceOnTwo(t) // alice@example.com
	for _, u := range []users.User{
		{Username: "carol", PasswordHash: fx.hash, Email: "Alice@Example.COM", Groups: []string{}},
		{Username: "abe", PasswordHash: fx.hash, Email: "alice@example.com", Groups: []string{}, Disabled: true},
		{Username: "dave", PasswordHash: fx.hash, Email: "älice@example.com", Groups: []string{}},
		{Username: "erin", PasswordHash: fx.hash, Groups: []string{}},
	} {
		if err := a.Add(ctx, u); err != nil {
			t.Fatalf("Add(%s) = %v", u.Username, err)
		}
	}
	wantKey(t, "LookupKey(ALICE@example.com)", a.LookupKey, users.EmailKey("ALICE@example.com"), "abe", "alice", "carol")
	wantKey(t, "LookupKey(ÄLICE@example.com), a letter past ASCII", a.LookupKey, users.EmailKey("Älice@example.com"))
	wantKey(t, "LookupKey(nobody@example.com)", a.LookupKey, users.EmailKey("nobody@example.com"))
	wantKey(t, `LookupKey("")`, a.LookupKey, users.EmailKey(""))
	wantKey(t, "RecheckKey(alice@EXAMPLE.com) on a handle behind", b.RecheckKey, users.EmailKey("alice@EXAMPLE.com"), "abe", "alice", "carol")
	if got, err := users.UsersByEmail(ctx, b, "alice@example.com"); err != nil || !slices.Equal(got, []string{"alice", "carol"}) {
		t.Errorf("UsersByEmail(alice@example.com) = %v, %v; want [alice carol], abe disabled", got, err)
	}
	if _, err := users.Edit(ctx, a, "carol", users.Change{Email: ptr("carol@example.com")}); err != nil {
		t.Fatal(err)
	}
	wantKey(t, "LookupKey(alice@example.com) after carol's changed", a.LookupKey, users.EmailKey("alice@example.com"), "abe", "alice")
	wantKey(t, "RecheckKey(carol@example.com) on another handle", b.RecheckKey, users.EmailKey("carol@example.com"), "carol")
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
