package redisthrottle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"authsvc/internal/throttle"

	"github.com/redis/go-redis/v9"
)

// Throttle key layout, under the store's prefix; usernames appear only as
// SHA-256 digests:
//
//	{prefix}th:p:{sha256(username \x00 addr) hex}  hash n last pending: a pair's streak
//	{prefix}th:u:{sha256(username) hex}            hash n last pending: a user's streak
//	{prefix}th:a:{addr}                            hash tokens last: an address's bucket
//
// n is the streak's failures, last the latest failure's time and pending the
// attempts reserved and not yet settled; tokens is the bucket's level at
// last. Times are Unix ms, as the caller passed them: the scripts never read
// Redis's clock. A streak expires throttleKeyMargin after its window ends
// (Window after its last failure), or, while attempts are pending, no sooner
// than Window plus the margin after its latest reservation or failure, so
// that the reservations of an instance that died vanish. A bucket expires
// throttleKeyMargin after it would be full again. Keys outliving their use
// by the margin covers clocks that differ a little between instances.
const throttleKeyMargin = time.Minute

// redisThrottleTimeout bounds each call, as the token store's calls are
// bounded, well inside API.md's 503-within-5-s.
const redisThrottleTimeout = 2 * time.Second

// Throttle is the Throttle kept in Redis, shared by every server
// pointed at the same Redis and prefix: the rules are throttle's (see
// package throttle), and N servers allow as many guesses as one, attempts sent at
// once included, since each call is one script that Redis runs alone.
//
// It differs from the memory throttle in three ways. Times count to the
// millisecond, rounded down, and the limits' durations to the millisecond,
// rounded up, so a wait may end up to a millisecond sooner or later than
// the memory throttle's (Retry-After is the same whole seconds but at such
// a boundary). Nothing bounds the number of
// keys but their expiry (MaxEntries is not used). And where the memory
// throttle cannot fail, a Redis that does not answer within
// redisThrottleTimeout makes a call fail with an error wrapping
// ErrUnavailable: the login fails closed.
type Throttle struct {
	client *redis.Client
	prefix string // prefix + "th:"
	cfg    throttle.Config
	limits []any // the scripts' ARGV after now, formatted once
}

var _ throttle.Throttle = (*Throttle)(nil)

// New returns a throttle with cfg's limits (unset ones at their
// defaults) keeping its counters in client's Redis under prefix + "th:".
func New(client *redis.Client, prefix string, cfg throttle.Config) *Throttle {
	cfg = cfg.WithDefaults()
	return &Throttle{
		client: client,
		prefix: prefix + "th:",
		cfg:    cfg,
		limits: []any{
			cfg.PairFailures,
			ceilMilli(cfg.Window),
			ceilMilli(cfg.BaseBackoff),
			ceilMilli(cfg.MaxBackoff),
			cfg.UserFailures,
			strconv.FormatFloat(cfg.AddrRate, 'g', -1, 64), // exactly: Lua reads it with strtod
			cfg.AddrBurst,
			ceilMilli(throttleKeyMargin),
		},
	}
}

// ceilMilli returns d in whole milliseconds, rounded up.
func ceilMilli(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// keys returns the pair's, the user's and the address's keys.
func (r *Throttle) keys(username, addr string) []string {
	pair := sha256.Sum256([]byte(username + "\x00" + addr)) // addr never holds a NUL
	user := sha256.Sum256([]byte(username))
	return []string{
		r.prefix + "p:" + hex.EncodeToString(pair[:]),
		r.prefix + "u:" + hex.EncodeToString(user[:]),
		r.prefix + "a:" + addr,
	}
}

// args returns the scripts' ARGV: now in Unix ms, then the limits.
func (r *Throttle) args(now time.Time) []any {
	return append([]any{now.UnixMilli()}, r.limits...)
}

// run runs script on keys and args within redisThrottleTimeout. The caller
// giving up does not cut it short: a call whose reply is lost may still
// have run, and a reservation or failure must not hang on when a client
// hangs up.
func (r *Throttle) run(ctx context.Context, op string, script *redis.Script, keys []string, args []any) (int64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), redisThrottleTimeout)
	defer cancel()
	n, err := script.Run(ctx, r.client, keys, args...).Int64()
	if err != nil {
		return 0, fmt.Errorf("redis throttle %s: %w: %w", op, throttle.ErrUnavailable, err)
	}
	return n, nil
}

// Reserve is throttle.reserve, in Redis.
func (r *Throttle) Reserve(ctx context.Context, username, addr string, now time.Time) (throttle.Verdict, time.Duration, error) {
	wait, err := r.run(ctx, "throttle reserve", throttleReserveScript, r.keys(username, addr), r.args(now))
	switch {
	case err != nil:
		return throttle.Refused, 0, err
	case wait == reserveWait:
		return throttle.Wait, 0, nil
	case wait > 0:
		return throttle.Refused, time.Duration(wait) * time.Second, nil
	}
	return throttle.Admitted, 0, nil
}

// reserveWait is what throttleReserveScript returns for throttle.Wait.
const reserveWait = -1

// Failure is throttle.failure, in Redis.
func (r *Throttle) Failure(ctx context.Context, username, addr string, now time.Time) error {
	_, err := r.run(ctx, "throttle failure", throttleFailureScript, r.keys(username, addr), r.args(now))
	return err
}

// Success is throttle.success, in Redis.
func (r *Throttle) Success(ctx context.Context, username, addr string, now time.Time) error {
	_, err := r.run(ctx, "throttle success", throttleSuccessScript, r.keys(username, addr)[:2], r.args(now))
	return err
}

// Release is throttle.release, in Redis.
func (r *Throttle) Release(ctx context.Context, username, addr string) error {
	_, err := r.run(ctx, "throttle release", throttleReleaseScript, r.keys(username, addr)[:2], r.limits)
	return err
}

// throttleLib is the scripts' common part: their arguments, and the memory
// throttle's helpers (liveStreak, addFailure, unreserve, backoff and the
// rate.Limiter's refill) over Redis hashes, the same arithmetic on the same
// doubles, so that the Redis throttle answers with the same Retry-After.
//
// KEYS[1] pair key, KEYS[2] user key, KEYS[3] address key (reserve and
// failure only). ARGV[1] now (Unix ms), then the limits: ARGV[2]
// PairFailures, ARGV[3] Window (ms), ARGV[4] BaseBackoff (ms), ARGV[5]
// MaxBackoff (ms), ARGV[6] UserFailures, ARGV[7] AddrRate (per second),
// ARGV[8] AddrBurst, ARGV[9] throttleKeyMargin (ms). release has no now:
// its ARGV are the limits alone.
const throttleLib = `
local function num(v) return tonumber(v) or 0 end
local function int(x) return string.format('%d', x) end

-- streak returns key's failures, last failure and pending attempts at now,
-- as liveStreak does: a streak a Window old is forgotten, deleted if
-- nothing is pending, else kept for its pending attempts alone.
local function streak(key, now, window)
  local f = redis.call('HMGET', key, 'n', 'last', 'pending')
  local n, last, pending = num(f[1]), num(f[2]), num(f[3])
  if n > 0 and now - last >= window then
    if pending == 0 then
      redis.call('DEL', key)
      return 0, 0, 0
    end
    n = 0
  end
  return n, last, pending
end

-- put stores a streak at now. It expires margin after its window ends and,
-- while attempts are pending, no sooner than window plus margin from now;
-- a streak with nothing left is deleted.
local function put(key, n, last, pending, now, window, margin)
  local ttl = 0
  if n > 0 then
    ttl = last + window + margin - now
  end
  if pending > 0 then
    ttl = math.max(ttl, window + margin)
  end
  if ttl <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'n', int(n), 'last', int(last), 'pending', int(pending))
  redis.call('PEXPIRE', key, int(ttl))
end

-- unreserve ends one of key's pending attempts, if it has one, as
-- unreserve does. Without now (release) the expiry stays as the latest
-- reservation or failure set it, which is no sooner than put would.
local function unreserve(key, now, window, margin)
  local f = redis.call('HMGET', key, 'n', 'last', 'pending')
  local n, last, pending = num(f[1]), num(f[2]), num(f[3])
  if pending == 0 then
    return
  end
  pending = pending - 1
  if n == 0 and pending == 0 then
    redis.call('DEL', key)
  elseif now then
    put(key, n, last, pending, now, window, margin)
  else
    redis.call('HSET', key, 'pending', int(pending))
  end
end

-- backoff is throttle.backoff, in ms.
local function backoff(n, pf, base, maxb)
  local d = math.min(base, maxb)
  for _ = pf, n - 1 do
    if d > maxb / 2 then
      return maxb
    end
    d = d * 2
  end
  return d
end

-- tokensAt is rate.Limiter's TokensAt for the bucket f (HMGET tokens last).
local function tokensAt(f, now, rate, burst)
  local tokens, last = tonumber(f[1]), tonumber(f[2])
  if now < last then
    last = now
  end
  local e = now - last
  tokens = tokens + (math.floor(e / 1000) + (e % 1000) * 1e6 / 1e9) * rate
  if tokens > burst then
    tokens = burst
  end
  return tokens
end
`

// throttleLimits reads the limits from ARGV, at offset o (1 with now, 0 without).
const throttleLimits = `
local pf, window, base, maxb = tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4])
local uf, rate, burst, margin = tonumber(ARGV[o + 5]), tonumber(ARGV[o + 6]), tonumber(ARGV[o + 7]), tonumber(ARGV[o + 8])
`

// throttleReserveScript is throttle.reserve: it returns 0 and reserves the
// attempt's place (Admitted), the Retry-After in whole seconds (Refused),
// or reserveWait (Wait: over a limit only by the attempts in flight).
var throttleReserveScript = redis.NewScript(throttleLib + `
local now, o = tonumber(ARGV[1]), 1
` + throttleLimits + `
-- The longest of the waits, in whole seconds (ceilSecond).
local wait = 0
local function waitFor(ms)
  if ms > 0 then
    wait = math.max(wait, math.ceil(ms / 1000))
  end
end
local inFlight = false -- over a limit only by the attempts in flight

local n, last, pending = streak(KEYS[1], now, window)
if n >= pf then
  local ms = last + backoff(n, pf, base, maxb) - now
  if ms > 0 then
    waitFor(ms)
  elseif pending > 0 then
    inFlight = true -- after the backoff, one attempt at a time
  end
elseif n + pending >= pf then
  inFlight = true
end

local un, ulast, upending = streak(KEYS[2], now, window)
if un >= uf then
  waitFor(ulast + window - now)
elseif un + upending >= uf then
  inFlight = true
end

local f = redis.call('HMGET', KEYS[3], 'tokens', 'last')
if f[1] then
  local tokens = tokensAt(f, now, rate, burst)
  if tokens < 1 then
    wait = math.max(wait, math.ceil(math.ceil((1 - tokens) / rate * 1e9) / 1e9))
  end
end

if wait > 0 then
  return wait
end
if inFlight then
  return ` + strconv.Itoa(reserveWait) + `
end
put(KEYS[1], n, last, pending + 1, now, window, margin)
put(KEYS[2], un, ulast, upending + 1, now, window, margin)
return 0
`)

// throttleFailureScript is throttle.failure: it extends the pair's and the
// user's streaks and takes a token from the address's bucket, which may go
// below zero.
var throttleFailureScript = redis.NewScript(throttleLib + `
local now, o = tonumber(ARGV[1]), 1
` + throttleLimits + `
for i = 1, 2 do
  local n, _, pending = streak(KEYS[i], now, window)
  put(KEYS[i], n + 1, now, math.max(0, pending - 1), now, window, margin)
end

local tokens = burst -- a new bucket is full
local f = redis.call('HMGET', KEYS[3], 'tokens', 'last')
if f[1] then
  tokens = tokensAt(f, now, rate, burst)
end
tokens = tokens - 1
redis.call('HSET', KEYS[3], 'tokens', string.format('%.17g', tokens), 'last', int(now))
redis.call('PEXPIRE', KEYS[3], int(math.ceil((burst - tokens) / rate * 1000) + margin))
return 0
`)

// throttleSuccessScript is throttle.success: it clears the pair's failures,
// keeping its other pending attempts, and ends one of the user's pending
// attempts.
var throttleSuccessScript = redis.NewScript(throttleLib + `
local now, o = tonumber(ARGV[1]), 1
` + throttleLimits + `
local pending = num(redis.call('HGET', KEYS[1], 'pending'))
if pending > 1 then
  put(KEYS[1], 0, 0, pending - 1, now, window, margin)
else
  redis.call('DEL', KEYS[1])
end
unreserve(KEYS[2], now, window, margin)
return 0
`)

// throttleReleaseScript is throttle.release: it ends one of the pair's and
// one of the user's pending attempts.
var throttleReleaseScript = redis.NewScript(throttleLib + `
local o = 0
` + throttleLimits + `
unreserve(KEYS[1], nil, window, margin)
unreserve(KEYS[2], nil, window, margin)
return 0
`)
