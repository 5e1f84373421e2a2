package main

import (
	"context"
	"sync"
	"time"
)

// memShards spreads sessions over independently locked maps, so that the
// sweep and concurrent logins never hold one lock across the whole store.
const memShards = 64

// memoryStore is the in-process Store: sessions live and die with the process.
type memoryStore struct {
	shards [memShards]memShard

	mu     sync.Mutex               // guards byUser; taken before any shard lock, never after
	byUser map[string][]tokenDigest // each user's digests, oldest first
}

type memShard struct {
	mu       sync.RWMutex // guards sessions
	sessions map[tokenDigest]memSession
}

// memSession is Session without time.Time's 24 bytes: expiry in Unix
// nanoseconds, 0 for never.
type memSession struct {
	username  string
	stamp     uint64
	expiresAt int64
	issuedAt  int64
}

var _ Store = (*memoryStore)(nil)

func newMemoryStore() *memoryStore {
	s := &memoryStore{byUser: make(map[string][]tokenDigest)}
	for i := range s.shards {
		s.shards[i].sessions = make(map[tokenDigest]memSession)
	}
	return s
}

func (s *memoryStore) shard(d tokenDigest) *memShard {
	return &s.shards[d[0]%memShards]
}

func (s *memoryStore) Issue(_ context.Context, d tokenDigest, sess Session, limit int, now time.Time) error {
	ms := memSession{username: sess.Username, stamp: sess.Stamp, issuedAt: now.UnixNano()}
	if !sess.ExpiresAt.IsZero() {
		ms.expiresAt = sess.ExpiresAt.UnixNano()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
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
	}
	s.byUser[sess.Username] = digests
	return nil
}

func (s *memoryStore) Lookup(_ context.Context, d tokenDigest, now time.Time) (Session, error) {
	sh := s.shard(d)
	sh.mu.RLock()
	ms, ok := sh.sessions[d]
	sh.mu.RUnlock()
	if !ok || (ms.expiresAt != 0 && ms.expiresAt <= now.UnixNano()) {
		return Session{}, errTokenNotFound
	}
	sess := Session{Username: ms.username, Stamp: ms.stamp, IssuedAt: time.Unix(0, ms.issuedAt)}
	if ms.expiresAt != 0 {
		sess.ExpiresAt = time.Unix(0, ms.expiresAt).UTC()
	}
	return sess, nil
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
		ms := sh.sessions[d]
		sh.mu.RUnlock()
		if ms.issuedAt < cutoff {
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
	if ok {
		delete(sh.sessions, d)
	}
	return ms.username, ok
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
