package userstest

import (
	"context"
	"testing"
	"time"

	"authsvc/internal/users"
)

// testAccessTokenOps: what ends a user's personal access tokens (disable,
// enable, a password set by an operator, delete) ends them on the handle
// that wrote and on one opened after, and a user added again under the
// name does not bring them back; what ends sessions only (logout, unlock,
// reset-mfa) keeps them.
func testAccessTokenOps(t *testing.T, fx fixture) {
	ctx := context.Background()
	key := newKey(t)
	for _, tt := range []struct {
		name  string
		setup func(u *users.User)
		op    func(d users.Directory) error
		ends  bool
	}{
		{"disable", nil, func(d users.Directory) error { return users.Disable(ctx, d, "alice") }, true},
		// A disabled user holding tokens: an older file put back, say.
		{"enable", func(u *users.User) { u.Disabled = true }, func(d users.Directory) error { return users.Enable(ctx, d, "alice") }, true},
		{"passwd", nil, func(d users.Directory) error { return users.SetPassword(ctx, d, "alice", fx.hash) }, true},
		{"delete", nil, func(d users.Directory) error { return d.Delete(ctx, "alice") }, true},
		{"logout", nil, func(d users.Directory) error { return users.Logout(ctx, d, "alice") }, false},
		{"unlock", nil, func(d users.Directory) error { return users.Unlock(ctx, d, "alice") }, false},
		{
			"reset-mfa", func(u *users.User) { u.MFA = SealedFactors(t, "alice", key, key, key) },
			func(d users.Directory) error { _, _, err := users.ResetFactors(ctx, d, "alice"); return err }, false,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := fx.factory(t)
			d := open()
			ci := liveToken("ci")
			alice := fx.alice
			alice.AccessTokens = []users.AccessToken{ci.AccessToken}
			if tt.setup != nil {
				tt.setup(&alice)
			}
			if err := d.Add(ctx, alice); err != nil {
				t.Fatalf("Add(alice with a token) = %v", err)
			}
			wantFound(t, d, "as added", "alice", ci)
			if err := tt.op(d); err != nil {
				t.Fatalf("%s = %v; want nil", tt.name, err)
			}
			fresh := open()
			if err := fresh.Reload(ctx); err != nil {
				t.Fatal(err)
			}
			for _, h := range []struct {
				name string
				d    users.Directory
			}{{"the writer", d}, {"a handle opened after", fresh}} {
				when := "on " + h.name + " after " + tt.name
				u, _, err := users.AccessTokenUser(ctx, h.d, ci.digest, time.Now())
				if err != nil || (u != nil) == tt.ends {
					t.Errorf("AccessTokenUser(alice's token) %s = live %v, %v; want live %v", when, u != nil, err, !tt.ends)
				}
				switch {
				case tt.ends:
					wantGone(t, h.d, when, ci)
				default:
					wantFound(t, h.d, when, "alice", ci)
					wantListed(t, h.d, when, "alice", ci)
				}
			}
			if tt.name != "delete" {
				return
			}
			plain := fx.alice // added again, without tokens
			if err := d.Add(ctx, plain); err != nil {
				t.Fatal(err)
			}
			wantGone(t, d, "after alice was deleted and added again", ci)
			wantListed(t, d, "after alice was deleted and added again", "alice")
		})
	}
}

// testAccessTokenTouch: TouchAccessTokens moves LastUsedAt forward, never
// back, leaves the rest of the token as it was, and never brings back a
// token revoked; uses of unknown users and ids are ignored.
func testAccessTokenTouch(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAlice(t)
	ci, deploy := liveToken("ci"), liveToken("deploy")
	create(t, d, "alice", ci)
	create(t, d, "alice", deploy)
	at := time.Now().UTC().Truncate(time.Microsecond)
	touch := func(when string, uses map[string]map[string]time.Time) {
		t.Helper()
		if err := users.TouchAccessTokens(ctx, d, uses); err != nil {
			t.Fatalf("TouchAccessTokens %s = %v; want nil", when, err)
		}
	}
	touch("of ci", map[string]map[string]time.Time{"alice": {ci.ID: at}, "nobody": {"x": at}})
	ci.LastUsedAt = at
	wantListed(t, d, "after ci was used", "alice", ci, deploy)
	wantFound(t, d, "after it was used", "alice", ci)
	touch("at an earlier use", map[string]map[string]time.Time{"alice": {ci.ID: at.Add(-time.Minute), "no-such-id": at}})
	wantListed(t, d, "after an earlier use of ci was recorded", "alice", ci, deploy)
	later := at.Add(time.Minute)
	touch("at a later use", map[string]map[string]time.Time{"alice": {ci.ID: later, deploy.ID: at}})
	ci.LastUsedAt, deploy.LastUsedAt = later, at
	wantListed(t, d, "after later uses", "alice", ci, deploy)
	if _, err := users.RevokeAccessToken(ctx, d, "alice", ci.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	touch("of a revoked token", map[string]map[string]time.Time{"alice": {ci.ID: later.Add(time.Minute)}})
	wantGone(t, d, "after a revoked token's use was recorded", ci)
	wantListed(t, d, "after a revoked token's use was recorded", "alice", deploy)
}

// testAccessTokenUser: users.AccessTokenUser lets a live token of an
// enabled user through, and nothing else.
func testAccessTokenUser(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAliceAndBob(t)
	now := time.Now()
	ci := liveToken("ci", users.ScopeIntrospect)
	old := newAccessToken("old", now.Add(-2*time.Hour), now.Add(-time.Hour))
	bobs := liveToken("bob's")
	create(t, d, "alice", ci)
	create(t, d, "alice", old)
	create(t, d, "bob", bobs)
	// Disabled, his tokens kept: an older file put back, say.
	if err := users.Update(ctx, d, "bob", func(u *users.User) error { u.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	u, got, err := users.AccessTokenUser(ctx, d, ci.digest, time.Now())
	if err != nil || u == nil || u.Username() != "alice" || got == nil || !sameToken(*got, ci.AccessToken) || !got.Has(users.ScopeIntrospect) {
		t.Errorf("AccessTokenUser(a live token) = %v, %s, %v; want alice and the token", u, jsonOf(got), err)
	}
	for what, tok := range map[string]madeToken{"an expired token": old, "a disabled user's token": bobs, "an unknown token": liveToken("unknown")} {
		if u, got, err := users.AccessTokenUser(ctx, d, tok.digest, time.Now()); u != nil || got != nil || err != nil {
			t.Errorf("AccessTokenUser(%s) = %v, %s, %v; want nil, nil, nil", what, u, jsonOf(got), err)
		}
	}
	// The contract returns an expired token (the caller judges expiry).
	wantFound(t, d, "once expired", "alice", old)
}
