package main

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// memShards spreads sessions over independently locked maps, so that the
// sweep and concurrent logins never hold one lock across the whole store.
const memShards = 64

// memoryStore is the in-process Store: sessions live and die with the process.
type memoryStore struct {
	shards [memShards]memShard

	mu     sync.Mutex               // guards byUser and agents; taken before any shard lock, never after
	byUser map[string][]tokenDigest // each user's digests, oldest first
	agents map[string]string        // user agents in use, so equal ones share one string

	evicted func(n int) // told of sessions the per-user limit evicts; nil for none
}

type memShard struct {
	mu       sync.RWMutex // guards sessions (the map; a session's lastUsed is atomic)
	sessions map[tokenDigest]*memSession
}

// memSession is Session without time.Time's 24 bytes: times in Unix
// nanoseconds (expiry 0 for never).
type memSession struct {
	username  string
	stamp     uint64
	expiresAt int64
	issuedAt  int64
	lastUsed  atomic.Int64 // written by Touch without a lock
	id        sessionID
	client    string
	userAgent string
}

var _ Store = (*memoryStore)(nil)

func newMemoryStore() *memoryStore {
	s := &memoryStore{byUser: make(map[string][]tokenDigest), agents: make(map[string]string)}
	for i := range s.shards {
		s.shards[i].sessions = make(map[tokenDigest]*memSession)
	}
	return s
}

// onEvict sets the function told how many sessions each Issue evicted.
func (s *memoryStore) onEvict(f func(n int)) { s.evicted = f }

func (s *memoryStore) shard(d tokenDigest) *memShard {
	return &s.shards[d[0]%memShards]
}

// session returns the Session ms stands for.
func (ms *memSession) session() Session {
	sess := Session{
		Username:   ms.username,
		Stamp:      ms.stamp,
		IssuedAt:   time.Unix(0, ms.issuedAt),
		LastUsedAt: time.Unix(0, ms.lastUsed.Load()),
		ID:         ms.id,
		Client:     ms.client,
		UserAgent:  ms.userAgent,
	}
	if ms.expiresAt != 0 {
		sess.ExpiresAt = time.Unix(0, ms.expiresAt).UTC()
	}
	return sess
}

func (s *memoryStore) Issue(_ context.Context, d tokenDigest, sess Session, limit int, now time.Time) error {
	ms := &memSession{username: sess.Username, stamp: sess.Stamp, issuedAt: now.UnixNano(), id: sess.ID, client: sess.Client}
	ms.lastUsed.Store(now.UnixNano())
	if !sess.ExpiresAt.IsZero() {
		ms.expiresAt = sess.ExpiresAt.UnixNano()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ms.userAgent = s.intern(sess.UserAgent)
	sh := s.shard(d)
	sh.mu.Lock()
	sh.sessions[d] = ms
	sh.mu.Unlock()
	digests := append(s.byUser[sess.Username], d)
	if limit > 0 && len(digests) > limit {
		evicted := len(digests) - limit
		for _, old := range digests[:evicted] {
			s.deleteSession(old)
		}
		digests = append(digests[:0], digests[evicted:]...)
		if s.evicted != nil {
			s.evicted(evicted)
		}
	}
	s.byUser[sess.Username] = digests
	return nil
}

// intern returns the shared copy of user agent ua. The caller holds s.mu.
// Agents no session uses any more stay: a handful of strings per client
// kind, bounded by what clients send, and capped below.
func (s *memoryStore) intern(ua string) string {
	if shared, ok := s.agents[ua]; ok {
		return shared
	}
	if len(s.agents) >= maxInternedAgents {
		return ua // a flood of distinct agents is not kept twice
	}
	s.agents[ua] = ua
	return ua
}

// maxInternedAgents bounds the interned user agents: 10,000 of at most 256 bytes.
const maxInternedAgents = 10000

func (s *memoryStore) Lookup(_ context.Context, d tokenDigest, now time.Time) (Session, error) {
	sh := s.shard(d)
	sh.mu.RLock()
	ms, ok := sh.sessions[d]
	sh.mu.RUnlock()
	if !ok || (ms.expiresAt != 0 && ms.expiresAt <= now.UnixNano()) {
		return Session{}, errTokenNotFound
	}
	return ms.session(), nil
}

// Touch records a use of d at now: one atomic store, no lock held.
func (s *memoryStore) Touch(_ context.Context, d tokenDigest, now time.Time) {
	sh := s.shard(d)
	sh.mu.RLock()
	ms, ok := sh.sessions[d]
	sh.mu.RUnlock()
	if ok && now.UnixNano() > ms.lastUsed.Load() {
		ms.lastUsed.Store(now.UnixNano())
	}
}

func (s *memoryStore) List(_ context.Context, username string, now time.Time) ([]listedSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []listedSession
	for _, d := range s.byUser[username] {
		sh := s.shard(d)
		sh.mu.RLock()
		ms, ok := sh.sessions[d]
		sh.mu.RUnlock()
		if ok && (ms.expiresAt == 0 || ms.expiresAt > now.UnixNano()) {
			out = append(out, listedSession{Digest: d, Session: ms.session()})
		}
	}
	slices.Reverse(out) // byUser is oldest first
	return out, nil
}

func (s *memoryStore) RevokeID(_ context.Context, username string, id sessionID) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.byUser[username] {
		sh := s.shard(d)
		sh.mu.RLock()
		ms, ok := sh.sessions[d]
		sh.mu.RUnlock()
		if ok && ms.id == id {
			s.deleteSession(d)
			s.forget(username, d)
			return true, nil
		}
	}
	return false, nil
}

func (s *memoryStore) Revoke(_ context.Context, d tokenDigest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if username, ok := s.deleteSession(d); ok {
		s.forget(username, d)
	}
	return nil
}

func (s *memoryStore) RevokeUser(_ context.Context, username string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	digests := s.byUser[username]
	delete(s.byUser, username)
	for _, d := range digests {
		s.deleteSession(d)
	}
	return len(digests), nil
}

func (s *memoryStore) RevokeUserBefore(_ context.Context, username string, before time.Time) (int, error) {
	cutoff := before.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	kept, n := s.byUser[username][:0], 0
	for _, d := range s.byUser[username] {
		sh := s.shard(d)
		sh.mu.RLock()
		ms, ok := sh.sessions[d]
		sh.mu.RUnlock()
		if ok && ms.issuedAt < cutoff {
			s.deleteSession(d)
			n++
			continue
		}
		kept = append(kept, d)
	}
	if len(kept) == 0 {
		delete(s.byUser, username)
	} else {
		s.byUser[username] = kept
	}
	return n, nil
}

func (s *memoryStore) Ping(context.Context) error { return nil }

func (s *memoryStore) Close() error { return nil }

// Len returns the number of stored sessions, expired ones not yet swept included.
func (s *memoryStore) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		n += len(sh.sessions)
		sh.mu.RUnlock()
	}
	return n
}

// Sweep deletes the sessions expired at now, one shard at a time, and
// reports how many it deleted. Logins and look-ups proceed between shards.
func (s *memoryStore) Sweep(now time.Time) int {
	cutoff := now.UnixNano()
	total := 0
	var expired []tokenDigest
	var owners []string
	for i := range s.shards {
		expired, owners = expired[:0], owners[:0]
		sh := &s.shards[i]
		sh.mu.Lock()
		for d, ms := range sh.sessions {
			if ms.expiresAt != 0 && ms.expiresAt <= cutoff {
				delete(sh.sessions, d)
				expired = append(expired, d)
				owners = append(owners, ms.username)
			}
		}
		sh.mu.Unlock()
		if len(expired) == 0 {
			continue
		}
		s.mu.Lock()
		for j, d := range expired {
			s.forget(owners[j], d)
		}
		s.mu.Unlock()
		total += len(expired)
	}
	return total
}

// deleteSession removes d from its shard and reports whose it was.
// The caller holds s.mu.
func (s *memoryStore) deleteSession(d tokenDigest) (string, bool) {
	sh := s.shard(d)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ms, ok := sh.sessions[d]
	if !ok {
		return "", false
	}
	delete(sh.sessions, d)
	return ms.username, true
}

// forget removes d from username's index. The caller holds s.mu.
func (s *memoryStore) forget(username string, d tokenDigest) {
	digests := s.byUser[username]
	for i, x := range digests {
		if x == d {
			digests = append(digests[:i], digests[i+1:]...)
			break
		}
	}
	if len(digests) == 0 {
		delete(s.byUser, username)
	} else {
		s.byUser[username] = digests
	}
}
