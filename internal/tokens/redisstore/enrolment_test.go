package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"
)

// cachedStore is a store whose cache a test sizes and watches: Store or
// ClusterStore.
type cachedStore interface {
	tokens.Store
	Cached
}

// issueAlice issues alice a session at now, with the mark or without.
func issueAlice(t *testing.T, s tokens.Store, enrolment bool, now time.Time) tokens.Digest {
	t.Helper()
	return storetest.MustIssue(t, s, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour),
		ID: tokens.NewSessionID(), Enrolment: enrolment}, 0, now)
}

// lookupAllocs returns the allocations of one Lookup of d on s, which
// must find it.
func lookupAllocs(t *testing.T, s tokens.Store, d tokens.Digest, now time.Time) float64 {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Lookup(ctx, d, now); err != nil {
		t.Fatalf("Lookup = %v; want a session", err)
	}
	return testing.AllocsPerRun(200, func() { s.Lookup(ctx, d, now) })
}

// checkEnrolmentAllocs: the mark costs the hot path nothing. Answered
// from the cache, a Lookup of an enrolment session allocates nothing;
// read from Redis, it allocates at most markCost more than one of a full
// session.
func checkEnrolmentAllocs(t *testing.T, s cachedStore, markCost float64) {
	now := time.Now()
	full, enrol := issueAlice(t, s, false, now), issueAlice(t, s, true, now)
	s.SetCacheSize(0)
	if f, e := lookupAllocs(t, s, full, now), lookupAllocs(t, s, enrol, now); e > f+markCost {
		t.Errorf("uncached Lookup allocations: enrolment session %v, full session %v; want at most %v more for the mark", e, f, markCost)
	}
	s.SetCacheSize(10)
	if !mustCache(t, s, enrol, now).Enrolment {
		t.Fatal("cached Lookup(enrolment session).Enrolment = false; want true")
	}
	if n := lookupAllocs(t, s, enrol, now); n != 0 {
		t.Errorf("cached Lookup of an enrolment session: %v allocations; want 0", n)
	}
}

// On one Redis the look-up script gives the mark as the integer 0 or 1,
// which go-redis boxes without allocating.
func TestRedisStoreEnrolmentAllocs(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	checkEnrolmentAllocs(t, newTestRedisStore(t, url), 0)
}

// On a Cluster the look-up reads the token key with a plain HMGET, and
// go-redis reads a present field into a buffer and an interface of its
// own: two allocations, paid only by enrolment sessions and only on a
// read of Redis. (Asking for an integer instead, HEXISTS, would cost
// every look-up a command.)
func TestRedisClusterStoreEnrolmentAllocs(t *testing.T) {
	addrs, _ := testservers.RedisCluster(t)
	checkEnrolmentAllocs(t, newTestClusterStore(t, addrs), 2)
}

// TestRedisStoreEnrolmentField: a token key without the n field (every
// session older versions wrote) is a full session; an n the store never
// writes is a corrupt session, never a full one.
func TestRedisStoreEnrolmentField(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	s.SetCacheSize(0)
	ctx := context.Background()
	now := time.Now()
	d := issueAlice(t, s, true, now)
	key := s.keys.token(d)
	if got, err := s.client.HGet(ctx, key, "n").Result(); got != "1" || err != nil {
		t.Fatalf("HGET %s n = %q, %v; want \"1\"", key, got, err)
	}
	if err := s.client.HDel(ctx, key, "n").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lookup(ctx, d, now); err != nil || got.Enrolment {
		t.Errorf("Lookup(session without n) = Enrolment %v, %v; want a full session", got.Enrolment, err)
	}
	if ls, err := s.List(ctx, "alice", now); err != nil || len(ls) != 1 || ls[0].Enrolment {
		t.Errorf("List(alice) = %+v, %v; want one full session", ls, err)
	}
	if err := s.client.HSet(ctx, key, "n", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lookup(ctx, d, now); !errors.Is(err, tokens.ErrUnavailable) {
		t.Errorf("Lookup(session with n = 0) = Enrolment %v, %v; want an error wrapping %v", got.Enrolment, err, tokens.ErrUnavailable)
	}
	if ls, err := s.List(ctx, "alice", now); !errors.Is(err, tokens.ErrUnavailable) {
		t.Errorf("List(alice, a session with n = 0) = %+v, %v; want an error wrapping %v", ls, err, tokens.ErrUnavailable)
	}
}

// TestCacheEnrolmentAcrossInstances: a digest that both instances cached
// as an enrolment session, superseded and issued again without the mark
// through one, is a full session on the other within 100 ms.
func TestCacheEnrolmentAcrossInstances(t *testing.T) {
	a, b, _ := twoStores(t)
	ctx := context.Background()
	now := time.Now()
	d := issueAlice(t, a, true, now)
	for _, s := range []*Store{a, b} {
		if !mustCache(t, s, d, now).Enrolment {
			t.Fatal("cached Lookup(enrolment session).Enrolment = false; want true")
		}
	}
	later := now.Add(time.Second)
	if _, err := a.Supersede(ctx, tokens.Supersession{Username: "alice", Stamp: 2, MaxStamp: 1 << 16, Before: later}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Issue(ctx, d, tokens.Session{Username: "alice", Stamp: 2, ExpiresAt: now.Add(time.Hour), ID: tokens.NewSessionID()}, 0, later); err != nil {
		t.Fatal(err)
	}
	issued := time.Now()
	for {
		got, err := b.Lookup(ctx, d, later)
		if err != nil {
			t.Fatalf("Lookup on the other instance = %v; want a session", err)
		}
		if !got.Enrolment {
			break
		}
		if took := time.Since(issued); took > revocationBound {
			t.Fatalf("the other instance still answers Enrolment true after %v; want a full session within %v", took, revocationBound)
		}
		time.Sleep(time.Millisecond)
	}
	if got, err := a.Lookup(ctx, d, later); err != nil || got.Enrolment {
		t.Errorf("Lookup on the issuing instance = Enrolment %v, %v; want a full session at once", got.Enrolment, err)
	}
}
