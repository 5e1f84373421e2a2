package userstest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// runAccessTokens checks the personal access token part of the contract
// (Directory.LookupKey and RecheckKey of a token's digest, of a username) through the
// users package's operations on them, against one backing.
func runAccessTokens(t *testing.T, fx fixture) {
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, fx fixture)
	}{
		{"created, found and listed", testAccessTokenCreated},
		{"found on a handle behind by RecheckAccessToken", testAccessTokenRecheck},
		{"revoked", testAccessTokenRevoked},
		{"names unique among live tokens", testAccessTokenNames},
		{"at most MaxAccessTokens", testAccessTokenLimit},
		{"none for a disabled user", testAccessTokenDisabled},
		{"what ends them and what keeps them", testAccessTokenOps},
		{"touched forward only", testAccessTokenTouch},
		{"AccessTokenUser's verdicts", testAccessTokenUser},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, fx) })
	}
}

// withAliceAndBob opens a handle on a fresh backing and adds alice and
// bob, another user like her.
func (fx fixture) withAliceAndBob(t *testing.T) users.Directory {
	t.Helper()
	d := fx.withAlice(t)
	bob := fx.alice
	bob.Username = "bob"
	if err := d.Add(context.Background(), bob); err != nil {
		t.Fatalf("Add(bob) = %v", err)
	}
	return d
}

// A madeToken is a personal access token as its user's record keeps it,
// with the token itself and its digest.
type madeToken struct {
	users.AccessToken
	token  string
	digest [sha256.Size]byte
}

// newAccessToken returns a new personal access token named name, made at
// created and expiring at expires, with scopes (info when none), its times
// to the microsecond (what PostgreSQL keeps).
func newAccessToken(name string, created, expires time.Time, scopes ...string) madeToken {
	if len(scopes) == 0 {
		scopes = []string{users.ScopeInfo}
	}
	tok, digest := tokens.NewPAT()
	return madeToken{
		AccessToken: users.AccessToken{
			ID: rand.Text(), Name: name, Digest: hex.EncodeToString(digest[:]), Prefix: tok[:tokens.PATShownPrefix],
			Scopes:    scopes,
			CreatedAt: created.UTC().Truncate(time.Microsecond), ExpiresAt: expires.UTC().Truncate(time.Microsecond),
		},
		token: tok, digest: digest,
	}
}

// liveToken returns a new token named name, made now and living for a day.
func liveToken(name string, scopes ...string) madeToken {
	now := time.Now()
	return newAccessToken(name, now, now.Add(24*time.Hour), scopes...)
}

// sameToken reports whether got is want as stored: every field, the
// times to the instant.
func sameToken(got, want users.AccessToken) bool {
	return got.ID == want.ID && got.Name == want.Name && got.Digest == want.Digest && got.Prefix == want.Prefix &&
		slices.Equal(got.Scopes, want.Scopes) && got.CreatedAt.Equal(want.CreatedAt) &&
		got.ExpiresAt.Equal(want.ExpiresAt) && got.LastUsedAt.Equal(want.LastUsedAt)
}

// sameTokens reports whether got holds the tokens of want, in any order.
func sameTokens(got []users.AccessToken, want ...users.AccessToken) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g users.AccessToken) bool { return sameToken(g, w) }) {
			return false
		}
	}
	return true
}

// create creates tok for username in d, which must succeed.
func create(t *testing.T, d users.Directory, username string, tok madeToken) {
	t.Helper()
	if err := users.CreateAccessToken(context.Background(), d, username, tok.AccessToken); err != nil {
		t.Fatalf("CreateAccessToken(%s, %q) = %v; want nil", username, tok.Name, err)
	}
}

// wantFound checks that d's AccessToken finds tok, username's.
func wantFound(t *testing.T, d users.Directory, when, username string, tok madeToken) {
	t.Helper()
	u, got, err := users.LookupAccessToken(context.Background(), d, tok.digest)
	if err != nil || u.Username() != username || !sameToken(*got, tok.AccessToken) {
		t.Errorf("AccessToken(%q's digest) %s = %v, %s, %v; want %s's, as created", tok.Name, when, u, jsonOf(got), err, username)
	}
}

// wantGone checks that d's AccessToken finds no token of tok's digest.
func wantGone(t *testing.T, d users.Directory, when string, tok madeToken) {
	t.Helper()
	if u, got, err := users.LookupAccessToken(context.Background(), d, tok.digest); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("AccessToken(%q's digest) %s = %v, %s, %v; want users.ErrNotFound", tok.Name, when, u, jsonOf(got), err)
	}
}

// wantListed checks that d's AccessTokens of username are want.
func wantListed(t *testing.T, d users.Directory, when, username string, want ...madeToken) {
	t.Helper()
	var stored []users.AccessToken
	for _, w := range want {
		stored = append(stored, w.AccessToken)
	}
	if got, err := users.AccessTokens(context.Background(), d, username); err != nil || !sameTokens(got, stored...) {
		t.Errorf("AccessTokens(%s) %s = %s, %v; want %s", username, when, jsonOf(got), err, jsonOf(stored))
	}
}

// testAccessTokenCreated: a token created is found by its digest with its
// user, listed, in List's record, and on a handle opened after; the
// copies given out are the caller's own.
func testAccessTokenCreated(t *testing.T, fx fixture) {
	ctx := context.Background()
	open := fx.factory(t)
	d := open()
	bob := fx.alice
	bob.Username = "bob"
	if _, err := d.AddAll(ctx, []users.User{fx.alice, bob}); err != nil {
		t.Fatal(err)
	}
	wantListed(t, d, "of a user without tokens", "alice")
	ci, deploy, bobs := liveToken("ci", users.ScopeInfo, users.ScopeIntrospect), liveToken("deploy"), liveToken("ci")
	create(t, d, "alice", ci)
	create(t, d, "alice", deploy)
	create(t, d, "bob", bobs)
	wantFound(t, d, "after it was created", "alice", ci)
	wantFound(t, d, "after it was created", "alice", deploy)
	wantFound(t, d, "after it was created", "bob", bobs)
	wantListed(t, d, "after two were created", "alice", ci, deploy)
	if _, _, err := users.LookupAccessToken(ctx, d, sha256.Sum256([]byte("authsvc_pat_unknown"))); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("AccessToken(an unknown digest) = %v; want users.ErrNotFound", err)
	}
	if got, err := users.AccessTokens(ctx, d, "nobody"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("AccessTokens(nobody) = %s, %v; want users.ErrNotFound", jsonOf(got), err)
	}
	list, err := d.List(ctx)
	if i := slices.IndexFunc(list, func(u users.User) bool { return u.Username == "alice" }); err != nil || i < 0 || !sameTokens(list[i].AccessTokens, ci.AccessToken, deploy.AccessToken) {
		t.Errorf("List() = %s, %v; want alice with her two tokens", jsonOf(list), err)
	}
	// The listing is a copy: changing it changes nothing stored.
	got, _ := users.AccessTokens(ctx, d, "alice")
	for i := range got {
		got[i].Name, got[i].Scopes[0] = "changed", "changed"
	}
	wantListed(t, d, "after its copy was changed", "alice", ci, deploy)
	after := open()
	if err := after.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	wantFound(t, after, "on a handle opened after", "alice", ci)
	wantFound(t, after, "on a handle opened after", "bob", bobs)
	wantListed(t, after, "on a handle opened after", "alice", ci, deploy)
}

// testAccessTokenRecheck: a token another handle made a moment ago is
// found by RecheckAccessToken, and so by AccessTokenUser, on a handle that
// has not reloaded since; a token it revoked is not.
func testAccessTokenRecheck(t *testing.T, fx fixture) {
	ctx := context.Background()
	a, b := fx.aliceOnTwo(t)
	ci := liveToken("ci")
	create(t, a, "alice", ci)
	u, got, err := users.RecheckAccessToken(ctx, b, ci.digest)
	if err != nil || u.Username() != "alice" || !sameToken(*got, ci.AccessToken) {
		t.Fatalf("RecheckAccessToken(a token made on another handle) = %v, %s, %v; want alice's", u, jsonOf(got), err)
	}
	wantFound(t, b, "after RecheckAccessToken found it", "alice", ci)
	wantListed(t, b, "after RecheckAccessToken found it", "alice", ci)
	deploy := liveToken("deploy")
	create(t, a, "alice", deploy)
	if u, got, err := users.AccessTokenUser(ctx, b, deploy.digest, time.Now()); err != nil || u == nil || got.ID != deploy.ID {
		t.Errorf("AccessTokenUser(a token made on another handle) = %v, %s, %v; want alice's", u, jsonOf(got), err)
	}
	if _, _, err := users.RecheckAccessToken(ctx, b, sha256.Sum256([]byte("authsvc_pat_unknown"))); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("RecheckAccessToken(an unknown digest) = %v; want users.ErrNotFound", err)
	}
	if _, err := users.RevokeAccessToken(ctx, a, "alice", ci.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if u, got, err := users.RecheckAccessToken(ctx, b, ci.digest); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("RecheckAccessToken(a token revoked on another handle) = %v, %s, %v; want users.ErrNotFound", u, jsonOf(got), err)
	}
}

// testAccessTokenRevoked: a revoked token is gone at once on the handle
// that revoked it, and for good; its user's other tokens live on.
func testAccessTokenRevoked(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAliceAndBob(t)
	ci, deploy := liveToken("ci"), liveToken("deploy")
	create(t, d, "alice", ci)
	create(t, d, "alice", deploy)
	now := time.Now()
	if _, err := users.RevokeAccessToken(ctx, d, "bob", ci.ID, now); !errors.Is(err, users.ErrNoAccessToken) {
		t.Errorf("RevokeAccessToken(bob, alice's token) = %v; want users.ErrNoAccessToken", err)
	}
	gone, err := users.RevokeAccessToken(ctx, d, "alice", ci.ID, now)
	if err != nil || !sameToken(gone, ci.AccessToken) {
		t.Fatalf("RevokeAccessToken(alice, ci) = %s, %v; want ci", jsonOf(gone), err)
	}
	wantGone(t, d, "after it was revoked", ci)
	wantFound(t, d, "after another was revoked", "alice", deploy)
	wantListed(t, d, "after one was revoked", "alice", deploy)
	if u, got, err := users.AccessTokenUser(ctx, d, ci.digest, time.Now()); u != nil || got != nil || err != nil {
		t.Errorf("AccessTokenUser(a revoked token) = %v, %s, %v; want nil, nil, nil", u, jsonOf(got), err)
	}
	for what, id := range map[string]string{"again": ci.ID, "of an unknown id": "no-such-id"} {
		if _, err := users.RevokeAccessToken(ctx, d, "alice", id, time.Now()); !errors.Is(err, users.ErrNoAccessToken) || !errors.Is(err, users.ErrNotFound) {
			t.Errorf("RevokeAccessToken %s = %v; want users.ErrNoAccessToken, a users.ErrNotFound", what, err)
		}
	}
	if _, err := users.RevokeAccessToken(ctx, d, "nobody", ci.ID, time.Now()); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("RevokeAccessToken(nobody) = %v; want users.ErrNotFound", err)
	}
	// An expired token is not there to revoke.
	old := newAccessToken("old", now.Add(-2*time.Hour), now.Add(-time.Hour))
	create(t, d, "alice", old)
	if _, err := users.RevokeAccessToken(ctx, d, "alice", old.ID, time.Now()); !errors.Is(err, users.ErrNoAccessToken) {
		t.Errorf("RevokeAccessToken(an expired token) = %v; want users.ErrNoAccessToken", err)
	}
}

// testAccessTokenNames: a live token's name is taken; an expired one's is
// free, and the expired token is dropped on the way.
func testAccessTokenNames(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAlice(t)
	now := time.Now()
	old := newAccessToken("ci", now.Add(-2*time.Hour), now.Add(-time.Hour))
	create(t, d, "alice", old)
	wantListed(t, d, "with an expired token", "alice", old) // expired ones included
	ci := liveToken("ci")
	create(t, d, "alice", ci)
	wantListed(t, d, "after a token took an expired one's name", "alice", ci)
	if err := users.CreateAccessToken(ctx, d, "alice", liveToken("ci").AccessToken); !errors.Is(err, users.ErrAccessTokenName) {
		t.Errorf("CreateAccessToken(a live token's name) = %v; want users.ErrAccessTokenName", err)
	}
	wantListed(t, d, "after a refused create", "alice", ci)
	if err := users.CreateAccessToken(ctx, d, "nobody", liveToken("x").AccessToken); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("CreateAccessToken(nobody) = %v; want users.ErrNotFound", err)
	}
	if err := users.CreateAccessToken(ctx, d, "alice", liveToken("root", users.ScopeAdmin).AccessToken); err == nil {
		t.Errorf("CreateAccessToken(alice, not an admin, scope admin) = nil; want an error")
	}
}

// testAccessTokenLimit: a user holding MaxAccessTokens live tokens gets
// no more; expired ones do not count.
func testAccessTokenLimit(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAlice(t)
	now := time.Now()
	var list []users.AccessToken
	for i := range users.MaxAccessTokens {
		tok := liveToken(fmt.Sprintf("t%d", i))
		if i == 0 {
			tok = newAccessToken("t0", now.Add(-2*time.Hour), now.Add(-time.Hour))
		}
		list = append(list, tok.AccessToken)
	}
	if err := users.Update(ctx, d, "alice", func(u *users.User) error { u.AccessTokens = list; return nil }); err != nil {
		t.Fatalf("Update(alice, %d tokens) = %v", len(list), err)
	}
	last := liveToken("last")
	create(t, d, "alice", last) // the expired one is dropped
	if err := users.CreateAccessToken(ctx, d, "alice", liveToken("more").AccessToken); !errors.Is(err, users.ErrTooManyAccessTokens) {
		t.Errorf("CreateAccessToken beyond %d = %v; want users.ErrTooManyAccessTokens", users.MaxAccessTokens, err)
	}
	if got, err := users.AccessTokens(ctx, d, "alice"); err != nil || len(got) != users.MaxAccessTokens {
		t.Errorf("AccessTokens(alice) = %d tokens, %v; want %d", len(got), err, users.MaxAccessTokens)
	}
	wantFound(t, d, "among the most a user may hold", "alice", last)
}

// testAccessTokenDisabled: a disabled user gets no token.
func testAccessTokenDisabled(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAlice(t)
	if err := users.Disable(ctx, d, "alice"); err != nil {
		t.Fatal(err)
	}
	ci := liveToken("ci")
	if err := users.CreateAccessToken(ctx, d, "alice", ci.AccessToken); !errors.Is(err, users.ErrDisabled) {
		t.Errorf("CreateAccessToken(a disabled user) = %v; want users.ErrDisabled", err)
	}
	wantGone(t, d, "after a refused create", ci)
	wantListed(t, d, "after a refused create", "alice")
}
