package userstest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"authsvc/internal/mfa"
	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// testFactorsKept: a user's second factors are kept, as they are, through
// Add, Update and UpdateAll; a malformed factor is refused.
func testFactorsKept(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice, hash := fx.alice, fx.hash
	d := fx.factory(t)()
	factors := &users.Factors{
		TOTP:          &users.TOTPFactor{SealedSecret: []byte("sealed\x00secret"), Step: 30, T0: 0, Digits: 6, Drift: -1, LastT: 59000000},
		RecoveryCodes: []string{strings.Repeat("0a", 32), strings.Repeat("b1", 32)}, RecoveryKeyID: "0123abcd",
	}
	enrolled := alice
	enrolled.MFA = factors.Clone()
	bob := users.User{Username: "bob", PasswordHash: hash, Groups: []string{}}
	for _, u := range []users.User{enrolled, bob} {
		if err := d.Add(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	wantMFA := func(when string, want *users.Factors) {
		t.Helper()
		list, err := d.List(ctx)
		if err != nil || len(list) != 2 {
			t.Fatalf("List() %s = %+v, %v; want alice and bob", when, list, err)
		}
		for _, u := range list {
			if u.Username == "alice" && !reflect.DeepEqual(u.MFA, want) {
				t.Errorf("List() %s: alice's MFA = %s; want %s", when, jsonOf(u.MFA), jsonOf(want))
			}
			if u.Username == "bob" && u.MFA != nil {
				t.Errorf("List() %s: bob's MFA = %s; want none", when, jsonOf(u.MFA))
			}
			if u.Username == "alice" && u.HasSecondFactor() != (want != nil) {
				t.Errorf("List() %s: alice's HasSecondFactor() = %v; want %v", when, u.HasSecondFactor(), want != nil)
			}
		}
		for name, has := range map[string]bool{"alice": want != nil, "bob": false} {
			if a, err := d.Lookup(ctx, name); err != nil || a.HasSecondFactor() != has {
				t.Errorf("Lookup(%s) %s = %v, %v; want HasSecondFactor() %v", name, when, a, err, has)
			}
		}
	}
	wantMFA("after Add", factors)
	if err := users.Update(ctx, d, "alice", func(u *users.User) error { u.Email = "a@example.com"; return nil }); err != nil {
		t.Fatal(err)
	}
	wantMFA("after an Update of another field", factors)
	if _, err := d.UpdateAll(ctx, map[string]func(*users.User) error{"bob": func(u *users.User) error { u.Name = "Bob"; return nil }}); err != nil {
		t.Fatal(err)
	}
	wantMFA("after an UpdateAll of another user", factors)
	err := users.Update(ctx, d, "alice", func(u *users.User) error {
		u.MFA = factors.Clone()
		u.MFA.TOTP.Digits = 9
		return nil
	})
	if err == nil {
		t.Errorf("Update to a TOTP factor of 9 digits = nil; want an error")
	}
	wantMFA("after a refused Update", factors)
	if _, err := d.UpdateAll(ctx, map[string]func(*users.User) error{"alice": func(u *users.User) error { u.MFA = nil; return nil }}); err != nil {
		t.Fatal(err)
	}
	wantMFA("after an UpdateAll removing them", nil)
}

// testFactorsGivenOut: Factors gives a user's second factors as written, a copy
// the caller may change, on this handle and on another.
func testFactorsGivenOut(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice, hash := fx.alice, fx.hash
	open := fx.factory(t)
	d := open()
	key := newKey(t)
	enrolled := alice
	enrolled.MFA = SealedFactors(t, "alice", key, secret.Key{}, key)
	bob := users.User{Username: "bob", PasswordHash: hash, Groups: []string{}}
	carol := users.User{Username: "carol", PasswordHash: hash, Groups: []string{}}
	if existing, err := d.AddAll(ctx, []users.User{bob, carol}); err != nil || len(existing) != 0 {
		t.Fatalf("AddAll(bob, carol) = %v, %v", existing, err)
	}
	if err := d.Add(ctx, enrolled); err != nil {
		t.Fatal(err)
	}
	wantFactors := func(d users.Directory, name, when string, want *users.Factors) {
		t.Helper()
		if f, err := d.Factors(ctx, name); err != nil || !reflect.DeepEqual(f, want) {
			t.Errorf("Factors(%s) %s = %s, %v; want %s, nil", name, when, jsonOf(f), err, jsonOf(want))
		}
	}
	wantFactors(d, "alice", "after Add", enrolled.MFA)
	wantFactors(d, "bob", "of a user without any", nil)
	if f, err := d.Factors(ctx, "nobody"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Factors(nobody) = %s, %v; want users.ErrNotFound", jsonOf(f), err)
	}

	pending := SealedFactors(t, "bob", secret.Key{}, key, secret.Key{})
	if err := users.Update(ctx, d, "bob", func(u *users.User) error { u.MFA = pending.Clone(); return nil }); err != nil {
		t.Fatal(err)
	}
	wantFactors(d, "bob", "after an Update enrolling him", pending)
	wantFactors(d, "carol", "after an Update of another user", nil)

	got, err := d.Factors(ctx, "alice")
	if err != nil || got == nil || got.TOTP == nil || len(got.RecoveryCodes) == 0 {
		t.Fatalf("Factors(alice) = %s, %v; want her factors", jsonOf(got), err)
	}
	got.TOTP.SealedSecret[0] ^= 1
	got.TOTP.LastT = 12345
	got.RecoveryCodes[0] = got.RecoveryCodes[1]
	got.RecoveryKeyID = "ffffffff"
	wantFactors(d, "alice", "after the caller changed what it was given", enrolled.MFA)

	if err := users.Update(ctx, d, "alice", func(u *users.User) error { u.MFA = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	wantFactors(d, "alice", "after an Update removing them", nil)
	other := open()
	if err := other.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	wantFactors(other, "alice", "on another handle after the Update removing them", nil)
	wantFactors(other, "bob", "on another handle", pending)
	if err := d.Delete(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	if f, err := d.Factors(ctx, "bob"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Factors(bob) after Delete = %s, %v; want users.ErrNotFound", jsonOf(f), err)
	}
}

// testFactorKeys: FactorKeys counts, per key, the users with a secret or
// codes under it.
func testFactorKeys(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice, hash := fx.alice, fx.hash
	d := fx.factory(t)()
	if keys, err := d.FactorKeys(ctx); err != nil || keys == nil || len(keys) != 0 {
		t.Errorf("FactorKeys() of an empty directory = %v, %v; want an empty map", keys, err)
	}
	if err := d.Add(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if keys, err := d.FactorKeys(ctx); err != nil || keys == nil || len(keys) != 0 {
		t.Errorf("FactorKeys() with no one enrolled = %v, %v; want an empty map", keys, err)
	}
	a, b := newKey(t), newKey(t)
	none := secret.Key{}
	enrol := map[string]*users.Factors{
		"alice": SealedFactors(t, "alice", a, none, a), // two secrets under a: counted once
		"bob":   SealedFactors(t, "bob", a, none, none),
		"carol": SealedFactors(t, "carol", none, b, a), // a pending authenticator counts
		"erin":  SealedFactors(t, "erin", b, b, none),
	}
	var add []users.User
	for _, name := range []string{"bob", "carol", "dave", "erin"} {
		u := users.User{Username: name, PasswordHash: hash, Groups: []string{}}
		add = append(add, u)
	}
	if _, err := d.AddAll(ctx, add); err != nil {
		t.Fatal(err)
	}
	changes := map[string]func(*users.User) error{}
	for name, f := range enrol {
		changes[name] = func(u *users.User) error { u.MFA = f; return nil }
	}
	if failed, err := d.UpdateAll(ctx, changes); err != nil || len(failed) != 0 {
		t.Fatalf("UpdateAll enrolling %d users = %v, %v", len(changes), failed, err)
	}
	want := map[string]int{a.ID(): 3, b.ID(): 2}
	if keys, err := d.FactorKeys(ctx); err != nil || !reflect.DeepEqual(keys, want) {
		t.Errorf("FactorKeys() = %v, %v; want %v (key a: alice, bob, carol; key b: carol, erin)", keys, err, want)
	}
	if err := users.Update(ctx, d, "carol", func(u *users.User) error { u.MFA = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, "erin"); err != nil {
		t.Fatal(err)
	}
	want = map[string]int{a.ID(): 2}
	if keys, err := d.FactorKeys(ctx); err != nil || !reflect.DeepEqual(keys, want) {
		t.Errorf("FactorKeys() after carol's factors were removed and erin deleted = %v, %v; want %v", keys, err, want)
	}
}

// newKey returns a new secret key.
func newKey(t *testing.T) secret.Key {
	t.Helper()
	k, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// SealedFactors returns username's second factors as an enrolment stores
// them: a new authenticator sealed under totp, another, pending, under
// pending, and ten new recovery codes hashed under recovery, each left out
// when its key is the zero Key.
func SealedFactors(t *testing.T, username string, totp, pending, recovery secret.Key) *users.Factors {
	t.Helper()
	f := &users.Factors{}
	seal := func(k secret.Key) *users.TOTPFactor {
		if k.IsZero() {
			return nil
		}
		s, err := mfa.NewSecret()
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := users.SealTOTP(secret.NewKeyring(k), username, mfa.NewTOTP(s))
		if err != nil {
			t.Fatal(err)
		}
		return sealed
	}
	f.TOTP, f.PendingTOTP = seal(totp), seal(pending)
	if !recovery.IsZero() {
		codes, err := mfa.NewRecoveryCodes(10)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.SetRecoveryCodes(recovery, codes); err != nil {
			t.Fatal(err)
		}
	}
	return f
}
