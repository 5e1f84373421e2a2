package tokens

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestMemRecordHoldsNoPointers: the garbage collector never scans the
// memory store's records only while they hold no pointer; a string or slice
// field added to memRecord would bring back the million-session GC pauses.
func TestMemRecordHoldsNoPointers(t *testing.T) {
	var check func(reflect.Type, string)
	check = func(typ reflect.Type, path string) {
		switch typ.Kind() {
		case reflect.Struct:
			for f := range typ.Fields() {
				check(f.Type, path+"."+f.Name)
			}
		case reflect.Array:
			check(typ.Elem(), path+"[]")
		case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
			t.Errorf("%s is a %s: memRecord must hold no pointers", path, typ.Kind())
		}
	}
	check(reflect.TypeFor[memRecord](), "memRecord")
	check(reflect.TypeFor[Digest](), "Digest") // the index's keys
}

// TestMemoryStoreClients: every client address comes back from List as it
// was given, whether kept as 16 bytes or as a string.
func TestMemoryStoreClients(t *testing.T) {
	s := NewMemoryStore()
	now := time.Now()
	clients := []string{"", "203.0.113.7", "2001:db8::1", "::ffff:192.0.2.1", "fe80::1%eth0", "unix-socket", "0.0.0.0"}
	for _, c := range clients {
		issue(t, s, Session{Username: "alice", Stamp: 1, ID: NewSessionID(), Client: c, UserAgent: "ua " + c}, 0, now)
	}
	listed, err := s.List(context.Background(), "alice", now)
	if err != nil || len(listed) != len(clients) {
		t.Fatalf("List(alice) = %d sessions, %v; want %d", len(listed), err, len(clients))
	}
	for i, ls := range listed {
		want := clients[len(clients)-1-i] // newest first
		if ls.Client != want || ls.UserAgent != "ua "+want {
			t.Errorf("List(alice)[%d] client, agent = %q, %q; want %q, %q", i, ls.Client, ls.UserAgent, want, "ua "+want)
		}
	}
}

// TestMemoryStoreStringsShared: equal user agents are kept once, and every
// string is let go once no session holds it, however its sessions ended.
func TestMemoryStoreStringsShared(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	now := time.Now()
	for _, user := range []string{"alice", "bob"} {
		for range 3 {
			issue(t, s, Session{Username: user, Stamp: 1, ExpiresAt: now.Add(time.Minute), Client: "odd client", UserAgent: "Mozilla/5.0"}, 0, now)
		}
	}
	// alice, bob, one user agent, one client string.
	if got := s.strings.Len(); got != 4 {
		t.Errorf("strings held for 6 sessions of 2 users, 1 agent, 1 client = %d; want 4", got)
	}
	carol := issue(t, s, Session{Username: "carol", Stamp: 1, UserAgent: "curl/8.5.0"}, 1, now)
	issue(t, s, Session{Username: "carol", Stamp: 1, UserAgent: "Wget/1.21"}, 1, now) // evicts the first
	if _, err := s.Lookup(context.Background(), carol, now); !errors.Is(err, ErrNotFound) {
		t.Errorf("Lookup(evicted) = %v; want %v", err, ErrNotFound)
	}

	s.RevokeUser(ctx, "alice")
	s.Sweep(now.Add(time.Minute)) // bob's
	s.Supersede(ctx, Supersession{Username: "carol", Before: now.Add(time.Second)})
	if n, _ := s.Len(); n != 0 || s.strings.Len() != 0 {
		t.Errorf("after every session ended: %d sessions, %d strings held; want 0, 0", n, s.strings.Len())
	}
	if len(s.byUser) != 0 {
		t.Errorf("byUser after every session ended = %v; want empty", s.byUser)
	}
	// Handles are reused, and a reused one names its new string.
	d := issue(t, s, Session{Username: "dave", Stamp: 1}, 0, now)
	if got, err := s.Lookup(context.Background(), d, now); err != nil || got.Username != "dave" {
		t.Errorf("Lookup(dave's) = %+v, %v; want dave's session", got, err)
	}
}

// issue issues a fresh session for sess in s and returns its digest
// (storetest.MustIssue, which this package's own tests cannot import).
func issue(t *testing.T, s *MemoryStore, sess Session, limit int, now time.Time) Digest {
	t.Helper()
	_, d := New()
	if _, err := s.Issue(context.Background(), d, sess, limit, now); err != nil {
		t.Fatalf("Issue(%s) = %v; want nil", sess.Username, err)
	}
	return d
}

// TestMemoryStoreChallengesFreed: the memory store forgets a challenge and
// its user's index entry once the challenge is spent, used up or swept, so
// that mfa_tokens never abandoned to their expiry pile up.
func TestMemoryStoreChallengesFreed(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	now := time.Now()
	c := Challenge{Username: "alice", Stamp: 1, ExpiresAt: now.Add(5 * time.Minute), Attempts: 2}
	var spent, usedUp, expired, live Digest
	spent[0], usedUp[0], expired[0], live[0] = 1, 2, 3, 4
	for _, d := range []Digest{spent, usedUp, expired} {
		if err := s.PutChallenge(ctx, d, c, now); err != nil {
			t.Fatal(err)
		}
	}
	long := c
	long.ExpiresAt = now.Add(time.Hour)
	if err := s.PutChallenge(ctx, live, long, now); err != nil {
		t.Fatal(err)
	}
	s.SpendChallenge(ctx, spent)
	for range 2 {
		if _, err := s.TryChallenge(ctx, usedUp, now); err != nil {
			t.Fatal(err)
		}
	}
	s.Sweep(c.ExpiresAt)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.challenges) != 1 || len(s.userChallenges["alice"]) != 1 {
		t.Fatalf("after spending, using up and sweeping: %d challenges, alice's index %d; want only the live one in each", len(s.challenges), len(s.userChallenges["alice"]))
	}
	if _, ok := s.challenges[live]; !ok {
		t.Fatalf("the live challenge is gone")
	}
}
