package usersfile

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"authsvc/internal/mfa"
	"authsvc/internal/password/passwordtest"
	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// TestFactorsKept: a users file entry's mfa loads, and every rewrite of
// the file by another change (an Update of another field, a rehash-style
// UpdateAll of the password hash) keeps it as it was, byte for byte once
// compacted; a malformed one refuses the load, naming the field.
func TestFactorsKept(t *testing.T) {
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := key.Seal([]byte("12345678901234567890"), []byte("ada"))
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, c := range []string{"abcde-fghij", "klmno-pqrst"} {
		h, err := mfa.HashRecoveryCode(key, c)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, h)
	}
	want := &users.Factors{
		TOTP:          &users.TOTPFactor{SealedSecret: sealed, Step: 30, Digits: 6, Drift: 1, LastT: 59000000},
		PendingTOTP:   &users.TOTPFactor{SealedSecret: sealed, Step: 60, T0: 5, Digits: 8, LastT: -1},
		RecoveryCodes: codes, RecoveryKeyID: key.ID(),
	}
	if err := users.CheckFactors(want); err != nil {
		t.Fatalf("CheckFactors(factors of mfa's own making) = %v", err)
	}
	mfaJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	hash := "$2a$04$QiGvq5sFAv6cEEA9pzq5T.2cQg6lLhAq5a0rnGBCUsEObOQyt2uWW"
	rehashed := "$2a$04$nsNdQ9GaPLOfcUPmQ5A9XOkS1Ca9y5BGGSYuh95gxPHnu0ITnkgIW"
	path := filepath.Join(t.TempDir(), "users.json")
	file := `{"users": [{"username":"ada","password_hash":"` + hash + `","mfa":` + string(mfaJSON) + `},` +
		`{"username":"bob","password_hash":"` + hash + `"}]}`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(when string) {
		t.Helper()
		list, err := dir.List(ctx)
		if err != nil || len(list) != 2 || !reflect.DeepEqual(list[0].MFA, want) || list[1].MFA != nil {
			t.Fatalf("List %s = %+v, %v; want ada with her factors, bob with none", when, list, err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Users []map[string]json.RawMessage }
		if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Users) != 2 {
			t.Fatalf("users file %s = %s (%v)", when, raw, err)
		}
		var got bytes.Buffer
		if err := json.Compact(&got, doc.Users[0]["mfa"]); err != nil || got.String() != string(mfaJSON) {
			t.Errorf("users file %s: ada's mfa = %s (%v); want %s", when, got.String(), err, mfaJSON)
		}
		if _, ok := doc.Users[1]["mfa"]; ok {
			t.Errorf("users file %s: bob has an mfa; want none written", when)
		}
		for name, has := range map[string]bool{"ada": true, "bob": false} {
			if a, err := dir.Lookup(ctx, name); err != nil || a.HasSecondFactor() != has {
				t.Errorf("Lookup(%s) %s = %v, %v; want HasSecondFactor() %v", name, when, a, err, has)
			}
		}
	}
	check("as loaded")
	if err := dir.Update(ctx, "ada", func(u *users.User) error { u.Email = "ada@example.com"; return nil }); err != nil {
		t.Fatal(err)
	}
	check("after an Update of another field")
	failed, err := dir.UpdateAll(ctx, map[string]func(*users.User) error{
		"ada": func(u *users.User) error { u.PasswordHash = rehashed; return nil },
		"bob": func(u *users.User) error { u.PasswordHash = rehashed; return nil },
	})
	if err != nil || len(failed) != 0 {
		t.Fatalf("UpdateAll (rehash) = %v, %v", failed, err)
	}
	check("after a rehash-style UpdateAll")

	for _, bad := range []func(f *users.Factors){
		func(f *users.Factors) { f.TOTP.Digits = 9 },
		func(f *users.Factors) { f.TOTP.Digits = 5 },
		func(f *users.Factors) { f.PendingTOTP.Step = 0 },
		func(f *users.Factors) { f.TOTP.SealedSecret = nil },
		func(f *users.Factors) { f.TOTP.SealedSecret = make([]byte, 2<<10+1) },
		func(f *users.Factors) { f.TOTP.LastT = -2 },
		func(f *users.Factors) { f.RecoveryCodes[1] = strings.ToUpper(f.RecoveryCodes[1]) },
		func(f *users.Factors) { f.RecoveryCodes[0] = "abcde-fghij" },
		func(f *users.Factors) { f.RecoveryCodes = make([]string, 21); f.RecoveryCodes[0] = "" },
	} {
		f := want.Clone()
		bad(f)
		for i := range f.RecoveryCodes {
			if f.RecoveryCodes[i] == "" {
				f.RecoveryCodes[i] = codes[0]
			}
		}
		list := []users.User{{Username: "ada", PasswordHash: hash, MFA: f}}
		if err := users.Validate(list); err == nil || !strings.Contains(err.Error(), "mfa") {
			t.Errorf("Validate(mfa %s) = %v; want an error naming mfa", jsonOf(f), err)
		}
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// sealedFactors returns factors for username as an enrolment stores them:
// an authenticator sealed under key and ten recovery codes hashed under it.
func sealedFactors(t *testing.T, username string, key secret.Key) *users.Factors {
	t.Helper()
	s, err := mfa.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	totp, err := users.SealTOTP(secret.NewKeyring(key), username, mfa.NewTOTP(s))
	if err != nil {
		t.Fatal(err)
	}
	codes, err := mfa.NewRecoveryCodes(10)
	if err != nil {
		t.Fatal(err)
	}
	f := &users.Factors{TOTP: totp}
	if err := f.SetRecoveryCodes(key, codes); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFileFactorsReloaded: the second factors another process writes to
// the users file are what Factors and FactorKeys answer after a reload,
// however the index is built (the scanner, or the reference parser for a
// file it leaves to it), also when only the factors changed and the user's
// Account is kept; a reload that removes them drops them, and a file
// without any keeps no map of them at all.
func TestFileFactorsReloaded(t *testing.T) {
	ctx := context.Background()
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	hash := passwordtest.MustHash(t, "pw", 4)
	path := filepath.Join(t.TempDir(), "users.json")
	write := func(list ...users.User) {
		t.Helper()
		if err := Write(path, list); err != nil {
			t.Fatal(err)
		}
	}
	alice := users.User{Username: "alice", PasswordHash: hash, Groups: []string{}, MFA: sealedFactors(t, "alice", key)}
	bob := users.User{Username: "bob", PasswordHash: hash, Groups: []string{}}
	write(alice, bob)
	d, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := func(when string, factors map[string]*users.Factors, keys map[string]int) {
		t.Helper()
		for _, name := range []string{"alice", "bob"} {
			if f, err := d.Factors(ctx, name); err != nil || !reflect.DeepEqual(f, factors[name]) {
				t.Errorf("Factors(%s) %s = %s, %v; want %s, nil", name, when, jsonOf(f), err, jsonOf(factors[name]))
			}
		}
		if got, err := d.FactorKeys(ctx); err != nil || !reflect.DeepEqual(got, keys) {
			t.Errorf("FactorKeys() %s = %v, %v; want %v", when, got, err, keys)
		}
	}
	reload := func() {
		t.Helper()
		if err := d.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want("as loaded", map[string]*users.Factors{"alice": alice.MFA}, map[string]int{key.ID(): 1})

	kept, _ := d.Lookup(ctx, "alice")
	used := alice
	used.MFA = alice.MFA.Clone()
	used.MFA.TOTP.LastT = 59000000 // a code accepted: her Account does not change
	used.MFA.RecoveryCodes = used.MFA.RecoveryCodes[1:]
	write(used, bob)
	reload()
	if a, _ := d.Lookup(ctx, "alice"); a != kept {
		t.Fatalf("Lookup(alice) after a change of her factors alone = a new Account; want hers kept (what this test is about)")
	}
	want("after another process changed alice's factors alone", map[string]*users.Factors{"alice": used.MFA}, map[string]int{key.ID(): 1})
	reload()
	want("after a reload of the same file", map[string]*users.Factors{"alice": used.MFA}, map[string]int{key.ID(): 1})

	enrolled := bob
	enrolled.MFA = sealedFactors(t, "bob", key)
	removed := used
	removed.MFA = nil
	write(removed, enrolled)
	reload()
	want("after another process moved the factors from alice to bob", map[string]*users.Factors{"bob": enrolled.MFA}, map[string]int{key.ID(): 1})

	// A top level spelled otherwise is left to the reference parser whole.
	write(used, enrolled)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`"users":`)) {
		t.Fatalf("users file = %s; want its \"users\" key", raw)
	}
	raw = bytes.Replace(raw, []byte(`"users":`), []byte(`"\u0075sers":`), 1)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	reload()
	want("after a file the reference parser reads", map[string]*users.Factors{"alice": used.MFA, "bob": enrolled.MFA}, map[string]int{key.ID(): 2})

	write(removed, bob)
	reload()
	want("after another process removed them all", nil, map[string]int{})
	if x := d.index(); x.factors != nil {
		t.Errorf("index's factors of a file without any = %v; want no map", x.factors)
	}
}

// TestIndexLaterEntryDropsFactors: of two entries of one name, the later
// replaces the earlier (put), its lack of factors included.
func TestIndexLaterEntryDropsFactors(t *testing.T) {
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	hash := passwordtest.MustHash(t, "pw", 4)
	enrolled := users.User{Username: "alice", PasswordHash: hash, MFA: sealedFactors(t, "alice", key)}
	plain := users.User{Username: "alice", PasswordHash: hash}
	x, err := newUserIndex([]users.User{enrolled, plain}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := x.factors["alice"]; f != nil {
		t.Errorf("index's factors of alice, enrolled then not = %s; want none", jsonOf(f))
	}
}
