package redisstore

import (
	"context"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"authsvc/internal/lru"
	"authsvc/internal/tokens"

	"github.com/redis/go-redis/v9"
)

// The token cache (issue 22, point 1): each store keeps the sessions its
// Lookups read, so that a token checked again costs no round trip. What
// makes it safe is the invalidation stream: every script that kills a
// session PUBLISHes what it killed on {prefix}inv, in the same atomic
// step, so no path that kills a session can forget to say so:
//
//	t:{digest hex}  that session died (revoke, eviction by the per-user
//	                limit, a session DELETE, a look-up that found it
//	                unlisted, an import that refreshed its expiry)
//	u:{username}    some or all of that user's sessions died (logoutall,
//	                a password change): every cached one of theirs goes
//	d:{username}    not the cache's: a user notice (notice.go)
//
// Each store runs one subscriber (invalidationLoop) on a connection of
// its own. The cache answers only while that link is known to be whole:
//
//   - a subscription confirmed (SUBSCRIBE's reply) and no error since;
//     on any error, a close, or a second confirmation (go-redis
//     resubscribes by itself after a reconnect) the whole cache is dropped
//     at once, before any answer from it, since what was published in
//     between is lost;
//   - and a PING sent on the link within linkFresh answered: Redis writes a
//     connection's replies and messages in order, so the PONG of a PING sent
//     at t proves every invalidation published before t has arrived. A link
//     that goes silent (a partition, a Redis that stopped) stops the cache
//     within linkFresh, before it is found broken.
//
// A look-up that read Redis before an invalidation arrived must not put
// its (now stale) answer in the cache after it: every invalidation and
// every link break moves gen, a Lookup notes gen before its read, and its
// answer is kept only if gen has not moved since. One counter for the
// whole cache: an invalidation of anyone's token costs the look-ups in
// flight at that moment their place in the cache, never their answer.
//
// Redis's own deletions publish nothing: expiry needs nothing (Lookup
// judges ExpiresAt against now on cached sessions too), and an eviction at
// maxmemory is heard through the keyspace event "evicted" when Redis sends
// it (notify-keyspace-events containing "Ee"; the README asks for
// noeviction in the first place).

// DefaultCacheSize is how many sessions a store keeps unless told
// otherwise (SetCacheSize). An entry costs about 235–295 bytes of heap
// with its share of the maps (measured: 217 B with 100 tokens a user, 277 B
// with one, before the enrolment mark moved the lru's entry up a size
// class, 16 B), so 100,000 tokens in use take about 23–30 MB.
const DefaultCacheSize = 100_000

// Link health: a PING every pingInterval; the cache answers only while
// the last answered PING was sent within linkFresh, which with the
// delivery of a message itself keeps the revocation bound (API.md: 100 ms
// at p99); no answer within linkDead and the link is rebuilt.
const (
	pingInterval = 20 * time.Millisecond
	linkFresh    = 60 * time.Millisecond
	linkDead     = time.Second
	// relinkDelay spaces the attempts to subscribe again while Redis is
	// out of reach.
	relinkDelay = 100 * time.Millisecond
)

// clockBase and clock measure link freshness on the monotonic clock, never
// on the now callers pass Lookup (tests pass any time they like).
var clockBase = time.Now()

func clock() int64 { return int64(time.Since(clockBase)) }

// cachedSession is what Lookup returns, in Unix ms as Redis keeps it:
// Session's time.Times would triple its size.
type cachedSession struct {
	username                    string
	stamp                       uint64
	expiresMs, issuedMs, usedMs int64
	enrolment                   bool // Session.Enrolment
}

func (c cachedSession) session() tokens.Session {
	sess := tokens.Session{Username: c.username, Stamp: c.stamp, IssuedAt: time.UnixMilli(c.issuedMs), LastUsedAt: time.UnixMilli(c.usedMs), Enrolment: c.enrolment}
	if c.expiresMs != 0 {
		sess.ExpiresAt = time.UnixMilli(c.expiresMs).UTC()
	}
	return sess
}

// tokenCache is a store's cache of looked-up sessions; its zero value is
// off. All its methods are safe for concurrent use.
type tokenCache struct {
	mu      sync.Mutex
	entries *lru.Cache[tokens.Digest, cachedSession] // nil: off
	byUser  map[string][]tokens.Digest               // entries' digests by username: a slice, not a map, for its size
	gen     uint64                                   // moved by every invalidation and link break
	linked  bool                                     // subscription confirmed, no break since

	confirmed atomic.Int64 // clock() when the last answered PING (or the subscription) was sent

	hits, misses, breaks atomic.Uint64
}

// resize makes the cache hold at most n sessions, empty; 0 turns it off.
func (c *tokenCache) resize(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.byUser = make(map[string][]tokens.Digest)
	c.entries = nil
	if n > 0 {
		c.entries = lru.New[tokens.Digest, cachedSession](n)
	}
}

// usable reports whether the cache may answer now; c.mu is held.
func (c *tokenCache) usable() bool {
	return c.entries != nil && c.linked && clock()-c.confirmed.Load() <= int64(linkFresh)
}

// get returns d's cached session, if the cache may answer now and holds it.
func (c *tokenCache) get(d tokens.Digest) (cachedSession, bool) {
	c.mu.Lock()
	var cs cachedSession
	on, ok := c.entries != nil, c.usable()
	if ok {
		cs, ok = c.entries.Get(d)
	}
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	} else if on {
		c.misses.Add(1)
	}
	return cs, ok
}

// snapshot returns the generation a look-up about to read Redis compares
// with before it keeps its answer, whether it may keep one at all, and
// whether the cache is on.
func (c *tokenCache) snapshot() (gen uint64, keep, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen, c.usable(), c.entries != nil
}

// drop removes d's session, if cached: Redis found none. It leaves gen
// alone: whatever killed the session has published it too.
func (c *tokenCache) drop(d tokens.Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		return
	}
	if cs, ok := c.entries.Get(d); ok {
		c.removeLocked(d, cs.username)
	}
}

// put keeps cs under d, unless anything was invalidated, or the link
// broke, since snapshot returned gen.
func (c *tokenCache) put(d tokens.Digest, cs cachedSession, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || c.gen != gen || !c.linked {
		return
	}
	if _, present := c.entries.Get(d); present {
		c.entries.Put(d, cs) // a digest's username never changes
		return
	}
	if c.entries.Len() >= c.entries.Cap() {
		if old, oldCS, ok := c.entries.Oldest(); ok {
			c.removeLocked(old, oldCS.username)
		}
	}
	c.entries.Put(d, cs)
	c.byUser[cs.username] = append(c.byUser[cs.username], d)
}

// touch records on d's cached session a use at ms, if later than the one
// it holds: this instance's own uses move it at once.
func (c *tokenCache) touch(d tokens.Digest, ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		return
	}
	if cs, ok := c.entries.Get(d); ok && ms > cs.usedMs {
		cs.usedMs = ms
		c.entries.Put(d, cs)
	}
}

// forget drops d's session, and moves gen so that no look-up in flight
// puts it back.
func (c *tokenCache) forget(d tokens.Digest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.entries == nil {
		return
	}
	if cs, ok := c.entries.Get(d); ok {
		c.removeLocked(d, cs.username)
	}
}

// forgetUser drops every session of username, and moves gen.
func (c *tokenCache) forgetUser(username string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.entries == nil {
		return
	}
	for _, d := range c.byUser[username] {
		c.entries.Remove(d)
	}
	delete(c.byUser, username)
}

// removeLocked drops d, username's, from both maps; c.mu is held. A
// user's slice is as long as their sessions in the cache, which the
// per-user limit bounds.
func (c *tokenCache) removeLocked(d tokens.Digest, username string) {
	c.entries.Remove(d)
	ds := c.byUser[username]
	if i := slices.Index(ds, d); i >= 0 {
		ds[i] = ds[len(ds)-1]
		ds = ds[:len(ds)-1]
	}
	if len(ds) == 0 {
		delete(c.byUser, username)
	} else {
		c.byUser[username] = ds
	}
}

// unlink records a broken or closed link: the cache drops everything and
// answers nothing until the next subscription is confirmed.
func (c *tokenCache) unlink() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.linked {
		c.breaks.Add(1)
	}
	c.linked = false
	c.clearLocked()
}

// relink records a confirmed subscription at sent (clock()). Whatever was
// cached before it was kept over a link that has since been replaced, so
// it goes too.
func (c *tokenCache) relink(sent int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.linked {
		c.breaks.Add(1) // a resubscription we were not told of as an error
	}
	c.clearLocked()
	c.linked = true
	c.confirm(sent)
}

// confirm records that every invalidation published before sent (clock())
// has been applied.
func (c *tokenCache) confirm(sent int64) {
	for {
		old := c.confirmed.Load()
		if sent <= old || c.confirmed.CompareAndSwap(old, sent) {
			return
		}
	}
}

func (c *tokenCache) clearLocked() {
	c.gen++
	if c.entries != nil && c.entries.Len() > 0 {
		c.entries = lru.New[tokens.Digest, cachedSession](c.entries.Cap())
		c.byUser = make(map[string][]tokens.Digest)
	}
}

// len returns how many sessions the cache holds.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		return 0
	}
	return c.entries.Len()
}

// invChannel is the channel the scripts publish invalidations on.
func (s *core) invChannel() string { return s.keys.prefix + "inv" }

// SetCacheSize makes the store keep at most n looked-up sessions in memory
// (n = 0: none; every Lookup reads Redis), dropping what it kept. New
// starts with DefaultCacheSize. The store subscribes to the invalidations
// at its first Lookup with the cache on (or at OnUserNotice, the cache on
// or off), so a store that never looks up (user import) holds no
// subscription.
func (s *core) SetCacheSize(n int) {
	s.cache.resize(max(n, 0))
}

// CacheStats reports the cache's hits and misses (Lookups answered from it
// or not, WithFresh ones included among the misses), how many times its
// invalidation link broke, and how many sessions it holds.
func (s *core) CacheStats() (hits, misses, breaks uint64, size int) {
	return s.cache.hits.Load(), s.cache.misses.Load(), s.cache.breaks.Load(), s.cache.len()
}

// startSubscriber starts invalidationLoop once.
func (s *core) startSubscriber() {
	s.subscribeOnce.Do(func() {
		s.loops.Add(1)
		go s.invalidationLoop()
	})
}

// invalidationLoop keeps a subscription to the invalidations, applying
// them to the cache, until the store is closed; each time a link breaks
// it subscribes again on a new connection.
func (s *core) invalidationLoop() {
	defer s.loops.Done()
	defer s.cache.unlink()
	evicted := "__keyevent@" + strconv.Itoa(s.db) + "__:evicted"
	for {
		s.followLink(evicted)
		s.cache.unlink()
		s.relinking = true // what the next link confirms may follow lost notices
		select {
		case <-s.stop:
			return
		case <-time.After(relinkDelay):
		}
	}
}

// followLink subscribes on a connection of its own and applies what it
// hears until that link breaks, goes silent for linkDead, or the store
// is closed.
func (s *core) followLink(evicted string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps := s.rdb.Subscribe(ctx, s.invChannel(), evicted)
	defer ps.Close()
	subscribed := clock() // the SUBSCRIBE was sent before this

	// The pinger: a PING every pingInterval, its send time as payload;
	// it closes the link (and so ends Receive) when the store closes or
	// when no PONG came back for linkDead.
	pingerDone := make(chan struct{})
	go func() {
		defer close(pingerDone)
		tick := time.NewTicker(pingInterval)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				ps.Close()
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			now := clock()
			if now-max(s.cache.confirmed.Load(), subscribed) > int64(linkDead) {
				s.cache.unlink()
				ps.Close()
				return
			}
			if err := ps.Ping(ctx, strconv.FormatInt(now, 10)); err != nil {
				s.cache.unlink()
				ps.Close()
				return
			}
		}
	}()
	defer func() { <-pingerDone }()
	defer cancel()

	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			// Whatever it was (a reset, a close, a reply that did not
			// parse), what was published meanwhile may be lost.
			s.cache.unlink()
			return
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == s.invChannel() {
				s.cache.relink(subscribed)
				s.resumeNotices()
			}
		case *redis.Pong:
			if sent, err := strconv.ParseInt(m.Payload, 10, 64); err == nil {
				s.cache.confirm(sent)
			}
		case *redis.Message:
			if s.heard != nil {
				s.heard(m.Payload)
			}
			s.applyInvalidation(m.Channel, m.Payload)
		}
	}
}

// applyInvalidation drops what one message says died.
func (s *core) applyInvalidation(channel, payload string) {
	if channel != s.invChannel() {
		// A keyspace event: payload is the key Redis evicted.
		rest, ok := strings.CutPrefix(payload, s.keys.prefix)
		if !ok {
			return
		}
		payload = rest
	}
	switch {
	case strings.HasPrefix(payload, "d:") && channel == s.invChannel():
		s.notices.post(payload[2:]) // not the cache's: a user notice (notice.go)
	case strings.HasPrefix(payload, "t:"):
		if d, ok := parseDigestHex(payload[2:]); ok {
			s.cache.forget(d)
		}
	case strings.HasPrefix(payload, "u:"):
		s.cache.forgetUser(payload[2:])
	}
}

// parseDigestHex decodes a digest's 64 hex characters.
func parseDigestHex(h string) (tokens.Digest, bool) {
	var d tokens.Digest
	if len(h) != 2*len(d) {
		return d, false
	}
	_, err := hex.Decode(d[:], []byte(h))
	return d, err == nil
}
