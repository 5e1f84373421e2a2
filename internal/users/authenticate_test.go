package users

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/password/passwordtest"
)

// TestEveryFailureHeld: every failed login is held up to the slowest
// check's time, the dummy check of an unknown or disabled user, or of one
// whose hash is unusable, as much as a wrong password. Were only wrong
// passwords held, the dummy check's bare time would tell unknown users
// from known ones (issue 19, point 3).
func TestEveryFailureHeld(t *testing.T) {
	x, err := newIndex([]User{
		{Username: "alice", PasswordHash: passwordtest.MustHash(t, "alice-pw", 4)},
		{Username: "carol", PasswordHash: passwordtest.MustHash(t, "carol-pw", 4), Disabled: true},
		{Username: "erin", PasswordHash: "!"}, // Django's unusable password
	})
	if err != nil {
		t.Fatal(err)
	}
	const slow = 80 * time.Millisecond
	for _, tt := range []struct{ kind, username, password string }{
		{"wrong password", "alice", "wrong"},
		{"unknown user", "nobody", "alice-pw"},
		{"disabled user", "carol", "carol-pw"},
		{"unusable hash", "erin", "erin-pw"},
	} {
		x.slowest.Took.Store(int64(slow)) // as if a check against the slowest hash took 80 ms
		start := time.Now()
		if _, ok, _ := Authenticate(context.Background(), x, tt.username, tt.password, passwordtest.Verify, nil); ok {
			t.Fatalf("authenticate(%q, %q) = ok; want a failure", tt.username, tt.password)
		}
		if took := time.Since(start); took < slow {
			t.Errorf("authenticate(%q, %q) (%s) took %v; want at least the slowest check's %v", tt.username, tt.password, tt.kind, took, slow)
		}
	}
}

// TestSlowestCheckTracksChecks: the time failures are held up to follows
// the checks of the slowest shape up to about their 90th percentile, a
// stall moves it by a step only, and known users' checks of that shape
// feed it as the dummy checks do.
func TestSlowestCheckTracksChecks(t *testing.T) {
	var c SlowestCheck
	c.Took.Store(int64(time.Millisecond)) // a first measurement far too low
	for i := range 2000 {
		c.observe(10*time.Millisecond + time.Duration(i*7%100)*100*time.Microsecond) // 10 ms to 19.9 ms, evenly
	}
	// It wavers a step up (9/160) and a step down (1/160) about it.
	if got := time.Duration(c.Took.Load()); got < 17500*time.Microsecond || got > 21500*time.Microsecond {
		t.Errorf("Took after checks of 10 to 20 ms = %v; want about their 90th percentile, 19 ms (17.5 to 21.5 ms)", got)
	}
	before := c.Took.Load()
	c.observe(10 * time.Second)
	if got, limit := c.Took.Load(), before+before/16; got > limit {
		t.Errorf("Took after a 10 s stall = %v; want at most %v (one step up from %v)", time.Duration(got), time.Duration(limit), time.Duration(before))
	}

	x, err := newIndex([]User{
		{Username: "alice", PasswordHash: passwordtest.MustHash(t, "alice-pw", 5)}, // the slowest shape
		{Username: "dave", PasswordHash: passwordtest.MustHash(t, "dave-pw", 4)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		username, password string
		feeds              bool
	}{
		{"alice", "alice-pw", true}, // a success counts: its check cost the same
		{"alice", "wrong", true},
		{"nobody", "x", true},
		{"dave", "dave-pw", false}, // a faster shape tells nothing of the slowest
		{"dave", "wrong", false},
	} {
		const took = time.Millisecond // what no check takes to the nanosecond: each one seen moves it
		x.slowest.Took.Store(int64(took))
		Authenticate(context.Background(), x, tt.username, tt.password, passwordtest.Verify, nil)
		if fed := x.slowest.Took.Load() != int64(took); fed != tt.feeds {
			t.Errorf("authenticate(%q, %q) moved the slowest check's time: %v; want %v", tt.username, tt.password, fed, tt.feeds)
		}
	}
}

// TestDummyAtPolicyCost: an unknown, disabled or unusable user's password
// is checked against the dummy given (the hash policy's), not against the
// directory's slowest hash, so one slow hash costs failures time but no
// check capacity; the failure is still held to the slowest check's time
// (issue 19, point 2).
func TestDummyAtPolicyCost(t *testing.T) {
	slowHash := passwordtest.MustHash(t, "bob-pw", 8)
	x, err := newIndex([]User{
		{Username: "alice", PasswordHash: passwordtest.MustHash(t, "alice-pw", 4)},
		{Username: "bob", PasswordHash: slowHash}, // the slowest hash
		{Username: "carol", PasswordHash: passwordtest.MustHash(t, "carol-pw", 4), Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	dummy, err := password.ParseHash(passwordtest.MustHash(t, "a secret nobody knows", 4))
	if err != nil {
		t.Fatal(err)
	}
	const slow = 60 * time.Millisecond
	for _, username := range []string{"nobody", "carol"} {
		x.slowest.Took.Store(int64(slow))
		var checked *password.Hash
		verify := func(h *password.Hash, pw []byte) bool { checked = h; return passwordtest.Verify(h, pw) }
		start := time.Now()
		if _, ok, _ := Authenticate(context.Background(), x, username, "pw", verify, dummy); ok {
			t.Fatalf("Authenticate(%s) = ok; want a failure", username)
		}
		if checked != dummy {
			t.Errorf("Authenticate(%s) checked against %v; want the policy's dummy, not the slowest hash %v", username, checked, x.slowest.Hash)
		}
		if took := time.Since(start); took < slow {
			t.Errorf("Authenticate(%s) took %v; want it held to the slowest check's %v", username, took, slow)
		}
	}
}

// unreachable is a Reader whose directory cannot answer.
type unreachable struct{ Reader }

func (unreachable) Lookup(context.Context, string) (*Account, error) {
	return nil, fmt.Errorf("injected: %w", ErrUnavailable)
}

// TestAuthenticateDirectoryUnavailable: a directory that cannot say who
// exists gives no verdict, an error wrapping ErrUnavailable, and no check:
// not a failure the caller would record against the user.
func TestAuthenticateDirectoryUnavailable(t *testing.T) {
	x, err := newIndex([]User{{Username: "alice", PasswordHash: passwordtest.MustHash(t, "alice-pw", passwordtest.Cost)}})
	if err != nil {
		t.Fatal(err)
	}
	checked := false
	verify := func(h *password.Hash, pw []byte) bool { checked = true; return h.Verify(pw) }
	u, ok, err := Authenticate(context.Background(), unreachable{x}, "alice", "alice-pw", verify, nil)
	if u != nil || ok || !errors.Is(err, ErrUnavailable) || checked {
		t.Errorf("Authenticate with the directory unreachable = %v, %v, %v, checked %v; want nil, false, ErrUnavailable, no check", u, ok, err, checked)
	}
}

// TestWrongPasswordPadded: a wrong password against a fast hash takes at
// least as long as a check against the slowest hash, so a user with a cheap
// hash cannot be told from an unknown user by time.
func TestWrongPasswordPadded(t *testing.T) {
	x, err := newIndex([]User{
		{Username: "admin", PasswordHash: passwordtest.MustHash(t, "admin-pw", 4)},
		{Username: "alice", PasswordHash: passwordtest.MustHash(t, "alice-pw", 4)},
	})
	if err != nil {
		t.Fatal(err)
	}
	const slow = 80 * time.Millisecond
	x.slowest.Took.Store(int64(slow)) // as if the slowest hash took 80 ms to check
	start := time.Now()
	if _, ok, _ := Authenticate(context.Background(), x, "alice", "wrong", passwordtest.Verify, nil); ok {
		t.Fatal("authenticate(alice, wrong) = ok")
	}
	if took := time.Since(start); took < slow {
		t.Errorf("wrong password against a cost-4 hash took %v; want at least the slowest check's %v", took, slow)
	}
	// The right password is not held back.
	x.slowest.Took.Store(int64(time.Hour))
	if _, ok, _ := Authenticate(context.Background(), x, "alice", "alice-pw", passwordtest.Verify, nil); !ok {
		t.Errorf("authenticate(alice, right) failed")
	}
}

func TestDirectoryAuthenticate(t *testing.T) {
	p72 := strings.Repeat("p", 72)
	users := []User{
		{Username: "alice", PasswordHash: passwordtest.MustHash(t, "right", 4), Name: "Alice", Groups: []string{"dev"}, Admin: true},
		{Username: "carol", PasswordHash: passwordtest.MustHash(t, "right", 4), Disabled: true},
		{Username: "dave", PasswordHash: passwordtest.MustHash(t, p72, 4)},
	}
	d, err := newIndex(users)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		username, password string
		ok                 bool
	}{
		{"alice", "right", true},
		{"alice", "wrong", false},
		{"alice", "", false},
		{"alice", "right\n", false},
		{"Alice", "right", false},
		{"nobody", "right", false},
		{"", "", false},
		{"carol", "right", false}, // disabled
		{"dave", p72, true},
		// bcrypt reads 72 bytes: it would accept these; authenticate must not.
		{"dave", p72 + "x", false},
		{"dave", p72 + strings.Repeat("y", 1000), false},
	} {
		u, ok, _ := Authenticate(context.Background(), d, tt.username, tt.password, passwordtest.Verify, nil)
		if ok != tt.ok || (u != nil) != tt.ok {
			t.Errorf("authenticate(%q, %q) = %v, %v; want ok %v", tt.username, tt.password, u, ok, tt.ok)
			continue
		}
		if ok && u.username != tt.username {
			t.Errorf("authenticate(%q, %q).info.Username = %q; want %q", tt.username, tt.password, u.username, tt.username)
		}
	}
	u, _, _ := Authenticate(context.Background(), d, "alice", "right", passwordtest.Verify, nil)
	wantInfo := `{"username":"alice","name":"Alice","email":"","groups":["dev"],"admin":true}` + "\n"
	if u == nil || string(u.appendInfoJSON(nil)) != wantInfo || !u.isAdmin() {
		t.Errorf("authenticate(alice).appendInfoJSON = %q; want %q", u.appendInfoJSON(nil), wantInfo)
	}
	if u != nil && bytes.Contains(u.appendInfoJSON(nil), []byte("$2")) {
		t.Errorf("appendInfoJSON %q holds a hash", u.appendInfoJSON(nil))
	}
}

// An index is a Reader of users as a directory holds them: each made by
// NewAccount, failures costing a check like the slowest hash's.
type index struct {
	byName  map[string]*Account
	slowest *SlowestCheck
}

// newIndex returns the index of list, a later user of a name replacing
// an earlier.
func newIndex(list []User) (*index, error) {
	x := &index{byName: make(map[string]*Account, len(list))}
	var slowest *password.Hash
	var most float32
	for i := range list {
		u, err := NewAccount(&list[i])
		if err != nil {
			return nil, err
		}
		x.byName[u.username] = u
		if u.work > most {
			slowest, most = u.Hash(), u.work
		}
	}
	var err error
	x.slowest, err = NewSlowestCheck(slowest, nil)
	return x, err
}

func (x *index) Lookup(_ context.Context, username string) (*Account, error) {
	if u := x.byName[username]; u != nil {
		return u, nil
	}
	return nil, ErrNotFound
}

func (x *index) Slowest() *SlowestCheck { return x.slowest }
