package users

import (
	"context"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
)

func TestDirectorySessionUser(t *testing.T) {
	aliceHash, bobHash := passwordtest.MustHash(t, "a", 4), passwordtest.MustHash(t, "b", 4)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	before, err := newIndex([]User{
		{Username: "alice", PasswordHash: aliceHash},
		{Username: "bob", PasswordHash: bobHash},
		{Username: "carol", PasswordHash: aliceHash},
		{Username: "dave", PasswordHash: aliceHash},
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := newIndex([]User{
		{Username: "alice", PasswordHash: passwordtest.MustHash(t, "a2", 4), TokensAfter: t0.Add(time.Hour), PasswordGeneration: 1}, // password changed
		{Username: "carol", PasswordHash: aliceHash, Disabled: true},
		{Username: "dave", PasswordHash: passwordtest.MustHash(t, "rehashed", 5)}, // rehashed on login: no cut-off
		// bob deleted
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		d        *index
		user     string
		issuedAt time.Time
		stamp    uint64 // the session's password generation (SessionGeneration)
		want     string // "" for nil
	}{
		{before, "alice", t0, 1, "alice"},
		{before, "bob", t0, 1, "bob"},
		{before, "nobody", t0, 1, ""},
		{before, "alice", t0, 2, ""},                              // a generation the user never had
		{after, "alice", t0, 1, ""},                               // before the cut-off
		{after, "alice", t0.Add(time.Hour), 2, "alice"},           // at it, on the new password
		{after, "alice", t0.Add(2 * time.Hour), 1, ""},            // after it, but on the old password: a login that raced the change
		{after, "alice", t0.Add(2 * time.Hour), 0, ""},            // no generation at all: fail closed
		{after, "alice", t0.Add(2 * time.Hour), 1 << 60, "alice"}, // a stamp of an earlier version: the cut-off alone judges
		{after, "alice", t0, 1 << 60, ""},
		{after, "bob", t0, 1, ""},
		{after, "carol", t0, 1, ""},
		{after, "dave", t0, 1, "dave"}, // another hash alone kills nothing: a rehash keeps the generation
	} {
		which := "before"
		if tt.d == after {
			which = "after"
		}
		d := &laggingDirectory{copy: tt.d, now: tt.d}
		u, err := SessionUser(context.Background(), d, tt.user, tt.issuedAt, tt.stamp)
		if err != nil {
			t.Fatal(err)
		}
		if got := userName(u); got != tt.want {
			t.Errorf("%s.SessionUser(%s issued %v on generation %d) = %q; want %q", which, tt.user, tt.issuedAt, tt.stamp, got, tt.want)
		}
	}

	// An instance whose copy (before) is older than the directory now
	// (after): a token its copy finds dead is judged on the directory now
	// (Recheck), so a token issued on the newer state lives; one its copy
	// finds live is answered so until it reloads (API.md's 5 s bound).
	for _, tt := range []struct {
		user     string
		issuedAt time.Time
		stamp    uint64
		want     string
		recheck  bool
	}{
		{"alice", t0.Add(time.Hour), 2, "alice", true}, // issued by another instance after the password change
		{"alice", t0.Add(2 * time.Hour), 3, "", true},  // a generation neither copy has
		{"alice", t0, 1, "alice", false},               // dead by the directory now; this instance notices at its reload
		{"nobody", t0, 1, "", true},
	} {
		d := &laggingDirectory{copy: before, now: after}
		u, err := SessionUser(context.Background(), d, tt.user, tt.issuedAt, tt.stamp)
		if err != nil {
			t.Fatal(err)
		}
		if got := userName(u); got != tt.want || (d.rechecks > 0) != tt.recheck {
			t.Errorf("SessionUser(%s issued %v on generation %d) with a lagging copy = %q after %d rechecks; want %q, rechecked %v", tt.user, tt.issuedAt, tt.stamp, got, d.rechecks, tt.want, tt.recheck)
		}
	}
}

// userName returns u's name, or "" for nil.
func userName(u *Account) string {
	if u == nil {
		return ""
	}
	return u.username
}

// A laggingDirectory is a directory whose Lookup answers from an
// instance's copy, which may be older than the backing's state now, which
// Recheck reads. Only the methods SessionUser calls are there.
type laggingDirectory struct {
	Directory
	copy, now *index
	rechecks  int
}

func (d *laggingDirectory) Lookup(ctx context.Context, username string) (*Account, error) {
	return d.copy.Lookup(ctx, username)
}

func (d *laggingDirectory) Recheck(ctx context.Context, username string) (*Account, error) {
	d.rechecks++
	return d.now.Lookup(ctx, username)
}

func TestSessionGeneration(t *testing.T) {
	for _, tt := range []struct{ g, want uint64 }{
		{0, 1}, {1, 2}, {65534, 65535}, {65535, MaxSessionGeneration}, {65536, 1}, {1<<64 - 1, MaxSessionGeneration},
	} {
		if got := SessionGeneration(tt.g); got != tt.want {
			t.Errorf("SessionGeneration(%d) = %d; want %d", tt.g, got, tt.want)
		}
	}
}

// TestNextCutoff: a change's cut-off is now to the millisecond, and later
// than the one it replaces even when that one is ahead of this clock.
func TestNextCutoff(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		prev, now, want time.Time
	}{
		{time.Time{}, t0.Add(1500 * time.Microsecond), t0.Add(time.Millisecond)},
		{t0, t0.Add(time.Second), t0.Add(time.Second)},
		{t0, t0, t0.Add(time.Millisecond)},                                // the same millisecond
		{t0.Add(time.Minute), t0, t0.Add(time.Minute + time.Millisecond)}, // a clock ahead wrote prev
	} {
		if got := NextCutoff(tt.prev, tt.now); !got.Equal(tt.want) {
			t.Errorf("NextCutoff(%v, %v) = %v; want %v", tt.prev, tt.now, got, tt.want)
		}
	}
}
