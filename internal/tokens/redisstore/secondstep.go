package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"authsvc/internal/tokens"

	"github.com/redis/go-redis/v9"
)

// putChallengeScript stores a challenge in its user's challenges hash,
// unless its stamp is not the user's current one (supersedeLua), drops
// the user's challenges expired at now, and makes the hash expire with its
// last challenge. At maxmemory under noeviction its first write, the HSET,
// is refused and nothing is written (see issueLua).
//
// KEYS[1] user challenges key, KEYS[2] user stamp key.
// ARGV[1] digest hex, ARGV[2] stamp, ARGV[3] now (Unix ms), ARGV[4] expiry
// (Unix ms), ARGV[5] attempts.
// It returns 0, or -1 for a superseded stamp.
var putChallengeScript = redis.NewScript(challengeLib + `
local ckey, now, latest = KEYS[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local current = redis.call('GET', KEYS[2])
if current and current ~= ARGV[2] then
  return -1
end
redis.call('HSET', ckey, ARGV[1], ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. ARGV[4] .. ' ' .. ARGV[5])
local all = redis.call('HGETALL', ckey)
for j = 1, #all, 2 do
  local _, _, e = parseChallenge(all[j + 1])
  if not e or e <= now then
    redis.call('HDEL', ckey, all[j])
  elseif e > latest then
    latest = e
  end
end
redis.call('PEXPIREAT', ckey, latest)
return 0
`)

// challengeLib is the challenge scripts' common part. parseChallenge
// returns a stored challenge's stamp, issue time and expiry (strings, as
// stored), its attempts left (a number) and whether it is claimed, or
// nothing for a value that does not parse. liveChallenge returns the
// challenge under field of the hash key as stored, then parsed; nothing
// when there is none, or when it is expired at now (and drops it); and an
// error reply alone for a value that does not parse.
const challengeLib = `
local function parseChallenge(v)
  local s, i, e, n, rest = string.match(v, '^(%d+) (%-?%d+) (%-?%d+) (%d+)(.*)$')
  if not s or (rest ~= '' and rest ~= ' c') then
    return nil
  end
  return s, i, tonumber(e), tonumber(n), rest == ' c'
end

local function liveChallenge(key, field, now)
  local v = redis.call('HGET', key, field)
  if not v then
    return nil
  end
  local s, i, e, n, claimed = parseChallenge(v)
  if not s then
    return redis.error_reply('corrupt challenge')
  end
  if e <= now then
    redis.call('HDEL', key, field)
    return nil
  end
  return v, s, i, e, n, claimed
end
`

// tryChallengeScript takes one attempt of a challenge: it returns the
// challenge's stamp, issue time, expiry and the attempts left after this
// one, or nil when it is expired at now (and drops it), claimed, or has
// none left. The attempt that leaves none keeps it, for that attempt's
// claim, until it expires or is spent. A value that does not parse is an
// error reply.
//
// KEYS[1] user challenges key. ARGV[1] digest hex, ARGV[2] now (Unix ms).
var tryChallengeScript = redis.NewScript(challengeLib + `
local v, s, i, e, n, claimed = liveChallenge(KEYS[1], ARGV[1], tonumber(ARGV[2]))
if type(v) == 'table' then
  return v
end
if not v or claimed or n < 1 then
  return false
end
n = n - 1
redis.call('HSET', KEYS[1], ARGV[1], s .. ' ' .. i .. ' ' .. e .. ' ' .. n)
return {s, i, tostring(e), n}
`)

// claimChallengeScript claims a challenge: it returns 1 and marks it
// claimed if it is there, not expired at now and not claimed; otherwise
// 0 (dropping it if expired). A value that does not parse is an error
// reply. Redis runs it alone: of parallel claims, one returns 1.
//
// KEYS[1] user challenges key. ARGV[1] digest hex, ARGV[2] now (Unix ms).
var claimChallengeScript = redis.NewScript(challengeLib + `
local v, _, _, _, _, claimed = liveChallenge(KEYS[1], ARGV[1], tonumber(ARGV[2]))
if type(v) == 'table' then
  return v
end
if not v or claimed then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], v .. ' c')
return 1
`)

// unclaimChallengeScript gives back a claim: a claimed challenge that is
// still there loses its mark; anything else is left as it is.
//
// KEYS[1] user challenges key. ARGV[1] digest hex.
var unclaimChallengeScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and string.sub(v, -2) == ' c' then
  redis.call('HSET', KEYS[1], ARGV[1], string.sub(v, 1, -3))
end
return 0
`)

// PutChallenge stores c in its user's challenges (putChallengeScript),
// atomically with the check of the user's current password stamp, and
// then the c: key that leads a TryChallenge of d to them. Should the second
// write fail, the challenge stays unreachable until it expires.
func (s *core) PutChallenge(ctx context.Context, d tokens.Digest, c tokens.Challenge, now time.Time) error {
	if c.ExpiresAt.IsZero() || c.Attempts < 1 {
		return tokens.ErrBadChallenge
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	expiry := c.ExpiresAt.UnixMilli()
	keys := []string{s.keys.challenges(c.Username), s.keys.stamp(c.Username)}
	n, err := putChallengeScript.Run(ctx, s.rdb, keys, hex.EncodeToString(d[:]),
		strconv.FormatUint(c.Stamp, 10), now.UnixMilli(), expiry, c.Attempts).Int()
	if err != nil {
		return unavailable("put challenge", err)
	}
	if n < 0 {
		return tokens.ErrSuperseded
	}
	if err := s.rdb.SetArgs(ctx, s.keys.challenge(d), c.Username, redis.SetArgs{ExpireAt: time.UnixMilli(expiry)}).Err(); err != nil {
		return unavailable("put challenge", err)
	}
	return nil
}

// TryChallenge reads whose challenge d is, then takes one of its attempts
// in that user's challenges (tryChallengeScript). Redis expires the c: key
// by its own clock and the script judges the expiry by now, so the earlier
// of the two wins.
func (s *core) TryChallenge(ctx context.Context, d tokens.Digest, now time.Time) (tokens.Challenge, error) {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	username, err := s.rdb.Get(ctx, s.keys.challenge(d)).Result()
	if errors.Is(err, redis.Nil) {
		return tokens.Challenge{}, tokens.ErrNotFound
	}
	if err != nil {
		return tokens.Challenge{}, unavailable("try challenge", err)
	}
	res, err := tryChallengeScript.Run(ctx, s.rdb, []string{s.keys.challenges(username)},
		hex.EncodeToString(d[:]), now.UnixMilli()).Slice()
	if errors.Is(err, redis.Nil) {
		return tokens.Challenge{}, tokens.ErrNotFound
	}
	if err != nil {
		return tokens.Challenge{}, unavailable("try challenge", err)
	}
	c, ok := parseChallenge(username, res)
	if !ok {
		return tokens.Challenge{}, unavailable("try challenge", errCorruptChallenge)
	}
	return c, nil
}

// challengeOwner returns the username d's c: key names, or "" when there
// is none (spent, expired or never put).
func (s *core) challengeOwner(ctx context.Context, op string, d tokens.Digest) (string, error) {
	username, err := s.rdb.Get(ctx, s.keys.challenge(d)).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", nil
	case err != nil:
		return "", unavailable(op, err)
	}
	return username, nil
}

// ClaimChallenge finds whose challenge d is, then claims it in that
// user's challenges (claimChallengeScript): one script in one slot, on a
// cluster too.
func (s *core) ClaimChallenge(ctx context.Context, d tokens.Digest, now time.Time) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	username, err := s.challengeOwner(ctx, "claim challenge", d)
	if err != nil || username == "" {
		return false, err
	}
	n, err := claimChallengeScript.Run(ctx, s.rdb, []string{s.keys.challenges(username)}, hex.EncodeToString(d[:]), now.UnixMilli()).Int()
	if err != nil {
		return false, unavailable("claim challenge", err)
	}
	return n == 1, nil
}

// UnclaimChallenge finds whose challenge d is, then takes its claim's mark
// off (unclaimChallengeScript).
func (s *core) UnclaimChallenge(ctx context.Context, d tokens.Digest) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	username, err := s.challengeOwner(ctx, "unclaim challenge", d)
	if err != nil || username == "" {
		return err
	}
	if err := unclaimChallengeScript.Run(ctx, s.rdb, []string{s.keys.challenges(username)}, hex.EncodeToString(d[:])).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return unavailable("unclaim challenge", err)
	}
	return nil
}

// errCorruptChallenge reports a stored challenge that does not parse.
var errCorruptChallenge = errors.New("corrupt challenge")

// parseChallenge decodes tryChallengeScript's reply.
func parseChallenge(username string, res []any) (tokens.Challenge, bool) {
	if len(res) != 4 {
		return tokens.Challenge{}, false
	}
	str := func(v any) string { s, _ := v.(string); return s }
	stamp, err1 := strconv.ParseUint(str(res[0]), 10, 64)
	issued, err2 := strconv.ParseInt(str(res[1]), 10, 64)
	expiry, err3 := strconv.ParseInt(str(res[2]), 10, 64)
	left, ok := res[3].(int64)
	if err1 != nil || err2 != nil || err3 != nil || !ok {
		return tokens.Challenge{}, false
	}
	return tokens.Challenge{
		Username:  username,
		Stamp:     stamp,
		IssuedAt:  time.UnixMilli(issued),
		ExpiresAt: time.UnixMilli(expiry).UTC(),
		Attempts:  int(left),
	}, true
}

// SpendChallenge drops d's challenge from its user's challenges, one HDEL,
// and then its c: key.
func (s *core) SpendChallenge(ctx context.Context, d tokens.Digest) error {
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	username, err := s.rdb.Get(ctx, s.keys.challenge(d)).Result()
	if errors.Is(err, redis.Nil) {
		return nil // spent, expired or never put: no key leads to it
	}
	if err != nil {
		return unavailable("spend challenge", err)
	}
	if err := s.rdb.HDel(ctx, s.keys.challenges(username), hex.EncodeToString(d[:])).Err(); err != nil {
		return unavailable("spend challenge", err)
	}
	if err := s.rdb.Del(ctx, s.keys.challenge(d)).Err(); err != nil {
		return unavailable("spend challenge", err)
	}
	return nil
}

// useCounterScript keeps a TOTP counter if it is above both the floor and
// the counter kept, unless that one's until has passed at now.
// Counters are compared as Lua numbers, exact within ±2^53.
//
// KEYS[1] user TOTP counter key. ARGV[1] counter, ARGV[2] floor,
// ARGV[3] now (Unix ms), ARGV[4] until (Unix ms; "" = for ever).
// It returns 1 if it kept the counter, 0 if not.
var useCounterScript = redis.NewScript(`
local counter, last = tonumber(ARGV[1]), tonumber(ARGV[2])
local v = redis.call('GET', KEYS[1])
if v then
  local c, u = string.match(v, '^(%-?%d+) ?(%d*)$')
  if not c then
    return redis.error_reply('corrupt TOTP counter')
  end
  if (u == '' or tonumber(u) > tonumber(ARGV[3])) and tonumber(c) > last then
    last = tonumber(c)
  end
end
if counter <= last then
  return 0
end
if ARGV[4] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[4], 'PXAT', ARGV[4])
end
return 1
`)

// maxExactCounter bounds the counters useCounterScript compares exactly.
const maxExactCounter = 1 << 53

// UseTOTPCounter compares and keeps the counter in one script
// (useCounterScript). Redis forgets it at until by its own clock and the
// script by now, so the earlier of the two wins.
func (s *core) UseTOTPCounter(ctx context.Context, username string, counter, floor int64, now, until time.Time) (bool, error) {
	if counter <= -maxExactCounter || counter >= maxExactCounter || floor <= -maxExactCounter || floor >= maxExactCounter {
		return false, fmt.Errorf("redis use TOTP counter: counter %d or floor %d beyond ±2^53", counter, floor)
	}
	ctx, cancel := context.WithTimeout(ctx, redisCallTimeout)
	defer cancel()
	keep := ""
	if !until.IsZero() {
		keep = strconv.FormatInt(until.UnixMilli(), 10)
	}
	n, err := useCounterScript.Run(ctx, s.rdb, []string{s.keys.counter(username)},
		counter, floor, now.UnixMilli(), keep).Int()
	if err != nil {
		return false, unavailable("use TOTP counter", err)
	}
	return n == 1, nil
}
