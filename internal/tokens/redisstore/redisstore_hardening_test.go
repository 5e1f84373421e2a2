package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"

	"github.com/redis/go-redis/v9"
)

// TestRedisStoreLookupBoundUnderPause: while Redis accepts commands and
// answers none (CLIENT PAUSE), every one of 3,000 concurrent look-ups fails
// closed within API.md's 5 s. The bound must hold by time, whatever the
// number of look-ups queued in front of one.
func TestRedisStoreLookupBoundUnderPause(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	alice := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	d := storetest.MustIssue(t, s, alice, 0, now)
	storetest.WantFound(t, s, d, now, alice) // the pipeline's connections are up

	admin := redis.NewClient(&redis.Options{Addr: s.client.Options().Addr})
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "10000", "ALL").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}

	const n = 3000
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		slowest  time.Duration
		wrong    int
		firstErr error
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			lookFor := storetest.RandomDigest()
			if i%2 == 0 {
				lookFor = d
			}
			_, err := s.Lookup(ctx, lookFor, now)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			slowest = max(slowest, took)
			if !errors.Is(err, tokens.ErrUnavailable) {
				wrong++
				if firstErr == nil {
					firstErr = err
					if err == nil {
						firstErr = errors.New("nil error (a session)")
					}
				}
			}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d look-ups on a paused Redis: all done after %v, slowest %v", n, time.Since(t0), slowest)
	if wrong > 0 {
		t.Errorf("%d of %d look-ups on a paused Redis did not fail with %v; first: %v", wrong, n, tokens.ErrUnavailable, firstErr)
	}
	if slowest >= 5*time.Second {
		t.Errorf("slowest of %d look-ups on a paused Redis took %v; want < 5s (API.md)", n, slowest)
	}
}

// fillRedisPastMaxmemory writes about 1 MiB of filler keys to the Redis
// behind c, then sets a noeviction memory limit 256 KiB below what it uses,
// and checks that writes are refused. (Filling up to the limit instead
// leaves the usage hovering at it, where some writes get through.)
func fillRedisPastMaxmemory(t *testing.T, c *redis.Client) {
	t.Helper()
	ctx := context.Background()
	filler := strings.Repeat("x", 4096)
	for i := range 256 {
		if err := c.Set(ctx, "filler:"+strconv.Itoa(i), filler, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			used, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO memory: used_memory:%s", v)
			}
		}
	}
	if used < 1<<20 {
		t.Fatalf("INFO memory: used_memory %d after 1 MiB of filler", used)
	}
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used-256<<10, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "filler:one-more", filler, 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("SET past maxmemory = %v; want an OOM error", err)
	}
}

// TestRedisStoreIssueAtMaxmemory: a Redis at its memory limit under
// noeviction refuses new sessions, and Issue says so (ErrUnavailable)
// instead of storing past the limit. Whatever Issue answers, it never
// reports success for a session Lookup cannot find, nor leaves half of one.
func TestRedisStoreIssueAtMaxmemory(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	alice := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	before := storetest.MustIssue(t, s, alice, 100, now)

	fillRedisPastMaxmemory(t, s.client)
	for i := range 5 {
		sess := alice
		if i%2 == 1 {
			sess.ExpiresAt = time.Time{} // the script's no-expiry branch too
		}
		_, d := tokens.New()
		_, err := s.Issue(ctx, d, sess, 100, now)
		if i == 0 {
			t.Logf("Issue at maxmemory = %v", err)
		}
		got, lerr := s.Lookup(ctx, d, now)
		switch {
		case err == nil && lerr != nil:
			t.Fatalf("Issue at maxmemory = nil, but Lookup = %v: a success for a session never stored", lerr)
		case err == nil:
			t.Errorf("Issue at maxmemory = nil (session %+v stored past the limit); want an error wrapping %v", got, tokens.ErrUnavailable)
		case !errors.Is(err, tokens.ErrUnavailable):
			t.Errorf("Issue at maxmemory = %v; want an error wrapping %v", err, tokens.ErrUnavailable)
		case !errors.Is(lerr, tokens.ErrNotFound):
			t.Errorf("after a refused Issue, Lookup = %+v, %v; want %v", got, lerr, tokens.ErrNotFound)
		}
		if err != nil {
			if n, err := s.client.Exists(ctx, s.keys.token(d)).Result(); n != 0 || err != nil {
				t.Errorf("after a refused Issue, EXISTS token key = %d, %v; want 0 (nothing half-stored)", n, err)
			}
		}
	}
	// Sessions stored before the limit was reached still work, and so does
	// Issue once memory is free again.
	storetest.WantFound(t, s, before, now, alice)
	if err := s.client.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	after := storetest.MustIssue(t, s, alice, 100, now)
	storetest.WantFound(t, s, after, now, alice)
}

// TestRedisStoreRevokeUserEvictedIndex: logoutall must not report success
// while the user's tokens live on, even when Redis has evicted the user's
// index (volatile-lru and allkeys-lru may). Other users' tokens stay.
func TestRedisStoreRevokeUserEvictedIndex(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	alice := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	bob := tokens.Session{Username: "bob", Stamp: 2, ExpiresAt: now.Add(time.Hour)}
	var alices, bobs []tokens.Digest
	for i := range 3 {
		sess := alice
		if i == 2 {
			sess.ExpiresAt = time.Time{}
		}
		alices = append(alices, storetest.MustIssue(t, s, sess, 100, now))
		bobs = append(bobs, storetest.MustIssue(t, s, bob, 100, now))
	}

	// Eviction, simulated.
	if err := s.client.Del(ctx, s.keys.index("alice")).Err(); err != nil {
		t.Fatal(err)
	}
	n, err := s.RevokeUser(ctx, "alice")
	t.Logf("RevokeUser(alice) with its index evicted = %d, %v", n, err)
	for i, d := range alices {
		got, err := s.Lookup(ctx, d, now)
		if err == nil {
			t.Errorf("after RevokeUser(alice), Lookup(alice's token %d) = %+v; want an error, never a session", i, got)
		}
	}
	for _, d := range bobs {
		storetest.WantFound(t, s, d, now, bob)
	}

	// Found dead, they are deleted: nothing else would find them.
	for i, d := range alices {
		if n, err := s.client.Exists(ctx, s.keys.token(d)).Result(); n != 0 || err != nil {
			t.Errorf("EXISTS alice's token key %d after a refused Lookup = %d, %v; want 0", i, n, err)
		}
	}

	// Alice can log in again; her old tokens stay dead.
	fresh := storetest.MustIssue(t, s, alice, 100, now)
	storetest.WantFound(t, s, fresh, now, alice)
	for _, d := range alices {
		storetest.WantNotFound(t, s, d, now)
	}
	if _, err := s.RevokeUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	storetest.WantNotFound(t, s, fresh, now)
	for _, d := range bobs {
		storetest.WantFound(t, s, d, now, bob)
	}
}

// TestRedisStoreLookupScriptFlushed: look-ups go on when Redis has lost its
// script cache (a restart, SCRIPT FLUSH).
func TestRedisStoreLookupScriptFlushed(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	alice := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	d := storetest.MustIssue(t, s, alice, 100, now)
	storetest.WantFound(t, s, d, now, alice)
	if err := s.client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	storetest.WantFound(t, s, d, now, alice)
	storetest.WantNotFound(t, s, storetest.RandomDigest(), now)
}

// TestRedisStoreLookupWrongType: a key of the wrong type fails its own
// look-up closed and no other look-up batched with it.
func TestRedisStoreLookupWrongType(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	alice := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	good := storetest.MustIssue(t, s, alice, 100, now)
	bad := storetest.RandomDigest()
	if err := s.client.Set(ctx, s.keys.token(bad), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	badIndex := storetest.RandomDigest()
	if err := s.client.HSet(ctx, s.keys.token(badIndex), "u", "mallory", "s", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.client.Set(ctx, s.keys.index("mallory"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if got, err := s.Lookup(ctx, good, now); err != nil || got.Username != "alice" {
				t.Errorf("Lookup(good) = %+v, %v; want alice's session", got, err)
			}
		})
		for _, d := range []tokens.Digest{bad, badIndex} {
			wg.Go(func() {
				if got, err := s.Lookup(ctx, d, now); !errors.Is(err, tokens.ErrUnavailable) {
					t.Errorf("Lookup(wrong type) = %+v, %v; want an error wrapping %v", got, err, tokens.ErrUnavailable)
				}
			})
		}
	}
	wg.Wait()
}

// BenchmarkRedisLookup: concurrent look-ups of one live token through the
// pipeline, against a redis-server of its own.
func BenchmarkRedisLookup(b *testing.B) {
	url, _, _ := testservers.Redis(b)
	s := New(testRedisClient(b, url), testservers.UniquePrefix())
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	_, d := tokens.New()
	if _, err := s.Issue(ctx, d, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 100, now); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(32)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Lookup(ctx, d, now); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
