package redisstore

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"authsvc/internal/tokens"

	"github.com/redis/go-redis/v9"
)

// The user scripts: the scripts that work on one user's sessions (issue,
// supersede, revoke all, revoke by id, import). One Redis and a Cluster
// run the same scripts, each over its own layout (keys.go). Each script
// is an op's Lua (issueLua, …) after a layout's Lua (standaloneLua or
// clusterLua), which gives it the same few functions over the user's
// index, KEYS[1]:
//
//	sessionExpiry(m)  the expiry of m's session (Unix ms, '' for never)
//	                  while it lives, else nil
//	sessionStamp(m)   its password stamp (decimal), or nil
//	sessionID(m)      its session id hex while it lives, else nil
//	tokenFields(m, u, e)
//	                  its token key's username and expiry, nil where
//	                  there is none; u and e are what the caller read
//	                  ('' = none), for a layout whose scripts cannot
//	                  read token keys
//	storeSession(m, user, stamp, expiry, used, id, client, agent,
//	             enrolment)
//	                  writes what the layout's scripts keep of a new
//	                  session (enrolment "1" for Session.Enrolment);
//	                  at maxmemory under noeviction a script's first
//	                  write, this one, is refused and nothing is
//	                  written
//	refreshSession(m, expiry, stamp, id, channel)
//	                  sets a stored session's expiry
//	lostWrite(m, u, listed)
//	                  reports whether m is imported and listed but its
//	                  token key was never written (an import that failed
//	                  part way), and its entry lives
//	unlist(m)         takes m out of the index
//	drop(m)           deletes m's token key, or leaves it to the caller
//
// and indexKeys, the index and what expires with it, and dropped, what a
// script returns of the token keys drop met: how many it deleted, or the
// digests whose token keys the caller is to delete.
//
// A layout's own argument comes last: on one Redis the token key prefix,
// the last ARGV; on a Cluster the user's companion, the last of KEYS.

// standaloneLua is one Redis's layout: a session is its token key, which
// the scripts compute from the token key prefix (keyNamer.kindPrefix),
// read and delete themselves.
const standaloneLua = setExpiryLua + `
local ukey, tprefix = KEYS[1], ARGV[#ARGV]
local indexKeys = {ukey}
local dropped = 0
local function sessionExpiry(m)
  local f = redis.call('HMGET', tprefix .. m, 'u', 'e')
  if f[1] then
    return f[2] or ''
  end
end
local function sessionStamp(m)
  return redis.call('HGET', tprefix .. m, 's')
end
local function sessionID(m)
  return redis.call('HGET', tprefix .. m, 'i')
end
local function tokenFields(m)
  local f = redis.call('HMGET', tprefix .. m, 'u', 'e')
  return f[1] or nil, f[2] or nil
end
local function storeSession(m, user, stamp, expiry, used, id, client, agent, enrolment)
  local k = tprefix .. m
  local f = {'u', user, 's', stamp, 'l', used, 'i', id, 'a', client, 'g', agent}
  if enrolment == '1' then
    f[#f + 1], f[#f + 2] = 'n', '1'
  end
  redis.call('HSET', k, unpack(f))
  if enrolment ~= '1' then
    -- A digest issued again without the mark (confirming an
    -- authenticator) is a full session, even should its key have lived.
    redis.call('HDEL', k, 'n')
  end
  -- No stale expiry survives (a digest is not expected to come twice).
  setExpiry(k, expiry)
end
local function refreshSession(m, expiry, stamp, id, channel)
  setExpiry(tprefix .. m, expiry)
  redis.call('PUBLISH', channel, 't:' .. m) -- cached copies hold the old expiry
end
local function lostWrite()
  return false
end
local function unlist(m)
  redis.call('ZREM', ukey, m)
end
local function drop(m)
  dropped = dropped + redis.call('DEL', tprefix .. m)
end
`

// clusterLua is a Cluster's layout: what the scripts need of a session
// is in the user's companion, KEYS[#KEYS], "expiry stamp id", and the
// token key, in the digest's slot, is the caller's, written after the
// script and deleted after it (cluster.go says why in that order). A
// companion entry counts as live by Redis's clock (rnow), the clock by
// which Redis expires the token key, so exactly while that key would
// exist.
const clusterLua = `
local ukey, xkey = KEYS[1], KEYS[#KEYS]
local indexKeys = {ukey, xkey}
local dropped = {}
local t = redis.call('TIME')
local rnow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function sessionExpiry(m)
  local v = redis.call('HGET', xkey, m)
  local e = v and string.match(v, '^(%d*) ')
  if e and (e == '' or tonumber(e) > rnow) then
    return e
  end
end
local function sessionStamp(m)
  local v = redis.call('HGET', xkey, m)
  return v and string.match(v, '^%d* (%d+) ')
end
local function sessionID(m)
  local v = redis.call('HGET', xkey, m)
  local e, id = nil, nil
  if v then
    e, id = string.match(v, '^(%d*) %d+ (%x*)$')
  end
  if e == '' or (e and tonumber(e) > rnow) then
    return id
  end
end
local function tokenFields(m, u, e)
  if u == '' then u = nil end
  if e == '' then e = nil end
  return u, e
end
local function storeSession(m, user, stamp, expiry, used, id)
  redis.call('HSET', xkey, m, expiry .. ' ' .. stamp .. ' ' .. id)
end
local function refreshSession(m, expiry, stamp, id)
  local v = redis.call('HGET', xkey, m) or (' ' .. stamp .. ' ' .. id)
  local rest = string.match(v, '^%d* (.*)$') or (stamp .. ' ' .. id)
  redis.call('HSET', xkey, m, expiry .. ' ' .. rest)
end
-- Imported and listed, but no token key: an import whose token write
-- failed (every path that kills a session removes the entry first).
local function lostWrite(m, u, listed)
  return not u and listed and sessionExpiry(m) ~= nil
end
local function unlist(m)
  redis.call('ZREM', ukey, m)
  redis.call('HDEL', xkey, m)
end
local function drop(m)
  dropped[#dropped + 1] = m
end
`

// setExpiryLua's setExpiry gives token key k the expiry e (Unix ms; "" =
// never), in its e field and as the key's own.
const setExpiryLua = `
local function setExpiry(k, e)
  if e == '' then
    redis.call('HDEL', k, 'e')
    redis.call('PERSIST', k)
  else
    redis.call('HSET', k, 'e', e)
    redis.call('PEXPIREAT', k, e)
  end
end
`

// issueLua stores a session and indexes it under its user, then drops
// index entries whose session expired, evicts the oldest sessions beyond
// the limit, and makes the index expire with its last session.
// It costs O(user's sessions), which the limit bounds. A Redis at its
// maxmemory under noeviction refuses it whole (an OOM error), so Issue never
// reports a session stored that is not. A session whose stamp is not the
// user's current one (supersedeLua) is refused before anything is
// written.
//
// KEYS[1] user index key, KEYS[2] user stamp key.
// ARGV[1] digest hex, ARGV[2] username, ARGV[3] stamp, ARGV[4] limit (0 = none),
// ARGV[5] now (Unix ms), ARGV[6] expiry (Unix ms; "" = never),
// ARGV[7] session id hex, ARGV[8] client, ARGV[9] user agent,
// ARGV[10] invalidation channel (each evicted digest is published there),
// ARGV[11] enrolment ("1" for an enrolment-only session, else "").
// It returns {-1} for a superseded stamp, else {evicted, dropped}.
const issueLua = `
local digest, stamp, limit, now = ARGV[1], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
-- Stamps are compared as the decimal strings both sides write: equality only.
local current = redis.call('GET', KEYS[2])
if current and current ~= stamp then
  return {-1}
end
-- At maxmemory Redis refuses a script's first write if that write is one
-- that can grow memory, and lets every later write through. So the first
-- write is the session's: at the limit the script stops here, having
-- written nothing, instead of storing the session past the limit.
storeSession(digest, ARGV[2], stamp, ARGV[6], ARGV[5], ARGV[7], ARGV[8], ARGV[9], ARGV[11])

-- Issue time, bumped past the newest entry so the order is total.
local score = now
local newest = redis.call('ZRANGE', ukey, -1, -1, 'WITHSCORES')
if newest[2] and tonumber(newest[2]) >= score then
  score = tonumber(newest[2]) + 1
end
redis.call('ZADD', ukey, score, digest)

-- Live entries, oldest first; entries whose session expired go.
local live = {}
for _, m in ipairs(redis.call('ZRANGE', ukey, 0, -1)) do
  local e = sessionExpiry(m)
  if e then
    live[#live + 1] = {m, e}
  else
    unlist(m)
  end
end

local evict = 0
if limit > 0 and #live > limit then
  evict = #live - limit
end
local last, never = 0, false
for i, x in ipairs(live) do
  if i <= evict then
    unlist(x[1])
    drop(x[1])
    redis.call('PUBLISH', ARGV[10], 't:' .. x[1])
  elseif x[2] == '' then
    never = true
  elseif tonumber(x[2]) > last then
    last = tonumber(x[2])
  end
end
for _, k in ipairs(indexKeys) do
  if never then
    redis.call('PERSIST', k)
  elseif last > 0 then
    redis.call('PEXPIREAT', k, last)
  end
end
return {evict, dropped}
`

// supersedeLua deletes a user's sessions whose index score (issue time,
// Unix ms) is below ARGV[1] or, unless ARGV[2] is "0", whose stamp is at
// most ARGV[3] and is not ARGV[2]; then keeps ARGV[2] as the user's
// current stamp until ARGV[4] (or forgets it for "0"). It returns
// dropped. (At maxmemory under noeviction Redis refuses a script whose
// first write may grow memory: the SET of the stamp when there is nothing
// to delete, and the call fails as unavailable.) One script, as
// issueLua's check is, so a login racing it is either deleted here or
// refused there. The user's challenges go by the same rule, judged by the
// issue time and stamp their value holds, uncounted, and a challenge
// racing it is deleted here or refused by putChallengeScript.
//
// A Supersede whose cut-off is earlier than the one KEYS[5] keeps is stale
// and changes nothing (tokens.Store's contract); any other keeps its
// cut-off there as long as its stamp.
//
// A stamp of "0" (a deleted user) also forgets the user's TOTP counter.
// It publishes the username whether or not it deleted a session, so that
// every instance drops the user's cached sessions (it may have kept one
// whose index entry Redis evicted: the cheap way is the safe way).
//
// KEYS[1] user index key, KEYS[2] user stamp key, KEYS[3] user challenges
// key, KEYS[4] user TOTP counter key, KEYS[5] user cut-off key.
// ARGV[1] cut-off (Unix ms), ARGV[2] stamp, ARGV[3] largest password
// stamp, ARGV[4] keep until (Unix ms; "" = ever), ARGV[5] invalidation
// channel, ARGV[6] username.
const supersedeLua = `
local skey, cutoff, stamp, maxstamp = KEYS[2], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local kept = tonumber(redis.call('GET', KEYS[5]))
if kept and cutoff < kept then
  return dropped
end
local all = redis.call('ZRANGE', ukey, 0, -1, 'WITHSCORES')
for j = 1, #all, 2 do
  local m = all[j]
  local dead = tonumber(all[j + 1]) < cutoff
  if not dead and stamp ~= '0' then
    local s = sessionStamp(m)
    dead = s and s ~= stamp and tonumber(s) <= maxstamp
  end
  if dead then
    unlist(m)
    drop(m)
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
redis.call('SET', KEYS[5], cutoff)
if ARGV[4] ~= '' then
  if stamp ~= '0' then
    redis.call('PEXPIREAT', skey, ARGV[4])
  end
  redis.call('PEXPIREAT', KEYS[5], ARGV[4])
end
redis.call('PUBLISH', ARGV[5], 'u:' .. ARGV[6])
return dropped
`

// revokeUserLua drops a user's sessions and deletes the index and
// challenges; their c: keys lead nowhere since, and expire. Sessions
// missing from the index (evicted with it) stay stored, but Lookup
// refuses them. It returns dropped.
//
// It publishes the username: every instance drops the user's cached
// sessions.
//
// KEYS[1] user index key, KEYS[2] user challenges key. ARGV[1]
// invalidation channel, ARGV[2] username.
const revokeUserLua = `
for _, m in ipairs(redis.call('ZRANGE', ukey, 0, -1)) do
  drop(m)
end
redis.call('DEL', KEYS[2], unpack(indexKeys))
redis.call('PUBLISH', ARGV[1], 'u:' .. ARGV[2])
return dropped
`

// revokeIDLua drops the live session of a user whose id is ARGV[1],
// publishes its digest, and returns dropped: nothing met if there was
// none.
//
// KEYS[1] user index key. ARGV[1] session id hex, ARGV[2] invalidation
// channel.
const revokeIDLua = `
for _, m in ipairs(redis.call('ZRANGE', ukey, 0, -1)) do
  if sessionID(m) == ARGV[1] then
    unlist(m)
    drop(m)
    redis.call('PUBLISH', ARGV[2], 't:' .. m)
    break
  end
end
return dropped
`

// importLua stores one imported session (tokens.Store's Import): a
// digest the user's imported set holds is refreshed while its session is
// live and left dead otherwise (but an import lostWrite finds is
// finished); a digest stored but not imported is left alone; a stamp
// other than the user's current one is refused; anything else is stored
// as issueLua stores a session, with its issue time as given, no limit,
// and the digest added to the imported set. With ARGV[8] "1" it writes
// nothing and returns what it would have done. The index keys expire with
// the user's last session: never, if one never does.
//
// KEYS[1] user index key, KEYS[2] user stamp key, KEYS[3] user imported
// set key.
// ARGV[1] digest hex, ARGV[2] username, ARGV[3] stamp, ARGV[4] issued
// (Unix ms), ARGV[5] now (Unix ms), ARGV[6] expiry (Unix ms; "" = never),
// ARGV[7] session id hex, ARGV[8] dry run ("1" or "0"), ARGV[9]
// invalidation channel, ARGV[10] and ARGV[11] the token key's username
// and expiry as the caller read them (tokenFields).
// It returns a tokens.ImportOutcome: 1 added, 2 refreshed, 3 dead,
// 4 superseded.
const importLua = `
local digest, user, stamp, now, expiry, id = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[5]), ARGV[6], ARGV[7]
local dry = ARGV[8] == '1'
local function extend(k)
  local pttl = redis.call('PTTL', k)
  if expiry == '' then
    redis.call('PERSIST', k)
  elseif pttl == -2 or (pttl >= 0 and now + pttl < tonumber(expiry)) then
    redis.call('PEXPIREAT', k, expiry)
  end
end
-- write runs the writes f, then gives each index key that f made the
-- session's expiry, and extends any other.
local function write(f)
  local fresh = {}
  for i, k in ipairs(indexKeys) do
    fresh[i] = redis.call('EXISTS', k) == 0
  end
  f()
  for i, k in ipairs(indexKeys) do
    if not fresh[i] then
      extend(k)
    elseif expiry ~= '' then
      redis.call('PEXPIREAT', k, expiry)
    end
  end
end
-- An imported session is a full one, as the memory store keeps it.
local function store()
  storeSession(digest, user, stamp, expiry, ARGV[5], id, '', '', '')
end
local tu, te = tokenFields(digest, ARGV[10], ARGV[11])
if redis.call('HEXISTS', KEYS[3], digest) == 1 then
  local listed = redis.call('ZSCORE', ukey, digest)
  if lostWrite(digest, tu, listed) then
    if not dry then
      write(store)
    end
    return 1
  end
  if tu ~= user or not listed or (te and tonumber(te) <= now) then
    return 3
  end
  if not dry then
    write(function() refreshSession(digest, expiry, stamp, id, ARGV[9]) end)
  end
  return 2
end
if tu then
  return 3
end
local current = redis.call('GET', KEYS[2])
if current and current ~= stamp then
  return 4
end
if dry then
  return 1
end
-- The first write may grow memory, so at maxmemory under noeviction the
-- script stops here having written nothing (see issueLua).
write(function()
  store()
  redis.call('ZADD', ukey, ARGV[4], digest)
end)
redis.call('HSET', KEYS[3], digest, '1')
return 1
`

// userScripts are the user scripts over one layout.
type userScripts struct {
	issue, supersede, revokeUser, revokeID, importOne *redis.Script
}

func newUserScripts(layout string) userScripts {
	return userScripts{
		issue:      redis.NewScript(layout + issueLua),
		supersede:  redis.NewScript(layout + supersedeLua),
		revokeUser: redis.NewScript(layout + revokeUserLua),
		revokeID:   redis.NewScript(layout + revokeIDLua),
		importOne:  redis.NewScript(layout + importLua),
	}
}

// The user scripts of one Redis and of a Cluster. Never written after.
var (
	standaloneScripts = newUserScripts(standaloneLua)
	clusterScripts    = newUserScripts(clusterLua)
)

// unixMsOrNever is t in Unix ms, in decimal, or "" for the zero time: an
// expiry as the scripts take it.
func unixMsOrNever(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// issueArgs are issueLua's keys and arguments, the layout's own not
// included.
func (s *core) issueArgs(d tokens.Digest, sess tokens.Session, limit int, now time.Time) ([]string, []any) {
	u := sess.Username
	return []string{s.keys.index(u), s.keys.stamp(u)}, []any{
		hex.EncodeToString(d[:]), u, strconv.FormatUint(sess.Stamp, 10), max(limit, 0),
		now.UnixMilli(), unixMsOrNever(sess.ExpiresAt), sess.ID.String(), sess.Client, sess.UserAgent, s.channel,
		enrolmentArg(sess.Enrolment)}
}

// enrolmentArg is Session.Enrolment as the scripts take it and the token
// key keeps it (its n field): "1", or "" for a full session.
func enrolmentArg(enrolment bool) string {
	if enrolment {
		return "1"
	}
	return ""
}

// issued reads issueLua's reply, or its failure: how many sessions the
// limit evicted and what it dropped of them, or ErrSuperseded. When any
// was evicted the user's cached sessions go: refused here at once,
// without waiting for the published digests, the user's others are read
// again.
func (s *core) issued(username string, res []any, err error) (int, any, error) {
	if err != nil {
		return 0, nil, unavailable("issue", err)
	}
	n, ok := int64(0), len(res) > 0
	if ok {
		n, ok = res[0].(int64)
	}
	switch {
	case !ok || (n >= 0 && len(res) != 2):
		return 0, nil, unavailable("issue", fmt.Errorf("reply %v", res))
	case n < 0:
		return 0, nil, tokens.ErrSuperseded
	case n > 0:
		s.cache.forgetUser(username)
	}
	return int(n), res[1], nil
}

// supersedeArgs are supersedeLua's keys and arguments, the layout's own
// not included. Issue times are kept to the millisecond, rounded down, so
// the cut-off is sup.Before rounded up.
func (s *core) supersedeArgs(sup tokens.Supersession) ([]string, []any) {
	cutoff := sup.Before.UnixMilli()
	if sup.Before.Sub(time.UnixMilli(cutoff)) > 0 {
		cutoff++ // a session issued in before's millisecond may be older than before
	}
	u := sup.Username
	return []string{s.keys.index(u), s.keys.stamp(u), s.keys.challenges(u), s.keys.counter(u), s.keys.cutoff(u)}, []any{
		cutoff, strconv.FormatUint(sup.Stamp, 10), strconv.FormatUint(sup.MaxStamp, 10), unixMsOrNever(sup.Until), s.channel, u}
}

// revokeUserArgs are revokeUserLua's keys and arguments, the layout's own
// not included.
func (s *core) revokeUserArgs(username string) ([]string, []any) {
	return []string{s.keys.index(username), s.keys.challenges(username)}, []any{s.channel, username}
}

// revokeIDArgs are revokeIDLua's keys and arguments, the layout's own not
// included.
func (s *core) revokeIDArgs(username string, id tokens.SessionID) ([]string, []any) {
	return []string{s.keys.index(username)}, []any{id.String(), s.channel}
}

// importArgs are importLua's keys and arguments for im, the layout's own
// not included; tu and te are the token key's username and expiry as the
// caller read them ("" for none, and for one Redis, whose script reads
// them itself).
func (s *core) importArgs(im tokens.Imported, now time.Time, dryRun bool, tu, te string) ([]string, []any) {
	sess, u := im.Session, im.Session.Username
	dry := "0"
	if dryRun {
		dry = "1"
	}
	return []string{s.keys.index(u), s.keys.stamp(u), s.keys.imported(u)}, []any{
		hex.EncodeToString(im.Digest[:]), u, strconv.FormatUint(sess.Stamp, 10), sess.IssuedAt.UnixMilli(),
		now.UnixMilli(), unixMsOrNever(sess.ExpiresAt), sess.ID.String(), dry, s.channel, tu, te}
}

// importOutcomes reads the replies of a pipeline of importLua calls, up to
// the first that is not an outcome.
func importOutcomes(cmds []redis.Cmder) ([]tokens.ImportOutcome, error) {
	outcomes := make([]tokens.ImportOutcome, 0, len(cmds))
	for _, c := range cmds {
		n, err := c.(*redis.Cmd).Int()
		if err != nil || n < 1 || n > 4 {
			return outcomes, fmt.Errorf("reply %v, %v", n, err)
		}
		outcomes = append(outcomes, tokens.ImportOutcome(n))
	}
	return outcomes, nil
}
