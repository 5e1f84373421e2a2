package users

import (
	"math"
	"testing"
	"time"
	"unsafe"

	"authsvc/internal/password/passwordtest"
)

// TestSamePassword: what a password change's write compares with the
// user it checked current_password against (issue 28, point 4): a rehash
// keeps the password, a password change, a user added again under the
// name and a disable do not.
func TestSamePassword(t *testing.T) {
	cutoff := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	checked := User{Username: "alice", PasswordHash: passwordtest.MustHash(t, "alice-pw", 4), TokensAfter: cutoff, PasswordGeneration: 3}
	u, err := NewAccount(&checked)
	if err != nil {
		t.Fatal(err)
	}
	other := passwordtest.MustHash(t, "alice-pw", 4) // the same password, another salt: a rehash's
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

// TestDirUserSize: a server holds a Account per user; 120 bytes, in the
// allocation size class of 128: the code lock's epoch (CodesAfter) took
// the 8 bytes it had left below 112.
func TestDirUserSize(t *testing.T) {
	if got := unsafe.Sizeof(Account{}); got > 120 {
		t.Errorf("unsafe.Sizeof(Account{}) = %d; want at most 120", got)
	}
}

func TestPackCutoff(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 35, 43, 123456789, time.UTC)
	for _, tt := range []struct{ in, want time.Time }{
		{time.Time{}, time.Time{}},
		{now, now},
		{now.In(time.FixedZone("x", 7200)), now},
		{time.Unix(0, 0), time.Unix(0, 0).UTC()},
		{time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, math.MinInt64+1).UTC()},
		{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, math.MaxInt64).UTC()},
	} {
		if got := unpackCutoff(packCutoff(tt.in)); !got.Equal(tt.want) || got.IsZero() != tt.want.IsZero() {
			t.Errorf("unpackCutoff(packCutoff(%v)) = %v; want %v", tt.in, got, tt.want)
		}
	}
	// Order is kept: a later cut-off packs greater, and none is less than no cut-off.
	ts := []time.Time{{}, time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0), now, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := 1; i < len(ts); i++ {
		if packCutoff(ts[i-1]) >= packCutoff(ts[i]) {
			t.Errorf("packCutoff(%v) >= packCutoff(%v); want less", ts[i-1], ts[i])
		}
	}
}
