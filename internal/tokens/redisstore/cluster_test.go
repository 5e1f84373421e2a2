package redisstore

import (
	"strings"
	"testing"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"
)

// newTestClusterStore returns a cluster-mode store on the cluster at addrs
// under a fresh prefix, closed when t ends.
func newTestClusterStore(t *testing.T, addrs []string) *Store {
	t.Helper()
	url := "redis+cluster://" + strings.Join(addrs, ",")
	client, err := DialCluster(url)
	if err != nil {
		t.Fatalf("DialCluster(%q) = %v", url, err)
	}
	t.Cleanup(func() { client.Close() })
	s, err := NewCluster(client, testservers.UniquePrefix())
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
