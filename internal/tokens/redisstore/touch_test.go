package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"
)

// TestRedisTouchNeverDropped: uses recorded while Redis cannot take them
// (here paused) are all written once it can: none is dropped, so a token
// used within --token-idle is never refused for idleness (issue 19, point
// 9). Before, Touch dropped what did not fit a 4,096-entry queue.
func TestRedisTouchNeverDropped(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	client := testRedisClient(t, url)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	const n = 6000
	digests := make([]tokens.Digest, n)
	for i := range digests {
		// A user each: one user's Issue costs O(their sessions).
		digests[i] = storetest.MustIssue(t, s, tokens.Session{Username: "user" + strconv.Itoa(i), Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 0, now)
	}
	if err := client.Do(ctx, "CLIENT", "PAUSE", "1500", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	used := now.Add(time.Minute)
	for _, d := range digests {
		s.Touch(ctx, d, used)
	}
	deadline := time.Now().Add(10 * time.Second)
	// What Redis holds, not what a Lookup read before the write kept.
	fresh := tokens.WithFresh(ctx)
	for _, d := range digests {
		for {
			sess, err := s.Lookup(fresh, d, now)
			if err == nil && sess.LastUsedAt.Equal(used) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Lookup(%x…) 10 s after its use = %v, last used %v; want last used %v (a use was dropped)", d[:4], err, sess.LastUsedAt, used)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
