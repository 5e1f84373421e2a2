package introspect

import (
	"crypto/sha256"
	"sync"
	"time"
)

// A cache keeps live tokens' Info for a while, keyed by the token's
// SHA-256: it never holds a usable token. Only live answers go in, so a
// refused token is asked about again.
type cache struct {
	ttl  time.Duration
	size int

	mu      sync.Mutex // guards entries
	entries map[[sha256.Size]byte]cacheEntry
}

type cacheEntry struct {
	info  *Info // never changed: callers get clones
	until time.Time
}

func newCache(ttl time.Duration, size int) *cache {
	return &cache{ttl: ttl, size: size, entries: make(map[[sha256.Size]byte]cacheEntry)}
}

// get returns the Info kept for key, if it is still good at now.
func (c *cache) get(key [sha256.Size]byte, now time.Time) (*Info, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	if !now.Before(e.until) {
		delete(c.entries, key)
		return nil, false
	}
	return e.info, true
}

// put keeps info for key until ttl from now, or until the token expires
// if that is sooner. When the cache is full it drops the entries that
// are past their time, and then others, as many as it must, in no
// particular order.
func (c *cache) put(key [sha256.Size]byte, info *Info, now time.Time) {
	until := now.Add(c.ttl)
	if !info.Expires.IsZero() && info.Expires.Before(until) {
		until = info.Expires
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.size {
		for k, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < c.size {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = cacheEntry{info: info, until: until}
}
