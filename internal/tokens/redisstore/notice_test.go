package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"
)

// A notifyingStore is what both stores are to serve: a store, its cache,
// and its user notices.
type notifyingStore interface {
	tokens.Store
	tokens.UserNotifier
	Cached
}

// clusterPair returns two stores on the cluster at addrs and one prefix,
// as two instances of a fleet, each with a client of its own.
func clusterPair(t *testing.T, addrs []string) (a, b *ClusterStore) {
	t.Helper()
	prefix := testservers.UniquePrefix()
	return clusterStoreOn(t, addrs, prefix), clusterStoreOn(t, addrs, prefix)
}

// listen registers on s a hook that hands each notice to the channel it
// returns; block, when it names a notice, holds the hook on that one until
// release is closed.
func listen(s tokens.UserNotifier, block string, release <-chan struct{}) <-chan string {
	heard := make(chan string, 2*maxPendingNotices)
	s.OnUserNotice(func(username string) {
		heard <- username
		if username == block && block != "" {
			<-release
		}
	})
	return heard
}

// hearUntil returns the notices heard before want, and fails if want is
// not heard within 5 s.
func hearUntil(t *testing.T, heard <-chan string, want string) []string {
	t.Helper()
	var before []string
	timeout := time.After(5 * time.Second)
	for {
		select {
		case u := <-heard:
			if u == want {
				return before
			}
			before = append(before, u)
		case <-timeout:
			t.Fatalf("notice %q not heard within 5 s; heard %d others, first %q", want, len(before), before[:min(len(before), 5)])
		}
	}
}

// subscribed waits for from's notices to reach heard (the subscription is
// made in the background), and leaves nothing of the wait in heard.
func subscribed(t *testing.T, from tokens.UserNotifier, heard <-chan string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Second)
	for reached := false; !reached; {
		if err := from.NotifyUser(ctx, "warm-up"); err != nil {
			t.Fatalf("NotifyUser(warm-up) = %v", err)
		}
		select {
		case u := <-heard:
			reached = u == "warm-up"
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no notice heard within 5 s of OnUserNotice")
		}
	}
	if err := from.NotifyUser(ctx, "in-sync"); err != nil {
		t.Fatalf("NotifyUser(in-sync) = %v", err)
	}
	if before := hearUntil(t, heard, "in-sync"); slices.ContainsFunc(before, func(u string) bool { return u != "warm-up" }) {
		t.Fatalf("notices heard while subscribing = %q; want only warm-ups", before)
	}
}

// TestNotifyUser: a notice published by one instance reaches the hook of
// another on the same Redis or Cluster within the revocation bound (API.md,
// Operations: 100 ms), with that instance's cache off (--store-cache 0):
// the notices need the subscription, not the cache.
func TestNotifyUser(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	addrs, _ := testservers.RedisCluster(t)
	prefix := testservers.UniquePrefix()
	single := func() notifyingStore {
		s := New(testRedisClient(t, url), prefix)
		t.Cleanup(func() { s.Close() })
		return s
	}
	ca, cb := clusterPair(t, addrs)
	pairs := []struct {
		name string
		a, b notifyingStore
	}{
		{"redis", single(), single()},
		{"cluster", ca, cb},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			p.b.SetCacheSize(0)
			heard := listen(p.b, "", nil)
			subscribed(t, p.a, heard)
			var worst time.Duration
			for i := range 20 {
				username := fmt.Sprintf("alice-%d", i)
				sent := time.Now()
				if err := p.a.NotifyUser(context.Background(), username); err != nil {
					t.Fatalf("NotifyUser(%s) = %v", username, err)
				}
				if before := hearUntil(t, heard, username); len(before) > 0 {
					t.Errorf("heard %q before %s; want nothing else", before, username)
				}
				took := time.Since(sent)
				worst = max(worst, took)
				if took > revocationBound {
					t.Errorf("notice of %s heard by the other instance after %v; want within %v", username, took, revocationBound)
				}
			}
			t.Logf("%s: slowest of 20 notices heard after %v", p.name, worst)
		})
	}
}

// TestNotifyUserNotInvalidations: the session invalidations on the same
// channel (t:, u:, whoever publishes them) never reach the hook; and a
// store's own notices reach its own hook.
func TestNotifyUserNotInvalidations(t *testing.T) {
	a, b, raw := twoStores(t)
	heard := listen(b, "", nil)
	subscribed(t, a, heard)
	ctx := context.Background()
	now := time.Now()
	d := storetest.MustIssue(t, a, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 0, now)
	if err := a.Revoke(ctx, d); err != nil {
		t.Fatal(err)
	}
	storetest.MustIssue(t, a, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 0, now)
	if n, err := a.RevokeUser(ctx, "alice"); n != 1 || err != nil {
		t.Fatalf("RevokeUser(alice) = %d, %v; want 1, nil", n, err)
	}
	for _, payload := range []string{"t:" + strings.Repeat("ab", 32), "u:bob", "x:carol", "d"} {
		if err := raw.client.Publish(ctx, b.invChannel(), payload).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// The channel keeps its order: "end" comes after all of the above.
	if err := b.NotifyUser(ctx, "end"); err != nil {
		t.Fatalf("NotifyUser(end) = %v", err)
	}
	if before := hearUntil(t, heard, "end"); len(before) > 0 {
		t.Errorf("hook heard %q from invalidations; want nothing", before)
	}
}

// TestNotifyUserLinkBreak: notices published while an instance's link is
// broken are lost to it, so once it is back its hook hears "" (every
// user), and then notices again.
func TestNotifyUserLinkBreak(t *testing.T) {
	a, b, raw := twoStores(t)
	b.SetCacheSize(0)
	heard := listen(b, "", nil)
	subscribed(t, a, heard)
	ctx := context.Background()
	if err := raw.client.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	if before := hearUntil(t, heard, ""); len(before) > 0 {
		t.Errorf("heard %q before the link came back; want nothing", before)
	}
	subscribed(t, a, heard)
}

// TestNotifyUserSlowHook: a hook that takes its time holds up neither the
// cache's invalidations (a revocation still reaches the other instance
// within the bound) nor Redis (the notices wait in a bounded queue); the
// notices that found the queue full are told as one "" (every user).
func TestNotifyUserSlowHook(t *testing.T) {
	a, b, raw := twoStores(t)
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	heard := listen(b, "block", release)
	subscribed(t, a, heard)
	ctx := context.Background()
	now := time.Now()
	d := storetest.MustIssue(t, a, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 0, now)
	mustCache(t, b, d, now)

	if err := a.NotifyUser(ctx, "block"); err != nil {
		t.Fatal(err)
	}
	hearUntil(t, heard, "block") // the hook now waits for release
	p := raw.client.Pipeline()
	for i := range maxPendingNotices + 10 {
		p.Publish(ctx, b.invChannel(), fmt.Sprintf("d:user-%d", i))
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Revoke(ctx, d); err != nil {
		t.Fatal(err)
	}
	wantGoneWithin(t, "the instance whose hook is stuck", b, d, now, time.Now())

	close(release)
	if before := hearUntil(t, heard, ""); len(before) > 0 {
		t.Errorf("hook heard %d notices before \"\"; want the overflowed queue told as \"\" alone", len(before))
	}
	subscribed(t, a, heard)
}

// TestNoticeQueue: what the hook hears of the notices queued since it was
// last called.
func TestNoticeQueue(t *testing.T) {
	t.Parallel()
	many := make([]string, maxPendingNotices+1)
	for i := range many {
		many[i] = fmt.Sprint("user-", i)
	}
	tests := []struct {
		name   string
		hooked bool
		posts  []string
		want   []string
	}{
		{"no hook", false, []string{"alice"}, nil},
		{"in order", true, []string{"alice", "bob", "alice"}, []string{"alice", "bob", "alice"}},
		{"everyone", true, []string{"alice", "", "bob"}, []string{""}},
		{"full", true, many, []string{""}},
		{"just fits", true, many[:maxPendingNotices], many[:maxPendingNotices]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := noticeQueue{wake: make(chan struct{}, 1)}
			if tt.hooked {
				q.hook = func(string) {}
			}
			for _, u := range tt.posts {
				q.post(u)
			}
			if _, got := q.take(); !slices.Equal(got, tt.want) {
				t.Errorf("take() after posting %d = %d notices %.40q; want %d %.40q", len(tt.posts), len(got), got, len(tt.want), tt.want)
			}
			if _, got := q.take(); len(got) != 0 {
				t.Errorf("second take() = %q; want nothing", got)
			}
		})
	}
}
