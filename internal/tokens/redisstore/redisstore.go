package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"authsvc/internal/tokens"

	"github.com/redis/go-redis/v9"
)

// redisCallTimeout bounds a call to a Redis that is down or stuck, well
// inside API.md's 503-within-5-s. The dial and I/O bounds are redisurl's,
// which every form's client gets.
const redisCallTimeout = 2 * time.Second

// core is what Store (one Redis, standalone.go) and ClusterStore
// (cluster.go) share: the look-ups, pipelined; the touches, written off
// the request path; the cache of looked-up sessions and its invalidations
// (cache.go); the challenges and TOTP counters, whose scripts touch one
// user's keys and so run alike on both; and the keys and arguments of the
// user scripts (layout.go). What differs, each store gives: the user
// scripts' layout, and how a batch of look-ups or touches is sent
// (batcher).
type core struct {
	// rdb is the store's client, for the commands and scripts both stores
	// send alike.
	rdb  redis.UniversalClient
	keys keyNamer
	// channel is the invalidation channel, as any so that no batch
	// allocates it again.
	channel any
	// db is the database whose evicted keys the cache hears of.
	db      int
	batches batcher

	// cache keeps looked-up sessions, kept true by the invalidations
	// invalidationLoop hears (cache.go); subscribeOnce starts that loop
	// at the first Lookup with the cache on.
	cache         tokenCache
	subscribeOnce sync.Once
	// notices queues the user notices the subscriber hears for the hook
	// OnUserNotice registered (notice.go), which noticeOnce's loop calls.
	// relinking, the subscriber's own, tells a link made again from the
	// store's first.
	notices    noticeQueue
	noticeOnce sync.Once
	relinking  bool
	// afterRead, when set (by tests, before the first Lookup), runs
	// between a Lookup's read of Redis and its put in the cache.
	afterRead func(tokens.Digest)
	// heard, when set (by tests, before the first Lookup), runs before
	// invalidationLoop applies a message.
	heard func(payload string)

	// Look-ups are pipelined: lookupLoop sends all look-ups waiting at once
	// in one round trip, which saves both processes most of their system
	// calls when many requests check tokens at the same time.
	lookups chan lookupRequest
	stop    chan struct{}
	loops   sync.WaitGroup

	// Touches are written off the request path: Touch records the latest
	// use of each token key in pending and wakes touchLoop, which writes
	// them in batches (sendTouches). Nothing is dropped: a token
	// used within --token-idle must never be refused for idleness. pending
	// holds a key once however often it is used, and Touch is called at
	// most once per token per touch lag, so it stays small.
	touchMu   sync.Mutex       // guards pending
	pending   map[string]int64 // token key → latest use not yet written, Unix ms
	touchWake chan struct{}    // has room for one wake-up
}

// A batcher sends a batch of look-ups or of touches as its store's layout
// allows: one script call on one Redis, a pipeline over a Cluster's
// slots.
type batcher interface {
	// sendLookups answers every look-up of batch on its done channel,
	// within ctx. args is the calling loop's buffer, returned for its next
	// batch.
	sendLookups(ctx context.Context, batch []lookupRequest, args []any) []any
	// sendTouches writes uses[i], Unix ms, as the last use of token key
	// keys[i] where it is later than the one stored (touchScript).
	sendTouches(ctx context.Context, keys []string, uses []any) error
}

// Cached is what both stores tell of their cache of looked-up sessions
// (cache.go): serve sizes it, the metrics report it.
type Cached interface {
	SetCacheSize(n int)
	CacheStats() (hits, misses, breaks uint64, size int)
}

// Touches: at most maxTouchBatch per batch; the uses of a batch that
// failed (Redis out of reach) are written again touchRetry later.
const (
	maxTouchBatch = 256
	touchRetry    = 250 * time.Millisecond
)

// lookupRequest is one pending look-up; done has room for its answer.
// After deadline its caller has given up, so the loop skips it rather than
// spend a round trip on it.
type lookupRequest struct {
	key      string
	deadline time.Time
	done     chan lookupAnswer
}

type lookupAnswer struct {
	fields []any
	err    error
}

// Pipelined look-ups: lookupLoops loops, each sending up to maxLookupBatch
// look-ups per round trip.
//
// Each look-up gives up after lookupBound, counted from its own start, not
// from its place in the queue: when Redis hangs, requests pile up faster
// than batches time out, and a bound per batch would grow with the queue
// (3,000 waiting look-ups took 13 s to fail). lookupBound is well inside
// API.md's 503-within-5-s.
const (
	lookupLoops    = 2
	maxLookupBatch = 128
	lookupBound    = 2 * time.Second
)

// errLookupTimeout reports a look-up that Redis did not answer within
// lookupBound.
var errLookupTimeout = errors.New("no answer within " + lookupBound.String())

// A lookupWaiter is what one Lookup waits with. Waiters are reused only
// after their answer arrived, when no loop can still write to done; one
// whose caller gave up is left to the garbage collector.
type lookupWaiter struct {
	done  chan lookupAnswer
	timer *time.Timer
}

var lookupWaiters = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &lookupWaiter{done: make(chan lookupAnswer, 1), timer: t}
}}

// start readies the core of a store on rdb, database db, keeping up to
// DefaultCacheSize looked-up sessions, and starts its loops, which send
// through b.
func (s *core) start(rdb redis.UniversalClient, keys keyNamer, db int, b batcher) {
	s.rdb, s.keys, s.db, s.batches = rdb, keys, db, b
	s.channel = keys.prefix + "inv"
	s.lookups = make(chan lookupRequest)
	s.stop = make(chan struct{})
	s.pending = make(map[string]int64)
	s.touchWake = make(chan struct{}, 1)
	s.notices.wake = make(chan struct{}, 1)
	s.cache.resize(DefaultCacheSize)
	for range lookupLoops {
		s.loops.Add(1)
		go s.lookupLoop()
	}
	s.loops.Add(1)
	go s.touchLoop()
}

// lookupLoop takes a look-up, adds every other one already waiting, and
// sends them in one batch (sendLookups), until the store is closed.
// Look-ups whose caller has given up are dropped unsent, so a backlog built
// up while Redis hung drains at once when it answers again.
func (s *core) lookupLoop() {
	defer s.loops.Done()
	batch := make([]lookupRequest, 0, maxLookupBatch)
	args := make([]any, 0, 4+maxLookupBatch)
	for {
		batch = batch[:0]
		select {
		case req := <-s.lookups:
			batch = append(batch, req)
		case <-s.stop:
			return
		}
	collect:
		for len(batch) < maxLookupBatch {
			select {
			case req := <-s.lookups:
				batch = append(batch, req)
			default:
				break collect
			}
		}
		now := time.Now()
		var latest time.Time
		live := batch[:0]
		for _, req := range batch {
			if req.deadline.After(now) {
				live = append(live, req)
				latest = later(latest, req.deadline)
			}
		}
		batch = live
		if len(batch) == 0 {
			continue
		}

		// The call may take as long as the batch's most patient caller waits.
		ctx, cancel := context.WithDeadline(context.Background(), latest)
		args = s.batches.sendLookups(ctx, batch, args)
		cancel()
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// quietRedisLog discards go-redis's own log lines.
type quietRedisLog struct{}

func (quietRedisLog) Printf(context.Context, string, ...any) {}

// pingError is what Ping reports for err, the error of a PING or nil. An
// error reply (WRONGPASS, NOAUTH, an out-of-range database) is Redis
// refusing this configuration; anything else, Redis out of reach.
func pingError(err error) error {
	if err == nil {
		return nil
	}
	if re := redis.Error(nil); errors.As(err, &re) {
		return fmt.Errorf("redis ping: %w: %w", tokens.ErrRefused, err)
	}
	return unavailable("ping", err)
}

// unavailable wraps err from Redis so that errors.Is(err, ErrUnavailable)
// holds and the caller's context error stays visible. Only digests ever reach
// Redis, so err cannot hold a token.
func unavailable(op string, err error) error {
	return fmt.Errorf("redis %s: %w: %w", op, tokens.ErrUnavailable, err)
}

// Lookup returns the session under d. Redis expires it by its own clock and
// Lookup also by now, so the earlier of the two wins. A session its user's
// index no longer lists is not found (see lookupScript).
//
// It answers from the cache when it may (cache.go), judging the cached
// expiry against now as it judges Redis's; under tokens.WithFresh it reads
// Redis, and keeps what it read for the next Lookup.
//
// A stored value that does not parse is an error wrapping ErrUnavailable,
// not ErrNotFound: the store is broken, and a 401 would tell the client
// to log in again rather than report the fault.
func (s *core) Lookup(ctx context.Context, d tokens.Digest, now time.Time) (tokens.Session, error) {
	if !tokens.Fresh(ctx) {
		if cs, ok := s.cache.get(d); ok {
			if cs.expiresMs != 0 && cs.expiresMs <= now.UnixMilli() {
				return tokens.Session{}, tokens.ErrNotFound
			}
			return cs.session(), nil
		}
	}
	gen, keep, on := s.cache.snapshot()
	if on {
		s.startSubscriber()
	}
	cs, err := s.lookupRedis(ctx, d)
	if s.afterRead != nil {
		s.afterRead(d)
	}
	if errors.Is(err, tokens.ErrNotFound) {
		s.cache.drop(d)
	}
	if err != nil {
		return tokens.Session{}, err
	}
	if keep {
		s.cache.put(d, cs, gen)
	}
	if cs.expiresMs != 0 && cs.expiresMs <= now.UnixMilli() {
		return tokens.Session{}, tokens.ErrNotFound
	}
	return cs.session(), nil
}

// lookupRedis reads the session under d from Redis, expired or not.
func (s *core) lookupRedis(ctx context.Context, d tokens.Digest) (cachedSession, error) {
	ans := s.lookup(ctx, s.keys.token(d))
	if ans.err != nil {
		return cachedSession{}, unavailable("lookup", ans.err)
	}
	f := ans.fields
	if len(f) != 6 {
		return cachedSession{}, unavailable("lookup", errCorruptSession)
	}
	if f[0] == nil {
		return cachedSession{}, tokens.ErrNotFound
	}
	sess, expiresMs, err := parseRedisSession(f[:3])
	if err != nil {
		return cachedSession{}, unavailable("lookup", err)
	}
	enrolment, ok := f[4].(int64)
	if !ok || enrolment < 0 || enrolment > 1 {
		return cachedSession{}, unavailable("lookup", errCorruptSession)
	}
	score, listed := f[5].(string)
	if !listed {
		return cachedSession{}, tokens.ErrNotFound
	}
	issuedMs, err := strconv.ParseInt(score, 10, 64)
	if err != nil {
		return cachedSession{}, unavailable("lookup", errCorruptSession)
	}
	cs := cachedSession{username: sess.Username, stamp: sess.Stamp, expiresMs: expiresMs, issuedMs: issuedMs, usedMs: issuedMs, enrolment: enrolment == 1}
	if l, ok := f[3].(string); ok {
		if ms, err := strconv.ParseInt(l, 10, 64); err == nil && ms > issuedMs {
			cs.usedMs = ms
		}
	}
	return cs, nil
}

// lookup hands key to a lookupLoop and waits for its answer for at most
// lookupBound and while ctx lasts, time in the queue included; if it stops
// waiting, the answer's error says why.
func (s *core) lookup(ctx context.Context, key string) lookupAnswer {
	w := lookupWaiters.Get().(*lookupWaiter)
	w.timer.Reset(lookupBound)
	deadline := time.Now().Add(lookupBound)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	select {
	case s.lookups <- lookupRequest{key: key, deadline: deadline, done: w.done}:
	case <-w.timer.C:
		lookupWaiters.Put(w) // never handed out, and its timer is spent
		return lookupAnswer{err: errLookupTimeout}
	case <-ctx.Done():
		w.timer.Stop()
		lookupWaiters.Put(w)
		return lookupAnswer{err: ctx.Err()}
	}
	select {
	case ans := <-w.done:
		w.timer.Stop()
		lookupWaiters.Put(w)
		return ans
	case <-w.timer.C:
		return lookupAnswer{err: errLookupTimeout}
	case <-ctx.Done():
		w.timer.Stop()
		return lookupAnswer{err: ctx.Err()}
	}
}

// errCorruptSession reports a stored session that does not parse.
var errCorruptSession = errors.New("corrupt session")

// parseRedisSession decodes the HMGET u s e reply of a present token key, and
// returns the expiry in Unix ms, 0 for never.
func parseRedisSession(f []any) (tokens.Session, int64, error) {
	username, ok1 := f[0].(string)
	stampStr, ok2 := f[1].(string)
	if !ok1 || !ok2 {
		return tokens.Session{}, 0, errCorruptSession
	}
	stamp, err := strconv.ParseUint(stampStr, 10, 64)
	if err != nil {
		return tokens.Session{}, 0, errCorruptSession
	}
	sess := tokens.Session{Username: username, Stamp: stamp}
	if f[2] == nil {
		return sess, 0, nil
	}
	expStr, ok := f[2].(string)
	if !ok {
		return tokens.Session{}, 0, errCorruptSession
	}
	ms, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil || ms == 0 {
		return tokens.Session{}, 0, errCorruptSession
	}
	sess.ExpiresAt = time.UnixMilli(ms).UTC()
	return sess, ms, nil
}

// importBatch is how many imported sessions Import sends in one round
// trip: a pipeline of that many script calls.
const importBatch = 500

// liveListed decodes rows, each as listScript gives it, and keeps the
// sessions live at now.
func liveListed(username string, rows []any, now time.Time) ([]tokens.ListedSession, error) {
	out := make([]tokens.ListedSession, 0, len(rows))
	for _, row := range rows {
		ls, ok := parseListedSession(username, row)
		if !ok {
			return nil, unavailable("list", errCorruptSession)
		}
		if ls.ExpiresAt.IsZero() || ls.ExpiresAt.After(now) {
			out = append(out, ls)
		}
	}
	return out, nil
}

// parseListedSession decodes one row of listScript.
func parseListedSession(username string, row any) (tokens.ListedSession, bool) {
	f, ok := row.([]any)
	if !ok || len(f) != 9 {
		return tokens.ListedSession{}, false
	}
	str := func(v any) string { s, _ := v.(string); return s }
	var ls tokens.ListedSession
	raw, err := hex.DecodeString(str(f[0]))
	if err != nil || len(raw) != len(ls.Digest) {
		return tokens.ListedSession{}, false
	}
	copy(ls.Digest[:], raw)
	issued, err := strconv.ParseInt(str(f[1]), 10, 64)
	if err != nil {
		return tokens.ListedSession{}, false
	}
	ls.Username = username
	if ls.Stamp, err = strconv.ParseUint(str(f[2]), 10, 64); err != nil {
		return tokens.ListedSession{}, false
	}
	ls.IssuedAt = time.UnixMilli(issued)
	ls.LastUsedAt = ls.IssuedAt
	if ms, err := strconv.ParseInt(str(f[3]), 10, 64); err == nil && ms != 0 {
		ls.ExpiresAt = time.UnixMilli(ms).UTC()
	}
	if ms, err := strconv.ParseInt(str(f[4]), 10, 64); err == nil && ms > issued {
		ls.LastUsedAt = time.UnixMilli(ms)
	}
	ls.ID, _ = tokens.ParseSessionID(str(f[5])) // tokens issued before ids have the zero id
	ls.Client, ls.UserAgent = str(f[6]), str(f[7])
	switch f[8] {
	case nil: // a full session, and every session of older versions
	case "1":
		ls.Enrolment = true
	default:
		return tokens.ListedSession{}, false
	}
	return ls, true
}

// Sweep does nothing: Redis expires sessions on its own.
func (s *core) Sweep(time.Time) int { return 0 }

// Len does not count: counting would scan Redis.
func (s *core) Len() (int, bool) { return 0, false }

// Close stops the store's loops; the client stays open (New, NewCluster).
func (s *core) Close() error {
	close(s.stop)
	s.loops.Wait()
	return nil
}
