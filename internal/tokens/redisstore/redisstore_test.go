package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"

	"github.com/redis/go-redis/v9"
)

// testRedisClient returns a client of the Redis at url, closed when t ends.
func testRedisClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	client, err := Dial(url)
	if err != nil {
		t.Fatalf("Dial(%q) = %v", url, err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// newTestRedisStore returns a store on url under a fresh prefix, closed when
// t ends.
func newTestRedisStore(t *testing.T, url string) *Store {
	t.Helper()
	s := New(testRedisClient(t, url), testservers.UniquePrefix())
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRedisStore(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	storetest.Run(t, func(t *testing.T) tokens.Store {
		return newTestRedisStore(t, url)
	})
}

// TestRedisStoreKeys checks the key layout: expiry by PEXPIREAT on the token
// key and the index, none for a session that never expires.
func TestRedisStoreKeys(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()

	expiresAt := now.Add(time.Hour)
	d := storetest.MustIssue(t, s, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: expiresAt}, 0, now)
	for _, key := range []string{s.keys.token(d), s.keys.index("alice")} {
		got, err := s.client.PExpireTime(ctx, key).Result()
		if want := time.Duration(expiresAt.UnixMilli()) * time.Millisecond; got != want || err != nil {
			t.Errorf("PEXPIRETIME %s = %v, %v; want %v, nil", key, got, err, want)
		}
	}

	// A session that never expires keeps the index from expiring.
	never := storetest.MustIssue(t, s, tokens.Session{Username: "alice", Stamp: 1}, 0, now)
	for _, key := range []string{s.keys.token(never), s.keys.index("alice")} {
		if got, err := s.client.PTTL(ctx, key).Result(); got != -1 || err != nil {
			t.Errorf("PTTL %s = %v, %v; want -1 (no expiry), nil", key, got, err)
		}
	}
}

// TestRedisStoreStampKey checks the key a Supersede keeps: the stamp,
// expiring at Until (never without one), gone for stamp 0.
func TestRedisStoreStampKey(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	if _, err := s.Supersede(ctx, tokens.Supersession{Username: "alice", Stamp: 3, MaxStamp: 1 << 16, Before: time.Now(), Until: until}); err != nil {
		t.Fatal(err)
	}
	key := s.keys.stamp("alice")
	if got, err := s.client.Get(ctx, key).Result(); got != "3" || err != nil {
		t.Errorf("GET %s = %q, %v; want \"3\"", key, got, err)
	}
	if got, err := s.client.PExpireTime(ctx, key).Result(); got != time.Duration(until.UnixMilli())*time.Millisecond || err != nil {
		t.Errorf("PEXPIRETIME %s = %v, %v; want %v", key, got, err, until.UnixMilli())
	}
	if _, err := s.Supersede(ctx, tokens.Supersession{Username: "alice", Stamp: 4, MaxStamp: 1 << 16, Before: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.client.PTTL(ctx, key).Result(); got != -1 || err != nil {
		t.Errorf("PTTL %s after a Supersede for ever = %v, %v; want -1 (no expiry)", key, got, err)
	}
	if _, err := s.Supersede(ctx, tokens.Supersession{Username: "alice", MaxStamp: 1 << 16, Before: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.client.Exists(ctx, key).Result(); n != 0 || err != nil {
		t.Errorf("EXISTS %s after a Supersede with stamp 0 = %d, %v; want 0", key, n, err)
	}
}

// TestRedisStoreChallengeKeys checks the challenge keys: the c: key and
// the user's challenges expire by PEXPIREAT (the hash with its latest
// challenge), a PutChallenge drops the user's challenges expired at its
// now, and a spent challenge leaves no key behind.
func TestRedisStoreChallengeKeys(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	soon, later := now.Add(time.Minute), now.Add(5*time.Minute)
	d1 := storetest.MustPutChallenge(t, s, tokens.Challenge{Username: "alice", Stamp: 1, ExpiresAt: later, Attempts: 5}, now)
	d2 := storetest.MustPutChallenge(t, s, tokens.Challenge{Username: "alice", Stamp: 1, ExpiresAt: soon, Attempts: 5}, now)
	for key, want := range map[string]time.Time{s.keys.challenge(d1): later, s.keys.challenge(d2): soon, s.keys.challenges("alice"): later} {
		got, err := s.client.PExpireTime(ctx, key).Result()
		if want := time.Duration(want.UnixMilli()) * time.Millisecond; got != want || err != nil {
			t.Errorf("PEXPIRETIME %s = %v, %v; want %v, nil", key, got, err, want)
		}
	}
	if got, err := s.client.Get(ctx, s.keys.challenge(d1)).Result(); got != "alice" || err != nil {
		t.Errorf("GET %s = %q, %v; want \"alice\"", s.keys.challenge(d1), got, err)
	}
	// A PutChallenge after d1 expired drops it.
	d3 := storetest.MustPutChallenge(t, s, tokens.Challenge{Username: "alice", Stamp: 1, ExpiresAt: later.Add(time.Minute), Attempts: 5}, later)
	fields, err := s.client.HKeys(ctx, s.keys.challenges("alice")).Result()
	if err != nil || len(fields) != 1 || fields[0] != hex.EncodeToString(d3[:]) {
		t.Errorf("HKEYS %s = %q, %v; want only the challenge put last", s.keys.challenges("alice"), fields, err)
	}
	if err := s.SpendChallenge(ctx, d3); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{s.keys.challenge(d3), s.keys.challenges("alice")} {
		if n, err := s.client.Exists(ctx, key).Result(); n != 0 || err != nil {
			t.Errorf("EXISTS %s after its last challenge was spent = %d, %v; want 0", key, n, err)
		}
	}
}

// TestRedisStoreCounterKey checks the TOTP counter key: PEXPIREAT its
// until (none for ever), gone after a Supersede with stamp 0, and a value
// that does not parse fails closed.
func TestRedisStoreCounterKey(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	until := now.Add(90 * time.Second)
	key := s.keys.counter("alice")
	if ok, err := s.UseTOTPCounter(ctx, "alice", 7, -1, now, until); !ok || err != nil {
		t.Fatalf("UseTOTPCounter(alice, 7) = %v, %v; want true", ok, err)
	}
	if got, err := s.client.PExpireTime(ctx, key).Result(); got != time.Duration(until.UnixMilli())*time.Millisecond || err != nil {
		t.Errorf("PEXPIRETIME %s = %v, %v; want %v", key, got, err, until.UnixMilli())
	}
	if ok, err := s.UseTOTPCounter(ctx, "alice", 8, -1, now, time.Time{}); !ok || err != nil {
		t.Fatalf("UseTOTPCounter(alice, 8) = %v, %v; want true", ok, err)
	}
	if got, err := s.client.PTTL(ctx, key).Result(); got != -1 || err != nil {
		t.Errorf("PTTL %s kept for ever = %v, %v; want -1 (no expiry)", key, got, err)
	}
	// An until already past stores nothing that lasts.
	if ok, err := s.UseTOTPCounter(ctx, "bob", 8, -1, now, now.Add(-time.Second)); !ok || err != nil {
		t.Fatalf("UseTOTPCounter(bob, 8, until passed) = %v, %v; want true", ok, err)
	}
	if n, err := s.client.Exists(ctx, s.keys.counter("bob")).Result(); n != 0 || err != nil {
		t.Errorf("EXISTS %s kept until a past time = %d, %v; want 0", s.keys.counter("bob"), n, err)
	}
	if _, err := s.Supersede(ctx, tokens.Supersession{Username: "alice", MaxStamp: 1 << 16, Before: now}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.client.Exists(ctx, key).Result(); n != 0 || err != nil {
		t.Errorf("EXISTS %s after a Supersede with stamp 0 = %d, %v; want 0", key, n, err)
	}
	if err := s.client.Set(ctx, key, "seven", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.UseTOTPCounter(ctx, "alice", 9, -1, now, until); ok || !errors.Is(err, tokens.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt TOTP counter") {
		t.Errorf("UseTOTPCounter over a corrupt counter = %v, %v; want false and a corrupt counter error wrapping %v", ok, err, tokens.ErrUnavailable)
	}
	if ok, err := s.UseTOTPCounter(ctx, "carol", 1<<53, -1, now, until); ok || err == nil {
		t.Errorf("UseTOTPCounter(carol, 2^53) = %v, %v; want an error: Lua compares it inexactly", ok, err)
	}
}

// TestRedisStoreExpiredIndex checks that index entries of expired sessions
// are pruned at the next Issue, and the index key dies with its last session.
func TestRedisStoreExpiredIndex(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	short := storetest.MustIssue(t, s, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: time.Now().Add(300 * time.Millisecond)}, 0, time.Now())
	time.Sleep(400 * time.Millisecond)
	storetest.MustIssue(t, s, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: time.Now().Add(300 * time.Millisecond)}, 0, time.Now())
	members, err := s.client.ZRange(ctx, s.keys.index("alice"), 0, -1).Result()
	if err != nil || len(members) != 1 || members[0] == hex.EncodeToString(short[:]) {
		t.Fatalf("ZRANGE index = %q, %v; want only the second session", members, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		n, err := s.client.Exists(ctx, s.keys.index("alice")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("index key still exists 3s after its last session expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedisStoreCorrupt checks that a value that does not parse fails closed
// as an unavailable store, not as a session or a missing one.
func TestRedisStoreCorrupt(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	d := storetest.RandomDigest()
	if err := s.client.HSet(ctx, s.keys.token(d), "u", "alice", "s", "not a number").Err(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Lookup(ctx, d, time.Now())
	if !errors.Is(err, tokens.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt session") {
		t.Fatalf("Lookup(corrupt) = %+v, %v; want a corrupt session error wrapping %v", got, err, tokens.ErrUnavailable)
	}
	if err := s.client.Set(ctx, s.keys.challenge(d), "alice", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.client.HSet(ctx, s.keys.challenges("alice"), hex.EncodeToString(d[:]), "1 2 x 4").Err(); err != nil {
		t.Fatal(err)
	}
	c, err := s.TryChallenge(ctx, d, time.Now())
	if !errors.Is(err, tokens.ErrUnavailable) || !strings.Contains(err.Error(), "corrupt challenge") {
		t.Fatalf("TryChallenge(corrupt) = %+v, %v; want a corrupt challenge error wrapping %v", c, err, tokens.ErrUnavailable)
	}
}

// TestRedisStoreKeysHoldNoToken checks that neither key names nor values
// hold the token, only its digest.
func TestRedisStoreKeysHoldNoToken(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	token, d := tokens.New()
	if _, err := s.Issue(ctx, d, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 100, now); err != nil {
		t.Fatal(err)
	}
	mfaToken, dc := tokens.New()
	if err := s.PutChallenge(ctx, dc, tokens.Challenge{Username: "alice", Stamp: 1, ExpiresAt: now.Add(5 * time.Minute), Attempts: 5}, now); err != nil {
		t.Fatal(err)
	}

	var dump strings.Builder // every key and value under the prefix
	iter := s.client.Scan(ctx, 0, s.keys.prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		typ, err := s.client.Type(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		var val any
		switch typ {
		case "string":
			val, err = s.client.Get(ctx, key).Result()
		case "hash":
			val, err = s.client.HGetAll(ctx, key).Result()
		case "zset":
			val, err = s.client.ZRangeWithScores(ctx, key, 0, -1).Result()
		default:
			t.Fatalf("key %s has unexpected type %s", key, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&dump, "%s = %v\n", key, val)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dump.String(), hex.EncodeToString(d[:])) {
		t.Fatalf("the store holds no digest; the scan missed its keys:\n%s", dump.String())
	}
	if !strings.Contains(dump.String(), hex.EncodeToString(dc[:])) {
		t.Fatalf("the store holds no challenge digest; the scan missed its keys:\n%s", dump.String())
	}
	for _, tok := range []string{token, mfaToken} {
		if strings.Contains(dump.String(), tok) {
			t.Fatalf("the store holds the token %s:\n%s", tok, dump.String())
		}
	}
}

// TestRedisStoreUnavailable checks that every call fails closed within 5 s
// while Redis is down, and that the same store serves again within 5 s of
// Redis coming back (API.md, "Operations").
func TestRedisStoreUnavailable(t *testing.T) {
	url, stop, restart := testservers.Redis(t)
	if stop == nil {
		t.Skip("needs a Redis it can stop: unset AUTHSVC_TEST_REDIS")
	}
	s := newTestRedisStore(t, url)
	ctx := context.Background()
	now := time.Now()
	alice := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	d := storetest.MustIssue(t, s, alice, 10, now)
	storetest.WantFound(t, s, d, now, alice)

	stop()
	calls := []struct {
		name string
		call func() error
	}{
		{"Issue", func() error {
			_, d := tokens.New()
			_, err := s.Issue(ctx, d, alice, 10, now)
			return err
		}},
		{"Lookup", func() error { _, err := s.Lookup(ctx, d, now); return err }},
		{"Revoke", func() error { return s.Revoke(ctx, d) }},
		{"RevokeUser", func() error { _, err := s.RevokeUser(ctx, "alice"); return err }},
		{"PutChallenge", func() error {
			_, d := tokens.New()
			return s.PutChallenge(ctx, d, tokens.Challenge{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Minute), Attempts: 5}, now)
		}},
		{"TryChallenge", func() error { _, err := s.TryChallenge(ctx, d, now); return err }},
		{"SpendChallenge", func() error { return s.SpendChallenge(ctx, d) }},
		{"ClaimChallenge", func() error { _, err := s.ClaimChallenge(ctx, d, now); return err }},
		{"UnclaimChallenge", func() error { return s.UnclaimChallenge(ctx, d) }},
		{"UseTOTPCounter", func() error { _, err := s.UseTOTPCounter(ctx, "alice", 1, -1, now, now.Add(time.Minute)); return err }},
		{"Ping", func() error { return s.Ping(ctx) }},
	}
	for _, c := range calls {
		start := time.Now()
		err := c.call()
		if elapsed := time.Since(start); elapsed >= 5*time.Second {
			t.Errorf("%s with Redis down took %v; want < 5s", c.name, elapsed)
		}
		if !errors.Is(err, tokens.ErrUnavailable) {
			t.Errorf("%s with Redis down = %v; want %v", c.name, err, tokens.ErrUnavailable)
		}
	}

	restart()
	start := time.Now()
	for {
		err := s.Ping(ctx)
		if err == nil {
			break
		}
		if time.Since(start) >= 5*time.Second {
			t.Fatalf("Ping 5s after Redis came back = %v; want nil", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The restarted Redis is empty: d is gone, new sessions work.
	storetest.WantNotFound(t, s, d, now)
	d2 := storetest.MustIssue(t, s, alice, 10, now)
	storetest.WantFound(t, s, d2, now, alice)
	if elapsed := time.Since(start); elapsed >= 5*time.Second {
		t.Errorf("service resumed %v after Redis came back; want < 5s", elapsed)
	}
}

// TestRedisStoreHung: a Redis that accepts connections and never answers
// (a frozen server) fails every call closed within API.md's 5 s, including
// 32 look-ups at once queued behind each other's pipelines.
func TestRedisStoreHung(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held sync.WaitGroup
	defer held.Wait()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			held.Add(1)
			go func() { defer held.Done(); io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	s := New(testRedisClient(t, "redis://"+ln.Addr().String()+"/0"), "hung:")
	defer s.Close()
	now := time.Now()
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			start := time.Now()
			_, err := s.Lookup(context.Background(), tokens.Digest{byte(i)}, now)
			if d := time.Since(start); !errors.Is(err, tokens.ErrUnavailable) || d >= 5*time.Second {
				t.Errorf("Lookup on a hung Redis = %v after %v; want tokens.ErrUnavailable within 5s", err, d)
			}
		})
	}
	wg.Go(func() {
		start := time.Now()
		_, err := s.Issue(context.Background(), tokens.Digest{1}, tokens.Session{Username: "alice"}, 10, now)
		if d := time.Since(start); !errors.Is(err, tokens.ErrUnavailable) || d >= 5*time.Second {
			t.Errorf("Issue on a hung Redis = %v after %v; want tokens.ErrUnavailable within 5s", err, d)
		}
	})
	wg.Wait()
	ln.Close()
}

// TestRedisStoreURLErrorHidesPassword: a bad --store URL is refused without
// quoting its password.
func TestRedisStoreURLErrorHidesPassword(t *testing.T) {
	for _, raw := range []string{"redis://:s3cret@127.0.0.1:xx/0", "redis://user:s3cret@127.0.0.1:6379/abc", "rediss://:s3cret@[::1/0"} {
		_, err := Dial(raw)
		if err == nil {
			t.Errorf("Dial(%q) = nil error; want one", raw)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Dial(%q) error %q quotes the password", raw, err)
		}
	}
}

// TestRedisStoreUncached: the conformance suite with the cache off, every
// Lookup a read of Redis.
func TestRedisStoreUncached(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	storetest.Run(t, func(t *testing.T) tokens.Store {
		s := newTestRedisStore(t, url)
		s.SetCacheSize(0)
		return s
	})
}
