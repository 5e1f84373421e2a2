package tokens_test

import (
	"context"
	"testing"
	"time"

	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) tokens.Store {
		s := tokens.NewMemoryStore()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestMemoryStoreSweep checks that Sweep deletes expired sessions and their
// index entries, and nothing else.
func TestMemoryStoreSweep(t *testing.T) {
	ctx := context.Background()
	s := tokens.NewMemoryStore()
	now := time.Now()
	short := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Minute)}
	long := tokens.Session{Username: "bob", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	never := tokens.Session{Username: "carol", Stamp: 1}
	for range 3 {
		storetest.MustIssue(t, s, short, 0, now)
	}
	bobShort := storetest.MustIssue(t, s, tokens.Session{Username: "bob", Stamp: 1, ExpiresAt: now.Add(time.Minute)}, 0, now)
	bobLong := storetest.MustIssue(t, s, long, 0, now)
	carol := storetest.MustIssue(t, s, never, 0, now)
	if got, _ := s.Len(); got != 6 {
		t.Fatalf("Len() = %d; want 6", got)
	}

	if n := s.Sweep(now); n != 0 {
		t.Fatalf("Sweep(now) = %d; want 0", n)
	}
	if n := s.Sweep(now.Add(time.Minute)); n != 4 {
		t.Fatalf("Sweep(now+1m) = %d; want 4", n)
	}
	if got, _ := s.Len(); got != 2 {
		t.Fatalf("Len() after Sweep = %d; want 2", got)
	}
	storetest.WantNotFound(t, s, bobShort, now)
	storetest.WantFound(t, s, bobLong, now, long)
	storetest.WantFound(t, s, carol, now, never)

	// The index forgot the swept sessions too.
	for _, tt := range []struct {
		user string
		want int
	}{{"alice", 0}, {"bob", 1}, {"carol", 1}} {
		if n, err := s.RevokeUser(ctx, tt.user); n != tt.want || err != nil {
			t.Errorf("RevokeUser(%s) after Sweep = %d, %v; want %d, nil", tt.user, n, err, tt.want)
		}
	}
	if got, _ := s.Len(); got != 0 {
		t.Fatalf("Len() after RevokeUser = %d; want 0", got)
	}
}
