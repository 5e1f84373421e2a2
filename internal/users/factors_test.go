package users

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
	"authsvc/internal/secret"
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
	want := &Factors{
		TOTP:          &TOTPFactor{SealedSecret: sealed, Step: 30, Digits: 6, Drift: 1, LastT: 59000000},
		PendingTOTP:   &TOTPFactor{SealedSecret: sealed, Step: 60, T0: 5, Digits: 8, LastT: -1},
		RecoveryCodes: codes, RecoveryKeyID: key.ID(),
	}
	if err := CheckFactors(want); err != nil {
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
	dir, err := OpenFile(path, nil)
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
	if err := dir.Update(ctx, "ada", func(u *User) error { u.Email = "ada@example.com"; return nil }); err != nil {
		t.Fatal(err)
	}
	check("after an Update of another field")
	failed, err := dir.UpdateAll(ctx, map[string]func(*User) error{
		"ada": func(u *User) error { u.PasswordHash = rehashed; return nil },
		"bob": func(u *User) error { u.PasswordHash = rehashed; return nil },
	})
	if err != nil || len(failed) != 0 {
		t.Fatalf("UpdateAll (rehash) = %v, %v", failed, err)
	}
	check("after a rehash-style UpdateAll")

	for _, bad := range []func(f *Factors){
		func(f *Factors) { f.TOTP.Digits = 9 },
		func(f *Factors) { f.TOTP.Digits = 5 },
		func(f *Factors) { f.PendingTOTP.Step = 0 },
		func(f *Factors) { f.TOTP.SealedSecret = nil },
		func(f *Factors) { f.TOTP.SealedSecret = make([]byte, 2<<10+1) },
		func(f *Factors) { f.TOTP.LastT = -2 },
		func(f *Factors) { f.RecoveryCodes[1] = strings.ToUpper(f.RecoveryCodes[1]) },
		func(f *Factors) { f.RecoveryCodes[0] = "abcde-fghij" },
		func(f *Factors) { f.RecoveryCodes = make([]string, 21); f.RecoveryCodes[0] = "" },
	} {
		f := want.Clone()
		bad(f)
		for i := range f.RecoveryCodes {
			if f.RecoveryCodes[i] == "" {
				f.RecoveryCodes[i] = codes[0]
			}
		}
		list := []User{{Username: "ada", PasswordHash: hash, MFA: f}}
		if err := Validate(list); err == nil || !strings.Contains(err.Error(), "mfa") {
			t.Errorf("Validate(mfa %s) = %v; want an error naming mfa", jsonOf(f), err)
		}
	}
}

// TestHasSecondFactor: API.md's "has a second factor" is an active
// authenticator or unused recovery codes; an enrolment not yet confirmed
// is not one.
func TestHasSecondFactor(t *testing.T) {
	totp := &TOTPFactor{SealedSecret: []byte{1}, Step: 30, Digits: 6, LastT: -1}
	code := strings.Repeat("ab", 32)
	for _, tt := range []struct {
		f    *Factors
		want bool
	}{
		{nil, false},
		{&Factors{}, false},
		{&Factors{PendingTOTP: totp}, false},
		{&Factors{TOTP: totp}, true},
		{&Factors{RecoveryCodes: []string{code}, RecoveryKeyID: "0123abcd"}, true},
		{&Factors{PendingTOTP: totp, RecoveryCodes: []string{code}, RecoveryKeyID: "0123abcd"}, true},
	} {
		u := User{Username: "ada", PasswordHash: "$2a$04$QiGvq5sFAv6cEEA9pzq5T.2cQg6lLhAq5a0rnGBCUsEObOQyt2uWW", MFA: tt.f}
		a, err := NewAccount(&u)
		if err != nil {
			t.Fatal(err)
		}
		if u.HasSecondFactor() != tt.want || a.HasSecondFactor() != tt.want {
			t.Errorf("HasSecondFactor() of %s = %v (Account %v); want %v", jsonOf(tt.f), u.HasSecondFactor(), a.HasSecondFactor(), tt.want)
		}
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
