package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"
)

// newTestClusterStore returns a cluster-mode store on the cluster at addrs
// under a fresh prefix, closed when t ends.
func newTestClusterStore(t *testing.T, addrs []string) *ClusterStore {
	t.Helper()
	return clusterStoreOn(t, addrs, testservers.UniquePrefix())
}

// clusterStoreOn returns a cluster-mode store on the cluster at addrs
// under prefix, with a client of its own, both closed when t ends.
func clusterStoreOn(t *testing.T, addrs []string, prefix string) *ClusterStore {
	t.Helper()
	url := "redis+cluster://" + strings.Join(addrs, ",")
	client, err := DialCluster(url)
	if err != nil {
		t.Fatalf("DialCluster(%q) = %v", url, err)
	}
	t.Cleanup(func() { client.Close() })
	s, err := NewCluster(client, prefix)
	if err != nil {
		t.Fatalf("NewCluster = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRedisClusterStore: the conformance suite, unchanged, on a real
// three-primary cluster, with the cache on and off.
func TestRedisClusterStore(t *testing.T) {
	addrs, _ := testservers.RedisCluster(t)
	t.Run("cached", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) tokens.Store {
			return newTestClusterStore(t, addrs)
		})
	})
	t.Run("uncached", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) tokens.Store {
			s := newTestClusterStore(t, addrs)
			s.SetCacheSize(0)
			return s
		})
	})
}

// TestNewClusterPrefix: a prefix with a brace would move the hash tags.
func TestNewClusterPrefix(t *testing.T) {
	for _, prefix := range []string{"a{b:", "a}b:", "{x}:"} {
		if s, err := NewCluster(nil, prefix); err == nil {
			s.Close()
			t.Errorf("NewCluster(nil, %q) = nil error; want a refusal", prefix)
		}
	}
}

// TestRedisClusterStoreOrphan: a token key its user's index does not list
// (what an Issue whose token write lands after a RevokeUser or Supersede
// leaves) is dead to Lookup (this store never looked it up, so never
// cached it), and Lookup deletes it.
func TestRedisClusterStoreOrphan(t *testing.T) {
	addrs, _ := testservers.RedisCluster(t)
	s := newTestClusterStore(t, addrs)
	ctx := context.Background()
	now := time.Now()
	d := storetest.MustIssue(t, s, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 0, now)
	// Take the entry out of the index behind the store's back, as the
	// user-slot script of a RevokeUser would between an Issue's two steps.
	if err := s.cc.ZRem(ctx, s.keys.index("alice"), hex.EncodeToString(d[:])).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lookup(ctx, d, now); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("Lookup(orphan) = %+v, %v; want ErrNotFound", got, err)
	}
	if n, err := s.cc.Exists(ctx, s.keys.token(d)).Result(); n != 0 || err != nil {
		t.Errorf("EXISTS %s after Lookup = %d, %v; want 0 (deleted), nil", s.keys.token(d), n, err)
	}
}

// TestRedisClusterStoreKeys checks the layout: every key of a user shares
// the user's slot, every key of a digest the digest's.
func TestRedisClusterStoreKeys(t *testing.T) {
	addrs, _ := testservers.RedisCluster(t)
	s := newTestClusterStore(t, addrs)
	ctx := context.Background()
	var d tokens.Digest
	for _, group := range [][]string{
		{s.keys.index("alice"), s.keys.stamp("alice"), s.keys.imported("alice"), s.keys.challenges("alice"), s.keys.counter("alice"), s.keys.companion("alice")},
		{s.keys.token(d), s.keys.challenge(d)},
	} {
		want, err := s.cc.ClusterKeySlot(ctx, group[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range group[1:] {
			if got, err := s.cc.ClusterKeySlot(ctx, key).Result(); got != want || err != nil {
				t.Errorf("CLUSTER KEYSLOT %s = %d, %v; want %d (that of %s), nil", key, got, err, want, group[0])
			}
		}
	}
	if got, want := s.keys.index("alice"), s.keys.prefix+"u:{alice}"; got != want {
		t.Errorf("userKey(alice) = %q; want %q", got, want)
	}
}

// TestRedisClusterStoreImportFinishes: an import whose token writes failed
// after its user-slot scripts ran (the token key missing, the entry
// listed) is finished by importing again, as the contract asks of a
// failure part way; a token revoked since its import stays dead.
func TestRedisClusterStoreImportFinishes(t *testing.T) {
	addrs, _ := testservers.RedisCluster(t)
	s := newTestClusterStore(t, addrs)
	ctx := context.Background()
	now := time.Now()
	var d, revoked tokens.Digest
	d[0], revoked[0] = 1, 2
	batch := []tokens.Imported{
		{Digest: d, Session: tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour), IssuedAt: now.Add(-time.Hour)}},
		{Digest: revoked, Session: tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour), IssuedAt: now.Add(-time.Hour)}},
	}
	if got, err := s.Import(ctx, batch, now, false); err != nil || !slices.Equal(got, []tokens.ImportOutcome{tokens.ImportAdded, tokens.ImportAdded}) {
		t.Fatalf("Import = %v, %v; want [added added], nil", got, err)
	}
	if err := s.cc.Del(ctx, s.keys.token(d)).Err(); err != nil { // the token write that failed
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, revoked); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Import(ctx, batch, now, false); err != nil || !slices.Equal(got, []tokens.ImportOutcome{tokens.ImportAdded, tokens.ImportDead}) {
		t.Errorf("Import again = %v, %v; want [added dead], nil", got, err)
	}
	if got, err := s.Lookup(tokens.WithFresh(ctx), d, now); err != nil || got.Username != "alice" {
		t.Errorf("Lookup(finished import) = %+v, %v; want alice's session, nil", got, err)
	}
	if _, err := s.Lookup(tokens.WithFresh(ctx), revoked, now); !errors.Is(err, tokens.ErrNotFound) {
		t.Errorf("Lookup(revoked, imported again) = %v; want ErrNotFound", err)
	}
}
