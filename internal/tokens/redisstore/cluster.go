package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"authsvc/internal/redisurl"
	"authsvc/internal/tokens"

	"github.com/redis/go-redis/v9"
)

// Cluster mode (issue 22, point 3): the same Store on a Redis Cluster,
// made by NewCluster. The standalone layout cannot be spread over slots:
// its scripts reach token keys they compute from the index. So a cluster
// store's keys carry hash tags, and it keeps a companion beside each index
// (keys.go), where every script touches only keys it declares, all of one
// slot.
//
// An operation that needs both a user's keys and a token key is split: a
// script in the user's slot, which decides (the index is the source of
// truth), and plain commands on the token key, ordered so that the gap
// between the two never makes a dead session live. The argument that
// carries every split: Lookup returns a session only if, after reading its
// token key, it finds the digest still listed in its user's index (a
// second round trip, pipelined over the batch). So a token key left behind
// by a split (an Issue whose token write lands after a Supersede or
// RevokeUser removed its index entry, a DEL that failed) is dead to every
// instance, and Lookup deletes it when it meets it. Each split below says
// why its order is the right one.
//
// Invalidations are PUBLISHed as in standalone mode (same channel, same
// payloads): a Redis Cluster forwards a PUBLISH to every node, so the
// subscriber hears it whichever node it is connected to. Each one is
// sent after the index stopped listing what it names, so a Lookup that
// reads after hearing it finds the session dead. Keyspace "evicted"
// events are local to a node and not heard; the README asks for
// noeviction.

// NewCluster returns a store on a Redis Cluster (redisurl.ParseCluster,
// redis.NewClusterClient), with keys under prefix ("" means
// DefaultPrefix) in the cluster layout (keys.go). A prefix holding "{" or "}"
// is refused: it would move the hash tags and spread a user's keys over
// slots. Close leaves client open: the throttle may share it.
func NewCluster(client *redis.ClusterClient, prefix string) (*Store, error) {
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redis cluster store: prefix %q holds a brace; the keys' hash tags need a prefix without", prefix)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	s := &Store{
		cc:        client,
		rdb:       client,
		keys:      keyNamer{prefix: prefix, open: "{", close: "}"},
		channel:   prefix + "inv",
		lookups:   make(chan lookupRequest),
		stop:      make(chan struct{}),
		pending:   make(map[string]int64),
		touchWake: make(chan struct{}, 1),
	}
	s.cache.resize(DefaultCacheSize)
	for range lookupLoops {
		s.loops.Add(1)
		go s.lookupLoop()
	}
	s.loops.Add(1)
	go s.touchLoop()
	return s, nil
}

// errClusterUsername reports a username whose keys would not share a slot:
// an empty one, or one starting with "}", makes an empty hash tag, and then
// Redis hashes each whole key apart.
var errClusterUsername = errors.New("username empty or starting with '}': no hash tag for its keys")

// checkClusterUser refuses a username errClusterUsername describes.
func checkClusterUser(username string) error {
	if username == "" || username[0] == '}' {
		return errClusterUsername
	}
	return nil
}

// clusterNowLua sets rnow to Redis's clock in Unix ms: the clock by which
// Redis expires token keys, so that a companion entry counts as live
// exactly while its token key would exist (the standalone scripts ask the
// token key itself).
const clusterNowLua = `
local t = redis.call('TIME')
local rnow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// clusterIssueScript is issueScript's user-slot half: the stamp check, the
// index entry and its companion, pruning of expired entries, eviction
// beyond the limit, and the expiry of index and companion. It writes
// nothing when it refuses the stamp. Evicted entries are removed and
// published here; their token keys are deleted by the caller after.
//
// KEYS[1] index, KEYS[2] stamp, KEYS[3] companion.
// ARGV[1] digest hex, ARGV[2] stamp, ARGV[3] limit (0 = none), ARGV[4] now
// (Unix ms), ARGV[5] expiry (Unix ms; "" = never), ARGV[6] session id hex,
// ARGV[7] invalidation channel.
// It returns {-1} for a superseded stamp, else {evicted, digest hex…}.
var clusterIssueScript = redis.NewScript(clusterNowLua + `
local ukey, xkey = KEYS[1], KEYS[3]
local digest, limit, now = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local current = redis.call('GET', KEYS[2])
if current and current ~= ARGV[2] then
  return {-1}
end
redis.call('HSET', xkey, digest, ARGV[5] .. ' ' .. ARGV[2] .. ' ' .. ARGV[6])
local score = now
local newest = redis.call('ZRANGE', ukey, -1, -1, 'WITHSCORES')
if newest[2] and tonumber(newest[2]) >= score then
  score = tonumber(newest[2]) + 1
end
redis.call('ZADD', ukey, score, digest)

local live = {}
for _, m in ipairs(redis.call('ZRANGE', ukey, 0, -1)) do
  local v = redis.call('HGET', xkey, m)
  local e = v and string.match(v, '^(%d*) ')
  if e and (e == '' or tonumber(e) > rnow) then
    live[#live + 1] = {m, e}
  else
    redis.call('ZREM', ukey, m)
    redis.call('HDEL', xkey, m)
  end
end

local evict = 0
if limit > 0 and #live > limit then
  evict = #live - limit
end
local out = {evict}
local last, never = 0, false
for i, x in ipairs(live) do
  if i <= evict then
    redis.call('ZREM', ukey, x[1])
    redis.call('HDEL', xkey, x[1])
    redis.call('PUBLISH', ARGV[7], 't:' .. x[1])
    out[#out + 1] = x[1]
  elseif x[2] == '' then
    never = true
  elseif tonumber(x[2]) > last then
    last = tonumber(x[2])
  end
end
for _, k in ipairs({ukey, xkey}) do
  if never then
    redis.call('PERSIST', k)
  elseif last > 0 then
    redis.call('PEXPIREAT', k, last)
  end
end
return out
`)

// clusterIssue is Issue in cluster mode. The split: first the user-slot
// script (stamp check, index, eviction), then the token key, then the
// evicted token keys. If the stamp is refused nothing is written. Between
// the script and the token write the token is not found, which harms
// nobody: the caller has not handed it out yet. A Supersede or RevokeUser
// that runs in that gap removes the index entry (it is there already, so
// the Supersede judges it by the companion, as it would the session), and
// the token key written after is an orphan, dead to Lookup. An evicted
// session is dead once the script removed its entry; deleting its token
// key after only saves memory (Lookup deletes it too).
func (s *Store) clusterIssue(ctx context.Context, d tokens.Digest, sess tokens.Session, limit int, now time.Time) (int, error) {
	if err := checkClusterUser(sess.Username); err != nil {
		return 0, fmt.Errorf("redis issue: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	expiry := ""
	if !sess.ExpiresAt.IsZero() {
		expiry = strconv.FormatInt(sess.ExpiresAt.UnixMilli(), 10)
	}
	dhex := hex.EncodeToString(d[:])
	stamp := strconv.FormatUint(sess.Stamp, 10)
	u := sess.Username
	res, err := clusterIssueScript.Run(ctx, s.cc,
		[]string{s.keys.index(u), s.keys.stamp(u), s.keys.companion(u)},
		dhex, stamp, max(limit, 0), now.UnixMilli(), expiry, sess.ID.String(), s.channel).Slice()
	if err != nil {
		return 0, unavailable("issue", err)
	}
	n, ok := res[0].(int64)
	if !ok {
		return 0, unavailable("issue", fmt.Errorf("reply %v", res))
	}
	if n < 0 {
		return 0, tokens.ErrSuperseded
	}
	tkey := s.keys.key("t", dhex)
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	_, err = s.cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if expiry == "" {
			p.HSet(ctx, tkey, "u", u, "s", stamp, "l", ms, "i", sess.ID.String(), "a", sess.Client, "g", sess.UserAgent)
			p.HDel(ctx, tkey, "e")
			p.Persist(ctx, tkey)
		} else {
			p.HSet(ctx, tkey, "u", u, "s", stamp, "e", expiry, "l", ms, "i", sess.ID.String(), "a", sess.Client, "g", sess.UserAgent)
			p.PExpireAt(ctx, tkey, time.UnixMilli(sess.ExpiresAt.UnixMilli()))
		}
		return nil
	})
	if err != nil {
		return 0, unavailable("issue", err)
	}
	if n > 0 {
		s.cache.forgetUser(u)
		s.delTokens(ctx, res[1:])
	}
	return int(n), nil
}

// delTokens deletes the token keys of the digests (hex) given, and reports
// how many existed. Each DEL is its own slot's; they go in one pipeline.
func (s *Store) delTokens(ctx context.Context, digests []any) (int, error) {
	if len(digests) == 0 {
		return 0, nil
	}
	cmds, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, m := range digests {
			h, _ := m.(string)
			p.Del(ctx, s.keys.key("t", h))
		}
		return nil
	})
	n := 0
	for _, c := range cmds {
		n += int(c.(*redis.IntCmd).Val())
	}
	return n, err
}

// clusterLookupBatch is lookupScript in cluster mode: for each token key
// the HMGET u s e l reply and the digest's score in its user's index (or
// 0), in two pipelined round trips: the token keys, then the indexes of
// those found. A token key whose index does not list it is dead (the
// splits above leave such orphans) and deleted, best effort, with its
// digest published. The index is read after the token key: a session
// revoked between the two reads was live at the first, so answering it is
// a Lookup that came before the Revoke.
func (s *Store) clusterLookupBatch(ctx context.Context, batch []lookupRequest) []lookupAnswer {
	out := make([]lookupAnswer, len(batch))
	reads := make([]*redis.SliceCmd, len(batch))
	_, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, req := range batch {
			reads[i] = p.HMGet(ctx, req.key, "u", "s", "e", "l")
		}
		return nil
	})
	if err != nil && !isReplyError(reads) {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	scores := make([]*redis.FloatCmd, len(batch))
	digests := make([]string, len(batch))
	_, err = s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, req := range batch {
			f, err := reads[i].Result()
			if err != nil {
				continue
			}
			u, ok := f[0].(string)
			if !ok {
				continue
			}
			digests[i] = s.keys.digestOf(req.key)
			scores[i] = p.ZScore(ctx, s.keys.index(u), digests[i])
		}
		return nil
	})
	var orphans []string
	for i := range batch {
		f, rerr := reads[i].Result()
		switch {
		case rerr != nil:
			out[i].err = errCorruptSession // a key of the wrong type: its own look-up fails
			continue
		case scores[i] == nil:
			out[i].fields = append(f, int64(0))
			continue
		}
		// Scores are integers (ms); FormatFloat 'f' -1 prints them as Redis does.
		sc, serr := scores[i].Result()
		switch {
		case serr == nil:
			out[i].fields = append(f, strconv.FormatFloat(sc, 'f', -1, 64))
		case errors.Is(serr, redis.Nil):
			out[i].fields = append(f, int64(0))
			orphans = append(orphans, digests[i])
		case err != nil && !isRedisError(serr):
			out[i].err = serr
		default:
			out[i].err = errCorruptSession
		}
	}
	if len(orphans) > 0 {
		s.cc.Pipelined(ctx, func(p redis.Pipeliner) error { // best effort: refused either way
			for _, h := range orphans {
				p.Del(ctx, s.keys.key("t", h))
				p.Publish(ctx, s.channel.(string), "t:"+h)
			}
			return nil
		})
	}
	return out
}

// isRedisError reports whether err is a reply of Redis (WRONGTYPE, say),
// not a failure to reach it.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}

// isReplyError reports whether every failed command of a pipeline failed
// with a reply of Redis: the pipeline reached Redis, and only the look-ups
// of those keys fail.
func isReplyError(cmds []*redis.SliceCmd) bool {
	for _, c := range cmds {
		if err := c.Err(); err != nil && !isRedisError(err) {
			return false
		}
	}
	return true
}

// clusterRevoke is Revoke in cluster mode: read the token's username (its
// slot), remove the index entry and its companion (the user's slot),
// publish, then delete the token key. The session is dead once the entry
// is gone (Lookup confirms the index); a token key left if the DEL fails
// is an orphan, dead to Lookup, which deletes it. The entry goes first so
// that "listed, but no token key" only ever means a token write that
// failed, which a second Import may finish (clusterImportScript), never a
// token revoked.
func (s *Store) clusterRevoke(ctx context.Context, d tokens.Digest) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	dhex := hex.EncodeToString(d[:])
	tkey := s.keys.key("t", dhex)
	u, err := s.cc.HGet(ctx, tkey, "u").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return unavailable("revoke", err)
	}
	found := err == nil
	if found && checkClusterUser(u) == nil {
		_, err := s.cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.ZRem(ctx, s.keys.index(u), dhex)
			p.HDel(ctx, s.keys.companion(u), dhex)
			return nil
		})
		if err != nil {
			return unavailable("revoke", err)
		}
	}
	// Published found or not: an instance may have cached a session whose
	// key Redis has since dropped on its own.
	if err := s.cc.Publish(ctx, s.channel.(string), "t:"+dhex).Err(); err != nil {
		return unavailable("revoke", err)
	}
	if found {
		if err := s.cc.Del(ctx, tkey).Err(); err != nil {
			return unavailable("revoke", err)
		}
	}
	return nil
}

// clusterRevokeUserScript is revokeUserScript's user-slot half: it deletes
// the index, its companion and the challenges, publishes the username,
// and returns the digests the index listed.
//
// KEYS[1] index, KEYS[2] challenges, KEYS[3] companion. ARGV[1]
// invalidation channel, ARGV[2] username.
var clusterRevokeUserScript = redis.NewScript(`
local all = redis.call('ZRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('PUBLISH', ARGV[1], 'u:' .. ARGV[2])
return all
`)

// clusterRevokeUser is RevokeUser in cluster mode: the script empties the
// user's index (from then on every session of theirs is dead to Lookup,
// and the publish tells the caches), then the token keys go, counted as
// the standalone script counts them (those that still existed). A
// session issued in between whose index entry came after the script
// lives: it was issued after the logoutall.
func (s *Store) clusterRevokeUser(ctx context.Context, username string) (int, error) {
	if err := checkClusterUser(username); err != nil {
		return 0, fmt.Errorf("redis revoke user: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	all, err := clusterRevokeUserScript.Run(ctx, s.cc,
		[]string{s.keys.index(username), s.keys.challenges(username), s.keys.companion(username)},
		s.channel, username).Slice()
	s.cache.forgetUser(username) // refused here at once, whatever the reply
	if err != nil {
		return 0, unavailable("revoke user", err)
	}
	n, err := s.delTokens(ctx, all)
	if err != nil {
		return n, unavailable("revoke user", err)
	}
	return n, nil
}

// clusterSupersedeScript is supersedeScript's user-slot half: it judges
// each index entry by its score and its companion's stamp (what
// supersedeScript reads from the token key), removes the dead ones from
// index and companion, the challenges and the stamp as supersedeScript
// does, publishes the username, and returns the dead digests.
//
// KEYS[1] index, KEYS[2] stamp, KEYS[3] challenges, KEYS[4] TOTP counter,
// KEYS[5] companion, KEYS[6] cut-off.
// ARGV[1] cut-off (Unix ms), ARGV[2] stamp, ARGV[3] largest password
// stamp, ARGV[4] keep until (Unix ms; "" = ever), ARGV[5] invalidation
// channel, ARGV[6] username.
var clusterSupersedeScript = redis.NewScript(`
local ukey, skey, xkey, cutoff, stamp, maxstamp = KEYS[1], KEYS[2], KEYS[5], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local out = {}
local kept = tonumber(redis.call('GET', KEYS[6]))
if kept and cutoff < kept then
  return out
end
local all = redis.call('ZRANGE', ukey, 0, -1, 'WITHSCORES')
for j = 1, #all, 2 do
  local m = all[j]
  local dead = tonumber(all[j + 1]) < cutoff
  if not dead and stamp ~= '0' then
    local v = redis.call('HGET', xkey, m)
    local s = v and string.match(v, '^%d* (%d+) ')
    dead = s and s ~= stamp and tonumber(s) <= maxstamp
  end
  if dead then
    redis.call('ZREM', ukey, m)
    redis.call('HDEL', xkey, m)
    out[#out + 1] = m
  end
end
local pending = redis.call('HGETALL', KEYS[3])
for j = 1, #pending, 2 do
  local s, i = string.match(pending[j + 1], '^(%d+) (%-?%d+) ')
  local dead = not s or tonumber(i) < cutoff
  if not dead and stamp ~= '0' then
    dead = s ~= stamp and tonumber(s) <= maxstamp
  end
  if dead then
    redis.call('HDEL', KEYS[3], pending[j])
  end
end
if stamp == '0' then
  redis.call('DEL', skey, KEYS[4])
else
  redis.call('SET', skey, stamp)
end
redis.call('SET', KEYS[6], cutoff)
if ARGV[4] ~= '' then
  if stamp ~= '0' then
    redis.call('PEXPIREAT', skey, ARGV[4])
  end
  redis.call('PEXPIREAT', KEYS[6], ARGV[4])
end
redis.call('PUBLISH', ARGV[5], 'u:' .. ARGV[6])
return out
`)

// clusterSupersede is Supersede in cluster mode. Issue's stamp check and
// this script's stamp rule both run in the user's slot, so they are atomic
// with respect to each other as in standalone mode: a login either ran
// its script before (its entry is here, judged by its companion's stamp,
// and removed) or after (refused by the new stamp). Its token key, written
// after its script, may land after this call's DELs: then it is an orphan,
// dead to Lookup. Then the superseded token keys go, counted as
// supersedeScript counts them.
func (s *Store) clusterSupersede(ctx context.Context, sup tokens.Supersession) (int, error) {
	if err := checkClusterUser(sup.Username); err != nil {
		return 0, fmt.Errorf("redis supersede: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	cutoff := sup.Before.UnixMilli()
	if sup.Before.Sub(time.UnixMilli(cutoff)) > 0 {
		cutoff++ // a session issued in before's millisecond may be older than before
	}
	until := ""
	if !sup.Until.IsZero() {
		until = strconv.FormatInt(sup.Until.UnixMilli(), 10)
	}
	u := sup.Username
	keys := []string{s.keys.index(u), s.keys.stamp(u), s.keys.challenges(u), s.keys.counter(u), s.keys.companion(u), s.keys.cutoff(u)}
	dead, err := clusterSupersedeScript.Run(ctx, s.cc, keys, cutoff,
		strconv.FormatUint(sup.Stamp, 10), strconv.FormatUint(sup.MaxStamp, 10), until, s.channel, u).Slice()
	s.cache.forgetUser(u) // refused here at once, whatever the reply
	if err != nil {
		return 0, unavailable("supersede", err)
	}
	n, err := s.delTokens(ctx, dead)
	if err != nil {
		return n, unavailable("supersede", err)
	}
	return n, nil
}

// clusterRevokeIDScript is revokeIDScript's user-slot half: it finds the
// user's live entry whose companion holds the id, removes it from index
// and companion, publishes its digest and returns it (false: none).
//
// KEYS[1] index, KEYS[2] companion. ARGV[1] session id hex, ARGV[2]
// invalidation channel.
var clusterRevokeIDScript = redis.NewScript(clusterNowLua + `
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local v = redis.call('HGET', KEYS[2], m)
  local e, id = nil, nil
  if v then
    e, id = string.match(v, '^(%d*) %d+ (%x*)$')
  end
  if id == ARGV[1] and (e == '' or tonumber(e) > rnow) then
    redis.call('ZREM', KEYS[1], m)
    redis.call('HDEL', KEYS[2], m)
    redis.call('PUBLISH', ARGV[2], 't:' .. m)
    return m
  end
end
return false
`)

// clusterRevokeID is RevokeID in cluster mode: the script removes the
// entry (dead from then on), then its token key goes.
func (s *Store) clusterRevokeID(ctx context.Context, username string, id tokens.SessionID) (bool, error) {
	if err := checkClusterUser(username); err != nil {
		return false, fmt.Errorf("redis revoke session: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	m, err := clusterRevokeIDScript.Run(ctx, s.cc,
		[]string{s.keys.index(username), s.keys.companion(username)}, id.String(), s.channel).Text()
	s.cache.forgetUser(username)
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, unavailable("revoke session", err)
	}
	if _, err := s.delTokens(ctx, []any{m}); err != nil {
		return true, unavailable("revoke session", err)
	}
	return true, nil
}

// clusterList is List in cluster mode: the index, newest first, then the
// token keys it lists, in one pipeline, into listScript's rows.
func (s *Store) clusterList(ctx context.Context, username string, now time.Time) ([]tokens.ListedSession, error) {
	if err := checkClusterUser(username); err != nil {
		return nil, fmt.Errorf("redis list: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	all, err := s.cc.ZRevRangeWithScores(ctx, s.keys.index(username), 0, -1).Result()
	if err != nil {
		return nil, unavailable("list", err)
	}
	if len(all) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.SliceCmd, len(all))
	_, err = s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range all {
			h, _ := z.Member.(string)
			cmds[i] = p.HMGet(ctx, s.keys.key("t", h), "u", "s", "e", "l", "i", "a", "g")
		}
		return nil
	})
	if err != nil {
		return nil, unavailable("list", err)
	}
	out := make([]tokens.ListedSession, 0, len(all))
	for i, z := range all {
		f := cmds[i].Val()
		if len(f) != 7 || f[0] == nil {
			continue
		}
		row := append([]any{z.Member, strconv.FormatFloat(z.Score, 'f', -1, 64)}, f[1:]...)
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

// clusterImportScript is importScript's user-slot half. What importScript
// reads from the token key (its username and expiry) the caller reads
// first and passes in; the rest is judged here as there: a remembered
// digest is refreshed (companion, index expiry) while the index lists it
// and its expiry has not passed, else dead; a digest stored but not
// imported is dead; a stamp other than the current one is refused; else
// the entry, its companion and the imported mark are written. With
// ARGV[7] "1" it writes nothing.
//
// KEYS[1] index, KEYS[2] stamp, KEYS[3] imported set, KEYS[4] companion.
// ARGV[1] digest hex, ARGV[2] username, ARGV[3] stamp, ARGV[4] issued
// (Unix ms), ARGV[5] now (Unix ms), ARGV[6] expiry (Unix ms; "" = never),
// ARGV[7] dry run, ARGV[8] session id hex, ARGV[9] the token key's
// username ("" = no token key), ARGV[10] its expiry ("" = none).
// It returns a tokens.ImportOutcome.
var clusterImportScript = redis.NewScript(clusterNowLua + `
local ukey, xkey = KEYS[1], KEYS[4]
local digest, user, now, expiry, dry = ARGV[1], ARGV[2], tonumber(ARGV[5]), ARGV[6], ARGV[7] == '1'
local function extend(k)
  local pttl = redis.call('PTTL', k)
  if expiry == '' then
    redis.call('PERSIST', k)
  elseif pttl == -2 or (pttl >= 0 and now + pttl < tonumber(expiry)) then
    redis.call('PEXPIREAT', k, expiry)
  end
end
local function add(k, f)
  if redis.call('EXISTS', k) == 0 then
    f()
    if expiry ~= '' then
      redis.call('PEXPIREAT', k, expiry)
    end
  else
    extend(k)
    f()
  end
end
if redis.call('HEXISTS', KEYS[3], digest) == 1 then
  local listed = redis.call('ZSCORE', ukey, digest)
  if ARGV[9] == '' and listed then
    -- Imported and listed, but no token key: an import whose token write
    -- failed (every path that kills a session removes the entry first).
    -- Finish it, unless its entry has expired by Redis's clock.
    local v = redis.call('HGET', xkey, digest)
    local e = v and string.match(v, '^(%d*) ')
    if not e or (e ~= '' and tonumber(e) <= rnow) then
      return 3
    end
    if not dry then
      add(xkey, function() redis.call('HSET', xkey, digest, expiry .. ' ' .. ARGV[3] .. ' ' .. ARGV[8]) end)
      extend(ukey)
    end
    return 1
  end
  if ARGV[9] ~= user or not listed or (ARGV[10] ~= '' and tonumber(ARGV[10]) <= now) then
    return 3
  end
  if not dry then
    local v = redis.call('HGET', xkey, digest) or (' ' .. ARGV[3] .. ' ' .. ARGV[8])
    local rest = string.match(v, '^%d* (.*)$') or (ARGV[3] .. ' ' .. ARGV[8])
    add(xkey, function() redis.call('HSET', xkey, digest, expiry .. ' ' .. rest) end)
    extend(ukey)
  end
  return 2
end
if ARGV[9] ~= '' then
  return 3
end
local current = redis.call('GET', KEYS[2])
if current and current ~= ARGV[3] then
  return 4
end
if dry then
  return 1
end
add(xkey, function() redis.call('HSET', xkey, digest, expiry .. ' ' .. ARGV[3] .. ' ' .. ARGV[8]) end)
add(ukey, function() redis.call('ZADD', ukey, ARGV[4], digest) end)
redis.call('HSET', KEYS[3], digest, '1')
return 1
`)

// clusterRefreshScript sets an existing token key's expiry: never creates
// one, so a refresh racing a Revoke cannot leave a key without a user.
//
// KEYS[1] token key. ARGV[1] expiry (Unix ms; "" = never).
var clusterRefreshScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'e')
  redis.call('PERSIST', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'e', ARGV[1])
  redis.call('PEXPIREAT', KEYS[1], ARGV[1])
end
return 1
`)

// clusterImport is Import in cluster mode, per chunk three pipelines: the
// token keys read, the user-slot scripts, then the token keys written (or
// refreshed, and their digests published). The split's order is Issue's:
// the index entry first, so a RevokeUser or Supersede that comes between
// leaves the token key written after an orphan, dead to Lookup; and the
// imported mark is set with the entry, so importing again then reports it
// dead, never bringing it back. A failure part way may leave entries whose
// token key was not written: not found by Lookup, and importing again
// finds them marked and listed with no token key, which only a failed
// token write leaves (every path that kills a session removes the entry
// before the key), and writes the key: the second import finishes the job
// as the contract asks.
func (s *Store) clusterImport(ctx context.Context, batch []tokens.Imported, now time.Time, dryRun bool) ([]tokens.ImportOutcome, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	for _, im := range batch {
		if err := checkClusterUser(im.Session.Username); err != nil {
			return nil, fmt.Errorf("redis import: %w", err)
		}
	}
	if err := clusterImportScript.Load(ctx, s.cc).Err(); err != nil {
		return nil, unavailable("import", err)
	}
	if err := clusterRefreshScript.Load(ctx, s.cc).Err(); err != nil {
		return nil, unavailable("import", err)
	}
	dry := "0"
	if dryRun {
		dry = "1"
	}
	outcomes := make([]tokens.ImportOutcome, 0, len(batch))
	for chunk := range slices.Chunk(batch, importBatch) {
		out, err := s.clusterImportChunk(ctx, chunk, now, dry)
		for _, im := range chunk {
			s.cache.forget(im.Digest)
		}
		outcomes = append(outcomes, out...)
		if err != nil {
			return outcomes, unavailable("import", err)
		}
	}
	return outcomes, nil
}

func (s *Store) clusterImportChunk(ctx context.Context, chunk []tokens.Imported, now time.Time, dry string) ([]tokens.ImportOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	reads := make([]*redis.SliceCmd, len(chunk))
	if _, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, im := range chunk {
			reads[i] = p.HMGet(ctx, s.keys.token(im.Digest), "u", "e")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	expiries := make([]string, len(chunk))
	cmds, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, im := range chunk {
			sess, u := im.Session, im.Session.Username
			if !sess.ExpiresAt.IsZero() {
				expiries[i] = strconv.FormatInt(sess.ExpiresAt.UnixMilli(), 10)
			}
			f := reads[i].Val()
			tu, _ := f[0].(string)
			te, _ := f[1].(string)
			keys := []string{s.keys.index(u), s.keys.stamp(u), s.keys.imported(u), s.keys.companion(u)}
			clusterImportScript.EvalSha(ctx, p, keys, hex.EncodeToString(im.Digest[:]), u,
				strconv.FormatUint(sess.Stamp, 10), sess.IssuedAt.UnixMilli(), now.UnixMilli(),
				expiries[i], dry, sess.ID.String(), tu, te)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	outcomes := make([]tokens.ImportOutcome, 0, len(chunk))
	for _, c := range cmds {
		n, err := c.(*redis.Cmd).Int()
		if err != nil || n < 1 || n > 4 {
			return nil, fmt.Errorf("reply %v, %v", n, err)
		}
		outcomes = append(outcomes, tokens.ImportOutcome(n))
	}
	if dry == "1" {
		return outcomes, nil
	}
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	_, err = s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, im := range chunk {
			dhex := hex.EncodeToString(im.Digest[:])
			tkey := s.keys.key("t", dhex)
			switch outcomes[i] {
			case tokens.ImportAdded:
				sess := im.Session
				p.HSet(ctx, tkey, "u", sess.Username, "s", strconv.FormatUint(sess.Stamp, 10), "l", ms, "i", sess.ID.String(), "a", "", "g", "")
				if expiries[i] != "" {
					p.HSet(ctx, tkey, "e", expiries[i])
					p.PExpireAt(ctx, tkey, sess.ExpiresAt)
				}
			case tokens.ImportRefreshed:
				clusterRefreshScript.EvalSha(ctx, p, []string{tkey}, expiries[i])
				// Cached copies hold the old expiry.
				p.Publish(ctx, s.channel.(string), "t:"+dhex)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return outcomes, nil
}

// clusterTouch is touchScript in cluster mode: the same script, one key
// per call (keys of a batch lie in many slots), in one pipeline of
// EVALSHAs; if a node lost its script cache (a restart, SCRIPT FLUSH) the
// script is loaded on every primary and the batch sent again, which does
// no harm (the script never moves a use back).
func (s *Store) clusterTouch(ctx context.Context, keys []string, args []any) error {
	send := func() error {
		_, err := s.cc.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, key := range keys {
				touchScript.EvalSha(ctx, p, []string{key}, args[i])
			}
			return nil
		})
		return err
	}
	err := send()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := touchScript.Load(ctx, s.cc).Err(); err != nil {
			return err
		}
		err = send()
	}
	return err
}

// clusterPing is Ping in cluster mode: every primary must answer, since
// each holds some users' and some tokens' keys.
func (s *Store) clusterPing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	err := s.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		return c.Ping(ctx).Err()
	})
	if err != nil {
		if re := redis.Error(nil); errors.As(err, &re) {
			return fmt.Errorf("redis ping: %w: %w", tokens.ErrRefused, err)
		}
		return unavailable("ping", err)
	}
	return nil
}

// DialCluster returns a client of the Redis Cluster at rawURL
// (redis+cluster:// or rediss+cluster://, redisurl.ParseCluster), with
// the bounds Dial gives a single Redis, and go-redis's own log quieted as
// Dial quiets it. It does not connect: the first call does. Its errors
// never quote the URL's password.
func DialCluster(rawURL string) (*redis.ClusterClient, error) {
	opt, err := redisurl.ParseCluster(rawURL)
	if err != nil {
		return nil, err
	}
	redis.SetLogger(quietRedisLog{})
	return redis.NewClusterClient(opt), nil
}
