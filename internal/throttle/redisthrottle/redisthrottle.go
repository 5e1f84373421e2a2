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
// SHA-256 digests, written U for sha256(username) and P for
// sha256(username \x00 addr), in hex:
//
//	<prefix>th:{U}:p:P   hash n last pending: a pair's streak
//	<prefix>th:{U}:u     hash n last pending: a user's streak
//	<prefix>th:a:<addr>  hash tokens last: an address's bucket
//	<prefix>th:{U}:m     hash n last: the user's code lock (ReserveCode);
//	                     no expiry, since no window lifts it: a right code
//	                     deletes it, an unlock makes it count for nothing
//	                     and the next code starts it again
//
// The braces are literal: {U} is a Redis Cluster hash tag, so that a pair's
// and its user's streaks are in one slot (the user's), and one script can
// update both atomically on a cluster too. An address's bucket counts over
// all usernames, so no tag can put it in every user's slot: on a cluster it
// has its own script (see Throttle). A prefix holding a brace would take
// the tag's place: "{a}" puts every key in one slot, which works but
// spreads nothing; "{}" or a lone "{" hashes whole keys, and the pair's and
// the user's keys part (CROSSSLOT). Braces in the prefix are for a cluster
// to refuse, not this package.
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
// once included, since each call's pair and user counts are updated by one
// script that Redis runs alone.
//
// On one Redis (a *redis.Client) each call is one script over all its
// keys. On a Redis Cluster (any other client, such as *redis.ClusterClient)
// Reserve and Failure are two scripts each, one in the user's slot and one
// in the address's, because no script may touch keys of two slots. The
// per-(user, client) and per-user limits stay atomic, in the user's slot;
// only the per-client bucket, which counts failures as they complete, is
// read and charged apart from them: see Reserve and Failure for why that
// keeps the contract.
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
	client redis.Scripter
	split  bool   // the user's and the address's keys may be in different slots: two scripts
	prefix string // prefix + "th:"
	cfg    throttle.Config
	limits []any // the scripts' ARGV after now, formatted once
}

var _ throttle.Throttle = (*Throttle)(nil)

// New returns a throttle with cfg's limits (unset ones at their
// defaults) keeping its counters in client's Redis under prefix + "th:".
// client is a *redis.Client for one Redis (a Sentinel-managed one
// included), or a *redis.ClusterClient for a Redis Cluster; any client but a
// *redis.Client gets the cluster's two scripts per call, which are right on
// one Redis too.
func New(client redis.Scripter, prefix string, cfg throttle.Config) *Throttle {
	cfg = cfg.WithDefaults()
	_, single := client.(*redis.Client)
	return &Throttle{
		client: client,
		split:  !single,
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

// keys returns the pair's and the user's keys, which share the user's
// slot, and the address's key.
func (r *Throttle) keys(username, addr string) (pairUser []string, addrKey string) {
	pair := sha256.Sum256([]byte(username + "\x00" + addr)) // addr never holds a NUL
	user := sha256.Sum256([]byte(username))
	tagged := r.prefix + "{" + hex.EncodeToString(user[:]) + "}:"
	return []string{tagged + "p:" + hex.EncodeToString(pair[:]), tagged + "u"}, r.prefix + "a:" + addr
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
	pairUser, addrKey := r.keys(username, addr)
	args := r.args(now)
	var wait int64
	var err error
	if !r.split {
		wait, err = r.run(ctx, "throttle reserve", throttleReserveScript, append(pairUser, addrKey), args)
	} else {
		// Two slots, two scripts: the address's bucket is read first, and
		// its wait goes into the user's script, which decides and
		// reserves. The pair's and the user's limits are checked and their
		// places taken in that one script, so they hold for parallel
		// attempts as on one Redis: no check-then-act race. The bucket is
		// read a round trip before the decision, and a failure completing
		// in between is not seen; but the bucket does not count attempts in
		// flight at all (attempts admitted while it still had a token all
		// go ahead, and their failures all count, below zero if need be),
		// so an attempt admitted on a bucket read a moment ago is one that
		// the memory throttle admits when it arrives a moment sooner. Its
		// failure is charged as any other, and the next attempt after it
		// is refused. Reading the bucket first, rather than reserving first
		// and giving the place back when the bucket refuses, means an
		// attempt refused by its client's bucket never holds a place that
		// another attempt would be told to Wait for, and the Retry-After is
		// still the longest of the three waits.
		var addrWait int64
		addrWait, err = r.run(ctx, "throttle reserve", throttleAddrWaitScript, []string{addrKey}, args)
		if err == nil {
			wait, err = r.run(ctx, "throttle reserve", throttleReserveUserScript, pairUser, append(args, addrWait))
		}
	}
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

// Explain is throttle's Explain, in Redis: read-only scripts over the
// keys Reserve's use, with its arithmetic (throttleLib), which write
// nothing, not even an expired streak's deletion. On one Redis it is one
// script; on a cluster the address's bucket is read apart
// (throttleAddrWaitScript, as Reserve reads it), and the pair's and the
// user's streaks in the user's slot.
func (r *Throttle) Explain(ctx context.Context, username, addr string, now time.Time) (throttle.Limits, error) {
	pairUser, addrKey := r.keys(username, addr)
	args := r.args(now)
	if !r.split {
		l, err := r.run(ctx, "throttle explain", throttleExplainScript, append(pairUser, addrKey), args)
		return throttle.Limits(l), err
	}
	addrWait, err := r.run(ctx, "throttle explain", throttleAddrWaitScript, []string{addrKey}, args)
	if err != nil {
		return 0, err
	}
	l, err := r.run(ctx, "throttle explain", throttleExplainUserScript, pairUser, args)
	if err != nil {
		return 0, err
	}
	if addrWait > 0 {
		l |= int64(throttle.LimitClient)
	}
	return throttle.Limits(l), nil
}

// reserveWait is what throttleReserveScript returns for throttle.Wait.
const reserveWait = -1

// Failure is throttle.failure, in Redis.
func (r *Throttle) Failure(ctx context.Context, username, addr string, now time.Time) error {
	pairUser, addrKey := r.keys(username, addr)
	args := r.args(now)
	if !r.split {
		_, err := r.run(ctx, "throttle failure", throttleFailureScript, append(pairUser, addrKey), args)
		return err
	}
	// Two slots, two scripts: the user's first, then the address's. The
	// user's script turns the attempt's place into a failure of the pair
	// and of the user in one step, so a parallel Reserve sees the attempt
	// either in flight or failed, never neither: those limits hold as on
	// one Redis. The bucket is charged a round trip later, which is what it
	// would see if the password check had taken a round trip longer: the
	// per-client limit counts failures as they complete, and this one
	// completes, for the bucket, when its script runs. The login replies
	// only once Failure returns, so a client that waits for its 401 before
	// trying again always finds its failure in the bucket. If the second
	// script fails (its node is down), Failure fails (503) and the bucket
	// misses that one failure; the pair and the user keep it.
	if _, err := r.run(ctx, "throttle failure", throttleFailureUserScript, pairUser, args); err != nil {
		return err
	}
	_, err := r.run(ctx, "throttle failure", throttleFailureAddrScript, []string{addrKey}, args)
	return err
}

// Success is throttle.success, in Redis: the pair's and the user's keys
// only, one slot.
func (r *Throttle) Success(ctx context.Context, username, addr string, now time.Time) error {
	pairUser, _ := r.keys(username, addr)
	_, err := r.run(ctx, "throttle success", throttleSuccessScript, pairUser, r.args(now))
	return err
}

// codeKey returns the user's code lock key, in the user's slot.
func (r *Throttle) codeKey(username string) string {
	user := sha256.Sum256([]byte(username))
	return r.prefix + "{" + hex.EncodeToString(user[:]) + "}:m"
}

// ReserveCode is the memory throttle's, in one script on the user's key
// (reserveCodeScript), which Redis runs alone: of codes sent at once to
// any instances, at most MaxCodeFailures are admitted.
func (r *Throttle) ReserveCode(ctx context.Context, username string, after, now time.Time) (throttle.Verdict, int, error) {
	n, err := r.run(ctx, "throttle reserve code", reserveCodeScript, []string{r.codeKey(username)},
		[]any{now.UnixMilli(), after.UnixMilli(), throttle.MaxCodeFailures})
	switch {
	case err != nil:
		return throttle.Refused, 0, err
	case n < 0:
		return throttle.Refused, int(-n), nil
	}
	return throttle.Admitted, int(n), nil
}

// CodeSuccess deletes the user's code lock key.
func (r *Throttle) CodeSuccess(ctx context.Context, username string) error {
	_, err := r.run(ctx, "throttle code success", codeSuccessScript, []string{r.codeKey(username)}, nil)
	return err
}

// ReleaseCode takes back one code from the user's count (releaseCodeScript).
func (r *Throttle) ReleaseCode(ctx context.Context, username string) error {
	_, err := r.run(ctx, "throttle release code", releaseCodeScript, []string{r.codeKey(username)}, nil)
	return err
}

// CodeLocked is the memory throttle's, in one script on the user's key
// (codeLockedScript), which changes nothing.
func (r *Throttle) CodeLocked(ctx context.Context, username string, after time.Time) (bool, error) {
	n, err := r.run(ctx, "throttle code locked", codeLockedScript, []string{r.codeKey(username)},
		[]any{after.UnixMilli(), throttle.MaxCodeFailures})
	return err == nil && n == 1, err
}

// codeLockedScript returns 1 when the count, judged as reserveCodeScript
// judges it, refuses codes, and 0 otherwise.
//
// KEYS[1] the code lock key. ARGV[1] the user's unlock (Unix ms), ARGV[2]
// MaxCodeFailures.
var codeLockedScript = redis.NewScript(`
local f = redis.call('HMGET', KEYS[1], 'n', 'last')
local n, last = tonumber(f[1]) or 0, tonumber(f[2])
if last and last > tonumber(ARGV[1]) and n >= tonumber(ARGV[2]) then
  return 1
end
return 0
`)

// reserveCodeScript counts a code as wrong: it returns the count with it,
// or minus the count (MaxCodeFailures) when the lock refuses it. A count
// whose last code came at or before the unlock starts again. Times are
// Unix ms, as the caller passed them.
//
// KEYS[1] the code lock key. ARGV[1] now, ARGV[2] the user's unlock,
// ARGV[3] MaxCodeFailures.
var reserveCodeScript = redis.NewScript(`
local f = redis.call('HMGET', KEYS[1], 'n', 'last')
local n, last = tonumber(f[1]) or 0, tonumber(f[2])
if not last or last <= tonumber(ARGV[2]) then
  n = 0
end
if n >= tonumber(ARGV[3]) then
  return -n
end
n = n + 1
redis.call('HSET', KEYS[1], 'n', string.format('%d', n), 'last', ARGV[1])
return n
`)

// codeSuccessScript deletes the code lock key: a script, as every call
// here, so that run's one path bounds it.
var codeSuccessScript = redis.NewScript(`
redis.call('DEL', KEYS[1])
return 0
`)

// releaseCodeScript takes one code back from the count, deleting the key
// when none is left.
var releaseCodeScript = redis.NewScript(`
local n = tonumber(redis.call('HGET', KEYS[1], 'n'))
if not n then
  return 0
end
if n <= 1 then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'n', string.format('%d', n - 1))
end
return 0
`)

// Release is throttle.release, in Redis: the pair's and the user's keys
// only, one slot.
func (r *Throttle) Release(ctx context.Context, username, addr string) error {
	pairUser, _ := r.keys(username, addr)
	_, err := r.run(ctx, "throttle release", throttleReleaseScript, pairUser, r.limits)
	return err
}

// throttleLib is the scripts' common part: their arguments, and the memory
// throttle's helpers (liveStreak, addFailure, unreserve, backoff and the
// rate.Limiter's refill) over Redis hashes, the same arithmetic on the same
// doubles, so that the Redis throttle answers with the same Retry-After.
//
// KEYS are the pair's and the user's keys, then the address's (for the
// scripts of one Redis that need it), or the address's alone (for the
// address's scripts on a cluster). ARGV[1] now (Unix ms), then the limits:
// ARGV[2] PairFailures, ARGV[3] Window (ms), ARGV[4] BaseBackoff (ms),
// ARGV[5] MaxBackoff (ms), ARGV[6] UserFailures, ARGV[7] AddrRate (per
// second), ARGV[8] AddrBurst, ARGV[9] throttleKeyMargin (ms). release has no
// now: its ARGV are the limits alone. The cluster's reserve for the user's
// slot has ARGV[10], the address's wait (whole seconds).
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

// throttleAddrWait sets wait to how long, in whole seconds, the bucket at
// akey refuses attempts at now: 0 while it holds a token.
const throttleAddrWait = `
local f = redis.call('HMGET', akey, 'tokens', 'last')
if f[1] then
  local tokens = tokensAt(f, now, rate, burst)
  if tokens < 1 then
    wait = math.max(wait, math.ceil(math.ceil((1 - tokens) / rate * 1e9) / 1e9))
  end
end
`

// throttleReserveUser is reserve's part in the user's slot: given wait,
// the address's, it returns the longest wait, or reserveWait, or reserves
// the attempt's place in the pair and the user and returns 0.
var throttleReserveUser = `
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

if wait > 0 then
  return wait
end
if inFlight then
  return ` + strconv.Itoa(reserveWait) + `
end
put(KEYS[1], n, last, pending + 1, now, window, margin)
put(KEYS[2], un, ulast, upending + 1, now, window, margin)
return 0
`

// throttleNow starts a script that has now: ARGV[1], then the limits.
const throttleNow = `
local now, o = tonumber(ARGV[1]), 1
` + throttleLimits

// throttleReserveScript is throttle.reserve on one Redis: it returns 0 and
// reserves the attempt's place (Admitted), the Retry-After in whole
// seconds (Refused), or reserveWait (Wait: over a limit only by the
// attempts in flight). The longest of the waits is the answer.
var throttleReserveScript = redis.NewScript(throttleLib + throttleNow + `
local wait, akey = 0, KEYS[3]
` + throttleAddrWait + throttleReserveUser)

// throttleAddrWaitScript is the cluster's reserve in the address's slot:
// it returns the bucket's wait and changes nothing.
var throttleAddrWaitScript = redis.NewScript(throttleLib + throttleNow + `
local wait, akey = 0, KEYS[1]
` + throttleAddrWait + `
return wait
`)

// throttleReserveUserScript is the cluster's reserve in the user's slot,
// with the address's wait from throttleAddrWaitScript in ARGV[10]; it
// answers as throttleReserveScript does.
var throttleReserveUserScript = redis.NewScript(throttleLib + throttleNow + `
local wait = tonumber(ARGV[10])
` + throttleReserveUser)

// throttleExplainUser sets limits to the bits of throttle.Limits for the
// pair's and the user's settled failures that refuse an attempt at now, as
// throttleReserveUser decides them, and writes nothing: a streak a Window
// old counts for nothing but is left in place.
var throttleExplainUser = `
local function peek(key)
  local f = redis.call('HMGET', key, 'n', 'last')
  local n, last = num(f[1]), num(f[2])
  if n > 0 and now - last >= window then
    n = 0
  end
  return n, last
end
local limits = 0
local n, last = peek(KEYS[1])
if n >= pf and last + backoff(n, pf, base, maxb) - now > 0 then
  limits = limits + ` + strconv.Itoa(int(throttle.LimitPair)) + `
end
local un, ulast = peek(KEYS[2])
if un >= uf and ulast + window - now > 0 then
  limits = limits + ` + strconv.Itoa(int(throttle.LimitUser)) + `
end
`

// throttleExplainScript is throttle.explain on one Redis: it returns the
// limits that refuse an attempt at now and changes nothing.
var throttleExplainScript = redis.NewScript(throttleLib + throttleNow + `
local wait, akey = 0, KEYS[3]
` + throttleAddrWait + throttleExplainUser + `
if wait > 0 then
  limits = limits + ` + strconv.Itoa(int(throttle.LimitClient)) + `
end
return limits
`)

// throttleExplainUserScript is the cluster's explain in the user's slot:
// the pair's and the user's limits, without the client's.
var throttleExplainUserScript = redis.NewScript(throttleLib + throttleNow + throttleExplainUser + `
return limits
`)

// throttleFailureUser extends the pair's and the user's streaks, settling
// one of their pending attempts.
const throttleFailureUser = `
for i = 1, 2 do
  local n, _, pending = streak(KEYS[i], now, window)
  put(KEYS[i], n + 1, now, math.max(0, pending - 1), now, window, margin)
end
`

// throttleFailureAddr takes a token from the bucket at akey, which may go
// below zero.
const throttleFailureAddr = `
local tokens = burst -- a new bucket is full
local f = redis.call('HMGET', akey, 'tokens', 'last')
if f[1] then
  tokens = tokensAt(f, now, rate, burst)
end
tokens = tokens - 1
redis.call('HSET', akey, 'tokens', string.format('%.17g', tokens), 'last', int(now))
redis.call('PEXPIRE', akey, int(math.ceil((burst - tokens) / rate * 1000) + margin))
`

// throttleFailureScript is throttle.failure on one Redis: it extends the
// pair's and the user's streaks and takes a token from the address's
// bucket.
var throttleFailureScript = redis.NewScript(throttleLib + throttleNow + throttleFailureUser + `
local akey = KEYS[3]
` + throttleFailureAddr + `
return 0
`)

// throttleFailureUserScript and throttleFailureAddrScript are the
// cluster's failure, in the user's slot and in the address's.
var (
	throttleFailureUserScript = redis.NewScript(throttleLib + throttleNow + throttleFailureUser + `
return 0
`)
	throttleFailureAddrScript = redis.NewScript(throttleLib + throttleNow + `
local akey = KEYS[1]
` + throttleFailureAddr + `
return 0
`)
)

// throttleSuccessScript is throttle.success: it clears the pair's failures,
// keeping its other pending attempts, and ends one of the user's pending
// attempts.
var throttleSuccessScript = redis.NewScript(throttleLib + throttleNow + `
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
