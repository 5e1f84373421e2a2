package redisstore

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"
)

// revocationBound is what a test allows another instance to take to hear
// of a revocation. API.md's bound is 100 ms at the 99th percentile under
// load, which `make bench` holds the fleet to; a single revocation under
// go test -race on a loaded machine may take longer. It stays below
// linkDead, after which an instance whose invalidation link broke drops
// its cache: a revocation that only that drop ends still fails here.
const revocationBound = 500 * time.Millisecond

// twoStores returns two stores on one Redis and prefix, as two instances of
// a fleet, each with a client of its own, and a raw client of that Redis.
func twoStores(t *testing.T) (a, b *Store, raw *Store) {
	t.Helper()
	url, _, _ := testservers.Redis(t)
	prefix := testservers.UniquePrefix()
	mk := func() *Store {
		s := New(testRedisClient(t, url), prefix)
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b, raw = mk(), mk(), mk()
	raw.SetCacheSize(0)
	return a, b, raw
}

// mustCache looks d up on s until s answers it from its cache, which takes
// the subscription's confirmation and one read of Redis.
func mustCache(t *testing.T, s cachedStore, d tokens.Digest, now time.Time) tokens.Session {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		hits, _, _, _ := s.CacheStats()
		sess, err := s.Lookup(context.Background(), d, now)
		if err != nil {
			t.Fatalf("Lookup(%x…) = %v; want a session", d[:4], err)
		}
		if after, _, _, _ := s.CacheStats(); after > hits {
			return sess
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lookup(%x…) not answered from the cache within 5 s; want it cached", d[:4])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wantGone checks that Lookup(d) on s is ErrNotFound at once.
func wantGone(t *testing.T, name string, s *Store, d tokens.Digest, now time.Time) {
	t.Helper()
	if sess, err := s.Lookup(context.Background(), d, now); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("%s: Lookup(%x…) = %+v, %v; want ErrNotFound at once", name, d[:4], sess, err)
	}
}

// wantGoneWithin polls Lookup(d) on s until ErrNotFound and fails if that
// takes longer than revocationBound.
func wantGoneWithin(t *testing.T, name string, s *Store, d tokens.Digest, now time.Time, since time.Time) {
	t.Helper()
	for {
		_, err := s.Lookup(context.Background(), d, now)
		if errors.Is(err, tokens.ErrNotFound) {
			if took := time.Since(since); took > revocationBound {
				t.Errorf("%s: refused by the other instance after %v; want within %v", name, took, revocationBound)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: Lookup(%x…) = %v; want a session or ErrNotFound", name, d[:4], err)
		}
		if took := time.Since(since); took > 2*time.Second {
			t.Fatalf("%s: still answered by the other instance %v later; want ErrNotFound within %v", name, took, revocationBound)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCacheRevocationAcrossInstances: a session cached by two instances and
// killed through one (each way the store kills sessions) is refused by
// that one at once and by the other within 100 ms, through what the
// killing script published.
func TestCacheRevocationAcrossInstances(t *testing.T) {
	a, b, _ := twoStores(t)
	ctx := context.Background()
	now := time.Now()
	live := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	cases := []struct {
		name string
		kill func(t *testing.T, user string, d tokens.Digest)
	}{
		{"Revoke", func(t *testing.T, _ string, d tokens.Digest) {
			if err := a.Revoke(ctx, d); err != nil {
				t.Fatal(err)
			}
		}},
		{"RevokeUser", func(t *testing.T, user string, _ tokens.Digest) {
			if n, err := a.RevokeUser(ctx, user); n != 1 || err != nil {
				t.Fatalf("RevokeUser(%s) = %d, %v; want 1, nil", user, n, err)
			}
		}},
		{"Supersede", func(t *testing.T, user string, _ tokens.Digest) {
			sup := tokens.Supersession{Username: user, Stamp: 2, MaxStamp: 1 << 16, Before: time.Now()}
			if n, err := a.Supersede(ctx, sup); n != 1 || err != nil {
				t.Fatalf("Supersede(%s) = %d, %v; want 1, nil", user, n, err)
			}
		}},
		{"RevokeID", func(t *testing.T, user string, d tokens.Digest) {
			ls, err := a.List(ctx, user, now)
			if err != nil || len(ls) != 1 {
				t.Fatalf("List(%s) = %v, %v; want one session", user, ls, err)
			}
			if ok, err := a.RevokeID(ctx, user, ls[0].ID); !ok || err != nil {
				t.Fatalf("RevokeID = %v, %v; want true, nil", ok, err)
			}
		}},
		{"IssueEvicts", func(t *testing.T, user string, _ tokens.Digest) {
			sess := live
			sess.Username = user
			if n, err := a.Issue(ctx, tokens.Digest{1, byte(len(user))}, sess, 1, now.Add(time.Millisecond)); n != 1 || err != nil {
				t.Fatalf("Issue at the limit = %d, %v; want 1 evicted, nil", n, err)
			}
		}},
	}
	// A hears its own invalidations only after its at-once check: that
	// one must hold without them.
	var deaf sync.Mutex
	a.heard = func(string) { deaf.Lock(); deaf.Unlock() }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			user := "user-" + c.name
			sess := live
			sess.Username = user
			sess.ID = tokens.NewSessionID()
			d := storetest.MustIssue(t, a, sess, 0, now)
			mustCache(t, a, d, now)
			mustCache(t, b, d, now)
			deaf.Lock()
			c.kill(t, user, d)
			killed := time.Now()
			wantGone(t, "the killing instance", a, d, now)
			deaf.Unlock()
			wantGoneWithin(t, "the other instance", b, d, now, killed)
		})
	}
}

// TestCacheLinkBreak: an instance whose invalidation link breaks forgets
// what it cached before it answers again. A session deleted behind the
// stores' back (a DEL: nothing published) is answered from B's cache
// while the link holds, and refused once B has seen the link break.
func TestCacheLinkBreak(t *testing.T) {
	a, b, raw := twoStores(t)
	ctx := context.Background()
	now := time.Now()
	d := storetest.MustIssue(t, a, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 0, now)
	mustCache(t, b, d, now)
	if err := raw.client.Del(ctx, b.keys.token(d)).Err(); err != nil {
		t.Fatal(err)
	}
	// The test means something only if the cache answers past Redis.
	if _, err := b.Lookup(ctx, d, now); err != nil {
		t.Fatalf("Lookup(d) on B after a silent DEL = %v; want the cached session (is the cache on?)", err)
	}
	_, _, breaks, _ := b.CacheStats()
	if err := raw.client.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, after, _ := b.CacheStats(); after > breaks {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B did not see its link break within 5 s of CLIENT KILL TYPE pubsub")
		}
		time.Sleep(time.Millisecond)
	}
	// Asked only once the link is back: what B kept before the break must
	// not answer over the new one (and a Lookup while it is down would
	// read Redis and hide that).
	for {
		if _, keep, _ := b.cache.snapshot(); keep {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B did not subscribe again within 5 s of CLIENT KILL TYPE pubsub")
		}
		time.Sleep(time.Millisecond)
	}
	wantGone(t, "B after its link broke and came back", b, d, now)

	// The link comes back by itself, and the cache with it.
	d2 := storetest.MustIssue(t, a, tokens.Session{Username: "bob", Stamp: 1}, 0, now)
	mustCache(t, b, d2, now)
}

// TestCacheSilentLink: a link that stops answering (here Redis paused) stops
// the cache within linkFresh, before anything tells it the link is
// broken: a session deleted silently is not answered from the cache.
func TestCacheSilentLink(t *testing.T) {
	_, b, raw := twoStores(t)
	ctx := context.Background()
	now := time.Now()
	d := storetest.MustIssue(t, b, tokens.Session{Username: "alice", Stamp: 1}, 0, now)
	mustCache(t, b, d, now)
	if err := raw.client.Del(ctx, b.keys.token(d)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lookup(ctx, d, now); err != nil {
		t.Fatalf("Lookup(d) after a silent DEL = %v; want the cached session (is the cache on?)", err)
	}
	// redis-cli, not raw's client: that one would wait out the pause too.
	host, port, _ := net.SplitHostPort(raw.client.Options().Addr)
	if out, err := exec.Command("redis-cli", "-h", host, "-p", port, "CLIENT", "PAUSE", "1000", "ALL").CombinedOutput(); err != nil {
		t.Fatalf("redis-cli CLIENT PAUSE: %v %s", err, out)
	}
	time.Sleep(linkFresh + 2*pingInterval)
	lctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if sess, err := b.Lookup(lctx, d, now); err == nil {
		t.Errorf("Lookup(d) with the link silent for %v = %+v, nil; want an error (no answer from the cache)", linkFresh+2*pingInterval, sess)
	}
}

// TestCacheStaleRead: a look-up that read Redis before an invalidation
// arrived answers what it read, but does not keep it: the generation rule.
// The hook revokes the session through A between B's read and its put,
// and waits for B to hear of it.
func TestCacheStaleRead(t *testing.T) {
	a, b, _ := twoStores(t)
	ctx := context.Background()
	now := time.Now()
	warm := storetest.MustIssue(t, a, tokens.Session{Username: "bob", Stamp: 1}, 0, now)
	mustCache(t, b, warm, now) // the link is up
	d := storetest.MustIssue(t, a, tokens.Session{Username: "alice", Stamp: 1}, 0, now)
	b.afterRead = func(got tokens.Digest) {
		if got != d {
			return
		}
		b.cache.mu.Lock()
		gen := b.cache.gen
		b.cache.mu.Unlock()
		if err := a.Revoke(ctx, d); err != nil {
			t.Error(err)
		}
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			b.cache.mu.Lock()
			moved := b.cache.gen != gen
			b.cache.mu.Unlock()
			if moved {
				return
			}
		}
		t.Error("B heard nothing of the revocation within 2 s")
	}
	if _, err := b.Lookup(ctx, d, now); err != nil {
		t.Fatalf("Lookup(d) read before the revocation = %v; want the session it read", err)
	}
	b.afterRead = nil
	wantGone(t, "B after a read that raced the revocation", b, d, now)
}

// TestCacheLastUse: this instance's Touch moves the cached last use at once;
// another instance's reaches the cache only through a fresh Lookup
// (tokens.WithFresh), which also keeps what it read.
func TestCacheLastUse(t *testing.T) {
	a, b, _ := twoStores(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	d := storetest.MustIssue(t, a, tokens.Session{Username: "alice", Stamp: 1}, 0, now)
	mustCache(t, b, d, now)

	mine := now.Add(time.Minute)
	b.Touch(ctx, d, mine)
	if sess, err := b.Lookup(ctx, d, now); err != nil || !sess.LastUsedAt.Equal(mine) {
		t.Errorf("Lookup(d) on B after B's Touch = %v, %v; want last used %v at once", sess.LastUsedAt, err, mine)
	}

	theirs := now.Add(2 * time.Minute)
	a.Touch(ctx, d, theirs)
	deadline := time.Now().Add(5 * time.Second)
	for {
		sess, err := a.Lookup(tokens.WithFresh(ctx), d, now)
		if err == nil && sess.LastUsedAt.Equal(theirs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's Touch not in Redis within 5 s: Lookup = %v, %v", sess.LastUsedAt, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if sess, err := b.Lookup(ctx, d, now); err != nil || !sess.LastUsedAt.Equal(mine) {
		t.Errorf("cached Lookup(d) on B after A's Touch = %v, %v; want B's own %v (the cache is not told of uses)", sess.LastUsedAt, err, mine)
	}
	if sess, err := b.Lookup(tokens.WithFresh(ctx), d, now); err != nil || !sess.LastUsedAt.Equal(theirs) {
		t.Errorf("fresh Lookup(d) on B = %v, %v; want %v, from Redis", sess.LastUsedAt, err, theirs)
	}
	if sess, err := b.Lookup(ctx, d, now); err != nil || !sess.LastUsedAt.Equal(theirs) {
		t.Errorf("cached Lookup(d) on B after a fresh one = %v, %v; want %v, kept", sess.LastUsedAt, err, theirs)
	}
}

// TestCacheExpiry: a cached session is judged against now as Redis's is.
func TestCacheExpiry(t *testing.T) {
	_, b, _ := twoStores(t)
	now := time.Now()
	exp := now.Add(time.Hour)
	d := storetest.MustIssue(t, b, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: exp}, 0, now)
	mustCache(t, b, d, now)
	wantGone(t, "cached session at its expiry", b, d, exp)
	if _, err := b.Lookup(context.Background(), d, exp.Add(-time.Millisecond)); err != nil {
		t.Errorf("cached Lookup a millisecond before expiry = %v; want the session", err)
	}
}
