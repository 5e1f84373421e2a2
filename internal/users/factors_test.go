package users

import (
	"encoding/json"
	"strings"
	"testing"
)

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
