package main

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedisStoreLookupBoundUnderPause: while Redis accepts commands and
// answers none (CLIENT PAUSE), every one of 3,000 concurrent look-ups fails
// closed within API.md's 5 s. The bound must hold by time, whatever the
// number of look-ups queued in front of one.
func TestRedisStoreLookupBoundUnderPause(t *testing.T) {
	url, _, _ := startRedis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	alice := Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	d := mustIssue(t, s, alice, 0, now)
	wantFound(t, s, d, now, alice) // the pipeline's connections are up

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
			lookFor := randomDigest()
			if i%2 == 0 {
				lookFor = d
			}
			_, err := s.Lookup(ctx, lookFor, now)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			slowest = max(slowest, took)
			if !errors.Is(err, errStoreUnavailable) {
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
		t.Errorf("%d of %d look-ups on a paused Redis did not fail with %v; first: %v", wrong, n, errStoreUnavailable, firstErr)
	}
	if slowest >= 5*time.Second {
		t.Errorf("slowest of %d look-ups on a paused Redis took %v; want < 5s (API.md)", n, slowest)
	}
}

// BenchmarkRedisLookup: concurrent look-ups of one live token through the
// pipeline, against a redis-server of its own.
func BenchmarkRedisLookup(b *testing.B) {
	url, _, _ := startRedis(b)
	s, err := newRedisStore(url, testPrefix())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	_, d := newToken()
	if err := s.Issue(ctx, d, Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 100, now); err != nil {
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
