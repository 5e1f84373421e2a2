package djangoimport

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"authsvc/internal/mfa"
	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// TestUpdateDjangoFactors: import --update's factors follow the Django
// devices for factors an import brought, and never for those set up in
// authsvc; an unchanged device keeps its sealed secret and the later
// last_t; a code used on either side never comes back; only factors added,
// replaced or removed count as a change that ends sessions.
func TestUpdateDjangoFactors(t *testing.T) {
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ring := secret.NewKeyring(key)
	const name = "ann"
	device := func(fill byte, lastT, drift int64) *mfa.TOTP {
		return &mfa.TOTP{Secret: bytes.Repeat([]byte{fill}, 20), Step: 30, Digits: 6, Drift: drift, LastT: lastT}
	}
	sealed := func(d *mfa.TOTP, fromDjango bool) *users.TOTPFactor {
		f, err := users.SealTOTP(ring, name, *d)
		if err != nil {
			t.Fatal(err)
		}
		f.FromDjango = fromDjango
		return f
	}
	hashes := func(codes ...string) []string {
		var f users.Factors
		if err := f.SetRecoveryCodes(key, codes); err != nil {
			t.Fatal(err)
		}
		return f.RecoveryCodes
	}
	fromDjango := func(codes ...string) *users.Factors {
		return &users.Factors{RecoveryCodes: hashes(codes...), RecoveryKeyID: key.ID(), RecoveryFromDjango: true}
	}
	kept := sealed(device(1, 150, 0), true) // used in authsvc since the import
	enrolled := sealed(device(9, -1, 0), false)

	for _, tt := range []struct {
		name     string
		stored   *users.Factors
		dumped   *Factors
		totp     *mfa.TOTP // the authenticator after, opened; nil: none
		sealed   []byte    // when set, the sealed secret must be these bytes
		codes    []string  // the recovery codes after, in clear
		fromDj   bool      // RecoveryFromDjango after
		nilMFA   bool
		changed  bool
		imported int
		skipped  int
	}{
		{name: "new devices", dumped: &Factors{TOTP: device(1, 100, 0), RecoveryCodes: []string{"aaaaaaaa", "bbbbbbbb"}, StaticDevices: 1},
			totp: device(1, 100, 0), codes: []string{"aaaaaaaa", "bbbbbbbb"}, fromDj: true, changed: true, imported: 2},
		{name: "unchanged device, newer last_t in authsvc", stored: &users.Factors{TOTP: kept}, dumped: &Factors{TOTP: device(1, 120, 1)},
			totp: device(1, 150, 1), sealed: kept.SealedSecret, imported: 1},
		{name: "unchanged device, newer last_t in Django", stored: &users.Factors{TOTP: kept}, dumped: &Factors{TOTP: device(1, 170, 0)},
			totp: device(1, 170, 0), sealed: kept.SealedSecret, imported: 1},
		{name: "new key in Django", stored: &users.Factors{TOTP: kept}, dumped: &Factors{TOTP: device(2, -1, 0)},
			totp: device(2, -1, 0), changed: true, imported: 1},
		{name: "new step in Django", stored: &users.Factors{TOTP: kept}, dumped: &Factors{TOTP: &mfa.TOTP{Secret: bytes.Repeat([]byte{1}, 20), Step: 60, Digits: 6, LastT: -1}},
			totp: &mfa.TOTP{Secret: bytes.Repeat([]byte{1}, 20), Step: 60, Digits: 6, LastT: -1}, changed: true, imported: 1},
		{name: "device gone from Django", stored: &users.Factors{TOTP: kept}, dumped: nil, nilMFA: true, changed: true},
		{name: "enrolled in authsvc, a device in Django", stored: &users.Factors{TOTP: enrolled}, dumped: &Factors{TOTP: device(2, -1, 0)},
			totp: device(9, -1, 0), sealed: enrolled.SealedSecret, skipped: 1},
		{name: "enrolled in authsvc, none in Django", stored: &users.Factors{TOTP: enrolled}, totp: device(9, -1, 0), sealed: enrolled.SealedSecret},
		{name: "codes used on both sides", stored: fromDjango("aaaaaaaa", "cccccccc"), // bbbbbbbb used in authsvc
			dumped: &Factors{RecoveryCodes: []string{"aaaaaaaa", "bbbbbbbb"}, StaticDevices: 1}, // cccccccc used in Django
			codes:  []string{"aaaaaaaa"}, fromDj: true, imported: 1},
		{name: "tokens generated again in Django", stored: fromDjango("aaaaaaaa", "cccccccc"),
			dumped: &Factors{RecoveryCodes: []string{"xxxxxxxx", "yyyyyyyy"}, StaticDevices: 1},
			codes:  []string{"xxxxxxxx", "yyyyyyyy"}, fromDj: true, changed: true, imported: 1},
		{name: "every imported code used in authsvc", stored: &users.Factors{RecoveryFromDjango: true},
			dumped: &Factors{RecoveryCodes: []string{"aaaaaaaa"}, StaticDevices: 1}, fromDj: true, imported: 1},
		{name: "static device gone from Django", stored: fromDjango("aaaaaaaa"), nilMFA: true, changed: true},
		{name: "codes from authsvc", stored: &users.Factors{RecoveryCodes: hashes("authsvc0001"), RecoveryKeyID: key.ID()},
			dumped: &Factors{RecoveryCodes: []string{"aaaaaaaa"}, StaticDevices: 1}, codes: []string{"authsvc0001"}, skipped: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.stored.Clone()
			up, err := tt.dumped.UpdateFactors(key, name, tt.stored)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tt.stored, before) {
				t.Errorf("UpdateFactors modified the stored factors")
			}
			if up.Changed != tt.changed || up.Imported != tt.imported || len(up.Skipped) != tt.skipped {
				t.Errorf("UpdateFactors = changed %v, imported %d, skipped %q; want %v, %d, %d skipped", up.Changed, up.Imported, up.Skipped, tt.changed, tt.imported, tt.skipped)
			}
			if tt.nilMFA {
				if up.MFA != nil {
					t.Errorf("MFA = %+v; want nil", up.MFA)
				}
				return
			}
			if up.MFA == nil {
				t.Fatal("MFA = nil")
			}
			if err := users.CheckFactors(up.MFA); err != nil {
				t.Errorf("CheckFactors(MFA) = %v", err)
			}
			switch f := up.MFA.TOTP; {
			case tt.totp == nil && f != nil:
				t.Errorf("an authenticator; want none")
			case tt.totp != nil && f == nil:
				t.Errorf("no authenticator; want one")
			case f != nil:
				got, _, err := f.Open(ring, name)
				if err != nil || !reflect.DeepEqual(got, *tt.totp) {
					t.Errorf("authenticator = %+v, %v; want %+v", got, err, *tt.totp)
				}
				if tt.sealed != nil && !bytes.Equal(f.SealedSecret, tt.sealed) {
					t.Errorf("the sealed secret changed; want it kept")
				}
				if want := !bytes.Equal(f.SealedSecret, enrolled.SealedSecret); f.FromDjango != want {
					t.Errorf("FromDjango = %v; want %v", f.FromDjango, want)
				}
			}
			if len(up.MFA.RecoveryCodes) != len(tt.codes) || up.MFA.RecoveryFromDjango != tt.fromDj {
				t.Errorf("%d recovery codes, from Django %v; want %d, %v", len(up.MFA.RecoveryCodes), up.MFA.RecoveryFromDjango, len(tt.codes), tt.fromDj)
			}
			for _, c := range tt.codes {
				if _, ok, err := up.MFA.MatchRecoveryCode(ring, c); !ok || err != nil {
					t.Errorf("MatchRecoveryCode(%q) = %v, %v; want a match", c, ok, err)
				}
			}
			for _, c := range []string{"aaaaaaaa", "bbbbbbbb", "cccccccc", "xxxxxxxx", "yyyyyyyy"} {
				if _, ok, _ := up.MFA.MatchRecoveryCode(ring, c); ok && !slices.Contains(tt.codes, c) {
					t.Errorf("MatchRecoveryCode(%q) matched; want it gone", c)
				}
			}
		})
	}
}

// TestSetRecoveryCodesClearsDjangoMark: codes authsvc gives are its own,
// whatever the codes before were.
func TestSetRecoveryCodesClearsDjangoMark(t *testing.T) {
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	f := &users.Factors{RecoveryFromDjango: true}
	if err := f.SetRecoveryCodes(key, []string{"abcde-fghij"}); err != nil || f.RecoveryFromDjango {
		t.Errorf("SetRecoveryCodes = %v, RecoveryFromDjango %v; want nil, false", err, f.RecoveryFromDjango)
	}
}

// TestMaxRecoveryCodes: the import keeps as many recovery codes as a user
// may keep (users.CheckFactors), and no more.
func TestMaxRecoveryCodes(t *testing.T) {
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{maxRecoveryCodes, maxRecoveryCodes + 1} {
		codes := make([]string, n)
		for i := range codes {
			codes[i] = fmt.Sprintf("code%06d", i)
		}
		var f users.Factors
		if err := f.SetRecoveryCodes(key, codes); err != nil {
			t.Fatal(err)
		}
		if err := users.CheckFactors(&f); (err == nil) != (n <= maxRecoveryCodes) {
			t.Errorf("users.CheckFactors(%d recovery codes) = %v; want an error past maxRecoveryCodes, %d", n, err, maxRecoveryCodes)
		}
	}
}
