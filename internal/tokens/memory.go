package tokens

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// memShards spreads sessions over independently locked maps, so that the
// sweep and concurrent logins never hold one lock across the whole store.
const memShards = 64

// MemoryStore is the in-process Store: sessions live and die with the
// process. Its sessions hold no pointers (memRecord), so the garbage
// collector never scans them: with a million sessions as pointers, each
// collection marked for 300–800 ms while /info ran, and its p99 doubled.
type MemoryStore struct {
	shards [memShards]memShard

	mu      sync.Mutex             // guards byUser, stamps, imported, challenges, userChallenges, claimed, counters and the writes to strings; taken before any shard lock, never after
	byUser  map[strHandle][]Digest // each user's digests, oldest first
	strings strTable               // usernames, user agents and odd client addresses, shared by equal ones
	stamps  map[string]memStamp    // each superseded user's current password stamp (Supersede)
	// imported holds every digest Import stored, for ever: its owner,
	// so that a dead one is never brought back.
	imported map[Digest]string
	// challenges are the pending second steps (PutChallenge), kept apart
	// from the sessions so that no look-up ever mistakes one for the
	// other. They live minutes and only logins of users with a second
	// factor make them, so plain maps serve.
	challenges     map[Digest]Challenge
	userChallenges map[string]map[Digest]struct{} // each user's challenge digests, for Supersede and RevokeUser
	claimed        map[Digest]struct{}            // the challenges claimed (ClaimChallenge) and not given back
	counters       map[string]memCounter          // each user's last accepted TOTP counter (UseTOTPCounter)
}

// memCounter is a user's last accepted TOTP counter, kept until until
// (Unix nanoseconds; 0 for ever).
type memCounter struct {
	counter int64
	until   int64
}

// memStamp is a user's current password stamp (0: any) and the Before of
// the Supersede that gave it, kept until until (Unix nanoseconds; 0 for
// ever).
type memStamp struct {
	stamp  uint64
	before int64
	until  int64
}

// live reports whether c is still kept at now (Unix nanoseconds).
func (c memStamp) live(now int64) bool { return c.until == 0 || c.until > now }

// refuses reports whether c, kept at now, refuses a session or challenge
// on stamp: the user's password has been superseded since it was checked.
func (c memStamp) refuses(stamp uint64, now int64) bool {
	return c.live(now) && c.stamp != 0 && c.stamp != stamp
}

type memShard struct {
	mu      sync.RWMutex      // guards index, records and free (a record's lastUsed is also written atomically under a read lock)
	index   map[Digest]uint32 // digest → position in records
	records []memRecord
	free    []uint32 // positions of deleted records, reused first
}

// memRecord is a session without pointers: its strings are handles into
// MemoryStore.strings, its times Unix nanoseconds (expiry 0 for never).
type memRecord struct {
	expiresAt int64
	issuedAt  int64
	lastUsed  int64 // atomic: Touch writes it under the shard's read lock
	stamp     uint64
	user      strHandle
	agent     strHandle
	client    memClient
	enrolment bool // Session.Enrolment
	id        SessionID
}

// memClient is a client address without a pointer: an IP in 16 bytes, or
// a handle for a string that is no IP in its canonical form.
type memClient struct {
	ip   [16]byte
	kind uint8 // clientNone, clientIPv4, clientIPv6 or clientText
	text strHandle
}

const (
	clientNone = iota
	clientIPv4
	clientIPv6
	clientText
)

var _ Store = (*MemoryStore)(nil)

func NewMemoryStore() *MemoryStore {
	s := &MemoryStore{
		byUser:         make(map[strHandle][]Digest),
		stamps:         make(map[string]memStamp),
		imported:       make(map[Digest]string),
		challenges:     make(map[Digest]Challenge),
		userChallenges: make(map[string]map[Digest]struct{}),
		claimed:        make(map[Digest]struct{}),
		counters:       make(map[string]memCounter),
	}
	s.strings.init()
	for i := range s.shards {
		s.shards[i].index = make(map[Digest]uint32)
	}
	return s
}

func (s *MemoryStore) shard(d Digest) *memShard {
	return &s.shards[d[0]%memShards]
}

// session returns the Session rec stands for; full adds the client and
// user agent, which only List reports. The caller holds rec's shard lock.
func (s *MemoryStore) session(rec *memRecord, full bool) Session {
	sess := Session{
		Username:   s.strings.get(rec.user),
		Stamp:      rec.stamp,
		IssuedAt:   time.Unix(0, rec.issuedAt),
		LastUsedAt: time.Unix(0, atomic.LoadInt64(&rec.lastUsed)),
		ID:         rec.id,
		Enrolment:  rec.enrolment,
	}
	if rec.expiresAt != 0 {
		sess.ExpiresAt = time.Unix(0, rec.expiresAt).UTC()
	}
	if full {
		sess.UserAgent = s.strings.get(rec.agent)
		switch rec.client.kind {
		case clientIPv4:
			sess.Client = netip.AddrFrom4([4]byte(rec.client.ip[12:])).String()
		case clientIPv6:
			sess.Client = netip.AddrFrom16(rec.client.ip).String()
		case clientText:
			sess.Client = s.strings.get(rec.client.text)
		}
	}
	return sess
}

// newClient returns client as a memClient. The caller holds s.mu.
func (s *MemoryStore) newClient(client string) memClient {
	if client == "" {
		return memClient{}
	}
	if ip, err := netip.ParseAddr(client); err == nil && ip.Zone() == "" && ip.String() == client {
		c := memClient{ip: ip.As16(), kind: clientIPv6}
		if ip.Is4() {
			c.kind = clientIPv4
		}
		return c
	}
	return memClient{kind: clientText, text: s.strings.add(client)}
}

// release drops rec's hold on its strings. The caller holds s.mu.
func (s *MemoryStore) release(rec *memRecord) {
	s.strings.release(rec.user)
	s.strings.release(rec.agent)
	if rec.client.kind == clientText {
		s.strings.release(rec.client.text)
	}
}

func (s *MemoryStore) Issue(_ context.Context, d Digest, sess Session, limit int, now time.Time) (evicted int, err error) {
	rec := memRecord{stamp: sess.Stamp, issuedAt: now.UnixNano(), lastUsed: now.UnixNano(), id: sess.ID, enrolment: sess.Enrolment}
	if !sess.ExpiresAt.IsZero() {
		rec.expiresAt = sess.ExpiresAt.UnixNano()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stamps[sess.Username].refuses(sess.Stamp, now.UnixNano()) {
		return 0, ErrSuperseded
	}
	rec.user = s.strings.add(sess.Username)
	rec.agent = s.strings.add(sess.UserAgent)
	rec.client = s.newClient(sess.Client)
	sh := s.shard(d)
	sh.mu.Lock()
	if at, ok := sh.index[d]; ok { // not expected (the contract): the new session wins
		s.release(&sh.records[at])
		sh.records[at] = rec
	} else {
		sh.index[d] = sh.put(rec)
	}
	sh.mu.Unlock()
	digests := append(s.byUser[rec.user], d)
	if limit > 0 && len(digests) > limit {
		evicted = len(digests) - limit
		for _, old := range digests[:evicted] {
			if rec, ok := s.removeRecord(old); ok {
				s.release(&rec)
			}
		}
		digests = append(digests[:0], digests[evicted:]...)
	}
	s.byUser[rec.user] = digests
	return evicted, nil
}

// put stores rec in a free position and returns it. The caller holds sh.mu.
func (sh *memShard) put(rec memRecord) uint32 {
	if n := len(sh.free); n > 0 {
		at := sh.free[n-1]
		sh.free = sh.free[:n-1]
		sh.records[at] = rec
		return at
	}
	sh.records = append(sh.records, rec)
	return uint32(len(sh.records) - 1)
}

func (s *MemoryStore) Lookup(_ context.Context, d Digest, now time.Time) (Session, error) {
	var sess Session
	live := false
	s.record(d, func(rec *memRecord) {
		if rec.expiresAt == 0 || rec.expiresAt > now.UnixNano() {
			sess, live = s.session(rec, false), true
		}
	})
	if !live {
		return Session{}, ErrNotFound
	}
	return sess, nil
}

// Touch records a use of d at now: one atomic store under a read lock.
func (s *MemoryStore) Touch(_ context.Context, d Digest, now time.Time) {
	sh := s.shard(d)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if at, ok := sh.index[d]; ok {
		last := &sh.records[at].lastUsed
		if t := now.UnixNano(); t > atomic.LoadInt64(last) {
			atomic.StoreInt64(last, t)
		}
	}
}

// record calls f with d's record, if d is stored, under its shard's read
// lock, and reports whether it was.
func (s *MemoryStore) record(d Digest, f func(*memRecord)) bool {
	sh := s.shard(d)
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	at, ok := sh.index[d]
	if ok {
		f(&sh.records[at])
	}
	return ok
}

func (s *MemoryStore) List(_ context.Context, username string, now time.Time) ([]ListedSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ListedSession
	for _, d := range s.byUser[s.strings.find(username)] {
		s.record(d, func(rec *memRecord) {
			if rec.expiresAt == 0 || rec.expiresAt > now.UnixNano() {
				out = append(out, ListedSession{Digest: d, Session: s.session(rec, true)})
			}
		})
	}
	slices.Reverse(out) // byUser is oldest first
	return out, nil
}

func (s *MemoryStore) RevokeID(_ context.Context, username string, id SessionID) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.byUser[s.strings.find(username)] {
		match := false
		s.record(d, func(rec *memRecord) { match = rec.id == id })
		if match {
			s.deleteSession(d)
			return true, nil
		}
	}
	return false, nil
}

func (s *MemoryStore) Revoke(_ context.Context, d Digest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteSession(d)
	return nil
}

func (s *MemoryStore) RevokeUser(_ context.Context, username string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	user := s.strings.find(username)
	digests := s.byUser[user]
	delete(s.byUser, user)
	for _, d := range digests {
		if rec, ok := s.removeRecord(d); ok {
			s.release(&rec)
		}
	}
	for d := range s.userChallenges[username] {
		s.dropChallenge(d, username)
	}
	return len(digests), nil
}

// Supersede keeps sup's stamp and removes the sessions and challenges it
// supersedes, under s.mu: an Issue or PutChallenge of the user runs wholly
// before it or after it.
func (s *MemoryStore) Supersede(_ context.Context, sup Supersession) (int, error) {
	cutoff := sup.Before.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.stamps[sup.Username]; ok && cur.live(time.Now().UnixNano()) && cutoff < cur.before {
		return 0, nil // stale: the store has been told of a later change
	}
	user := s.strings.find(sup.Username)
	digests := s.byUser[user]
	kept, removed := digests[:0], 0
	for _, d := range digests {
		dead := false
		s.record(d, func(rec *memRecord) {
			dead = rec.issuedAt < cutoff || (sup.Stamp != 0 && rec.stamp <= sup.MaxStamp && rec.stamp != sup.Stamp)
		})
		if !dead {
			kept = append(kept, d)
		} else if rec, ok := s.removeRecord(d); ok {
			s.release(&rec)
			removed++
		}
	}
	switch {
	case len(kept) == len(digests): // nothing removed, or no sessions at all
	case len(kept) == 0:
		delete(s.byUser, user)
	default:
		clear(digests[len(kept):])
		s.byUser[user] = kept
	}
	for d := range s.userChallenges[sup.Username] {
		c := s.challenges[d]
		if c.IssuedAt.UnixNano() < cutoff || (sup.Stamp != 0 && c.Stamp <= sup.MaxStamp && c.Stamp != sup.Stamp) {
			s.dropChallenge(d, sup.Username)
		}
	}
	if sup.Stamp == 0 {
		delete(s.counters, sup.Username)
	}
	cur := memStamp{stamp: sup.Stamp, before: cutoff}
	if !sup.Until.IsZero() {
		cur.until = sup.Until.UnixNano()
	}
	s.stamps[sup.Username] = cur
	return removed, nil
}

// Import stores batch under s.mu, as Issue stores one session.
func (s *MemoryStore) Import(_ context.Context, batch []Imported, now time.Time, dryRun bool) ([]ImportOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	outcomes := make([]ImportOutcome, len(batch))
	for i, im := range batch {
		outcomes[i] = s.importOne(im, now, dryRun)
	}
	return outcomes, nil
}

// importOne is Import of one session. The caller holds s.mu.
func (s *MemoryStore) importOne(im Imported, now time.Time, dryRun bool) ImportOutcome {
	sess, d := im.Session, im.Digest
	expiry := int64(0)
	if !sess.ExpiresAt.IsZero() {
		expiry = sess.ExpiresAt.UnixNano()
	}
	if owner, ok := s.imported[d]; ok {
		live := false
		sh := s.shard(d)
		sh.mu.Lock()
		if at, ok := sh.index[d]; ok {
			rec := &sh.records[at]
			live = owner == sess.Username && s.strings.get(rec.user) == owner &&
				(rec.expiresAt == 0 || rec.expiresAt > now.UnixNano())
			if live && !dryRun {
				rec.expiresAt = expiry
			}
		}
		sh.mu.Unlock()
		if !live {
			return ImportDead
		}
		return ImportRefreshed
	}
	if s.record(d, func(*memRecord) {}) {
		return ImportDead
	}
	if s.stamps[sess.Username].refuses(sess.Stamp, now.UnixNano()) {
		return ImportSuperseded
	}
	if dryRun {
		return ImportAdded
	}
	rec := memRecord{stamp: sess.Stamp, issuedAt: sess.IssuedAt.UnixNano(), lastUsed: now.UnixNano(), id: sess.ID, expiresAt: expiry}
	rec.user = s.strings.add(sess.Username)
	rec.agent = s.strings.add(sess.UserAgent)
	rec.client = s.newClient(sess.Client)
	sh := s.shard(d)
	sh.mu.Lock()
	sh.index[d] = sh.put(rec)
	sh.mu.Unlock()
	// byUser stays oldest first, which Issue's limit and List rely on.
	digests := s.byUser[rec.user]
	at := len(digests)
	for at > 0 {
		older := true
		s.record(digests[at-1], func(r *memRecord) { older = r.issuedAt <= rec.issuedAt })
		if older {
			break
		}
		at--
	}
	s.byUser[rec.user] = slices.Insert(digests, at, d)
	s.imported[d] = sess.Username
	return ImportAdded
}

// PutChallenge stores c under s.mu, where Supersede also runs: a
// challenge on a superseded stamp is refused here or removed there.
func (s *MemoryStore) PutChallenge(_ context.Context, d Digest, c Challenge, now time.Time) error {
	if c.ExpiresAt.IsZero() || c.Attempts < 1 {
		return ErrBadChallenge
	}
	c.IssuedAt = now
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stamps[c.Username].refuses(c.Stamp, now.UnixNano()) {
		return ErrSuperseded
	}
	if old, ok := s.challenges[d]; ok { // not expected (the contract): the new challenge wins
		s.dropChallenge(d, old.Username)
	}
	s.challenges[d] = c
	mine := s.userChallenges[c.Username]
	if mine == nil {
		mine = make(map[Digest]struct{})
		s.userChallenges[c.Username] = mine
	}
	mine[d] = struct{}{}
	return nil
}

// TryChallenge takes one attempt of d's challenge under s.mu, so that
// parallel callers share its attempts. A challenge with none left stays,
// for the last attempt's claim, until it is spent, swept or expires.
func (s *MemoryStore) TryChallenge(_ context.Context, d Digest, now time.Time) (Challenge, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.challenges[d]
	if !ok {
		return Challenge{}, ErrNotFound
	}
	if !c.ExpiresAt.After(now) {
		s.dropChallenge(d, c.Username)
		return Challenge{}, ErrNotFound
	}
	if _, claimed := s.claimed[d]; claimed || c.Attempts < 1 {
		return Challenge{}, ErrNotFound
	}
	c.Attempts--
	s.challenges[d] = c
	return c, nil
}

// ClaimChallenge claims d's challenge under s.mu: of parallel callers, one.
func (s *MemoryStore) ClaimChallenge(_ context.Context, d Digest, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.challenges[d]
	if !ok {
		return false, nil
	}
	if !c.ExpiresAt.After(now) {
		s.dropChallenge(d, c.Username)
		return false, nil
	}
	if _, claimed := s.claimed[d]; claimed {
		return false, nil
	}
	s.claimed[d] = struct{}{}
	return true, nil
}

func (s *MemoryStore) UnclaimChallenge(_ context.Context, d Digest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.claimed, d) // only a stored challenge is ever claimed
	return nil
}

func (s *MemoryStore) SpendChallenge(_ context.Context, d Digest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.challenges[d]; ok {
		s.dropChallenge(d, c.Username)
	}
	return nil
}

// dropChallenge removes d, a challenge of username, and its index entry.
// The caller holds s.mu.
func (s *MemoryStore) dropChallenge(d Digest, username string) {
	delete(s.challenges, d)
	delete(s.claimed, d)
	mine := s.userChallenges[username]
	delete(mine, d)
	if len(mine) == 0 {
		delete(s.userChallenges, username)
	}
}

// UseTOTPCounter compares and keeps under s.mu, so that of parallel uses
// of one code exactly one wins.
func (s *MemoryStore) UseTOTPCounter(_ context.Context, username string, counter, floor int64, now, until time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := floor
	if cur, ok := s.counters[username]; ok && (cur.until == 0 || cur.until > now.UnixNano()) {
		last = max(last, cur.counter)
	}
	if counter <= last {
		return false, nil
	}
	kept := memCounter{counter: counter}
	if !until.IsZero() {
		kept.until = until.UnixNano()
	}
	s.counters[username] = kept
	return true, nil
}

func (s *MemoryStore) Ping(context.Context) error { return nil }

func (s *MemoryStore) Close() error { return nil }

// Len returns the number of stored sessions, expired ones not yet swept included.
func (s *MemoryStore) Len() (n int, ok bool) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		n += len(sh.index)
		sh.mu.RUnlock()
	}
	return n, true
}

// Sweep deletes the sessions expired at now, one shard at a time, and
// reports how many it deleted. Logins and look-ups proceed between shards.
// It also forgets the password stamps kept past their Until and the TOTP
// counters past theirs, and removes the expired challenges.
func (s *MemoryStore) Sweep(now time.Time) int {
	cutoff := now.UnixNano()
	total := 0
	var expired []Digest
	for i := range s.shards {
		expired = expired[:0]
		sh := &s.shards[i]
		sh.mu.RLock()
		for d, at := range sh.index {
			if e := sh.records[at].expiresAt; e != 0 && e <= cutoff {
				expired = append(expired, d)
			}
		}
		sh.mu.RUnlock()
		if len(expired) == 0 {
			continue
		}
		s.mu.Lock()
		for _, d := range expired {
			if s.deleteSession(d) {
				total++
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	for name, cur := range s.stamps {
		if cur.until != 0 && cur.until <= cutoff {
			delete(s.stamps, name)
		}
	}
	for d, c := range s.challenges {
		if !c.ExpiresAt.After(now) {
			s.dropChallenge(d, c.Username)
		}
	}
	for name, cur := range s.counters {
		if cur.until != 0 && cur.until <= cutoff {
			delete(s.counters, name)
		}
	}
	s.mu.Unlock()
	return total
}

// deleteSession removes d from its shard and from its user's digests, and
// reports whether it was there. The caller holds s.mu.
func (s *MemoryStore) deleteSession(d Digest) bool {
	rec, ok := s.removeRecord(d)
	if ok {
		s.forget(rec.user, d)
		s.release(&rec)
	}
	return ok
}

// removeRecord removes d from its shard alone and returns its record,
// whose strings the caller releases. The caller holds s.mu.
func (s *MemoryStore) removeRecord(d Digest) (memRecord, bool) {
	sh := s.shard(d)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	at, ok := sh.index[d]
	if !ok {
		return memRecord{}, false
	}
	rec := sh.records[at]
	delete(sh.index, d)
	sh.records[at] = memRecord{}
	sh.free = append(sh.free, at)
	return rec, true
}

// forget removes d from user's digests. The caller holds s.mu.
func (s *MemoryStore) forget(user strHandle, d Digest) {
	digests := s.byUser[user]
	if i := slices.Index(digests, d); i >= 0 {
		digests = slices.Delete(digests, i, i+1)
	}
	if len(digests) == 0 {
		delete(s.byUser, user)
	} else {
		s.byUser[user] = digests
	}
}
