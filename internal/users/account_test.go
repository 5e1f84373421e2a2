package users

import (
	"testing"
	"time"
)

// TestSamePassword: what a password change's write compares with the
// user it checked current_password against (issue 28, point 4): a rehash
// keeps the password, a password change, a user added again under the
// name and a disable do not.
func TestSamePassword(t *testing.T) {
	cutoff := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	checked := User{Username: "alice", PasswordHash: mustHash(t, "alice-pw", 4), TokensAfter: cutoff, PasswordGeneration: 3}
	u, err := NewAccount(&checked)
	if err != nil {
		t.Fatal(err)
	}
	other := mustHash(t, "alice-pw", 4) // the same password, another salt: a rehash's
	for _, tt := range []struct {
		name   string
		change func(x *User)
		want   bool
	}{
		{"unchanged", func(*User) {}, true},
		{"rehashed", func(x *User) { x.PasswordHash = other }, true},
		{"logged out, same hash", func(x *User) { x.TokensAfter = cutoff.Add(time.Second) }, true},
		{"password changed", func(x *User) { x.PasswordHash, x.PasswordGeneration, x.TokensAfter = other, 4, cutoff.Add(time.Second) }, false},
		{"generation moved alone", func(x *User) { x.PasswordHash, x.PasswordGeneration = other, 4 }, false},
		{"deleted and added again", func(x *User) { x.PasswordHash, x.TokensAfter = other, cutoff.Add(time.Minute) }, false},
		{"disabled", func(x *User) { x.Disabled = true }, false},
	} {
		x := checked
		tt.change(&x)
		if got := u.SamePassword(&x); got != tt.want {
			t.Errorf("SamePassword(%s) = %v; want %v", tt.name, got, tt.want)
		}
	}
}
