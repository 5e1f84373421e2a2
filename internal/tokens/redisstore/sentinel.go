package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"

	"authsvc/internal/redisurl"

	"github.com/redis/go-redis/v9"
)

// dialSentinel is Dial for a Sentinel URL: a client that asks the
// sentinels for the primary's address on every new connection and drops
// its connections to a primary they replaced (go-redis's failover client).
//
// Options, and why:
//   - the timeouts, retries and context bound (redisurl.ParseSentinel's)
//     are one Redis's, for the same reason (503 within API.md's 5 s); a
//     dial to a primary that was
//     killed is refused at once on a live host, and DialTimeout bounds it
//     on a dead one, so each call fails fast while there is no primary;
//   - every command goes to the primary (ReplicaOnly off, the default;
//     RouteByLatency and RouteRandomly are for the cluster-style client
//     and would route reads to replicas): a token revoked on the primary
//     and read from a lagging replica would come back to life;
//   - DialerRetries 1: the sentinels are asked again on the next call
//     anyway, and go-redis's five dial attempts would outlast
//     redisCallTimeout while the old primary is gone.
//
// Time to heal: from the kill to the promotion is Sentinel's
// (down-after-milliseconds, then an election; the sentinels agree on the
// new address within about 0.1 s of each other). After the promotion the
// client needs up to a second more: once PoolSize dials in a row have
// failed, go-redis's pool fails new dials at once and probes the address
// once a second (a fixed interval no option changes), so the first dial
// to reach the new primary is that probe's. TestFaultSentinelFailover
// measured 0.8-1.1 s from promotion to service, well inside API.md's
// 10 s; a larger PoolSize would only delay the breaker, not remove it.
func dialSentinel(rawURL string) (*redis.Client, error) {
	opt, err := redisurl.ParseSentinel(rawURL)
	if err != nil {
		return nil, err
	}
	redis.SetLogger(quietRedisLog{})
	client := redis.NewFailoverClient(opt)
	client.AddHook(unknownMasterHook{master: opt.MasterName})
	return client, nil
}

// unknownMasterHook names the error of a master name that the sentinels
// do not monitor: go-redis reports it as "all sentinels … are
// unreachable" followed by one "redis: nil" line per sentinel. Like a
// wrong password, it is a configuration the store refuses (an error
// reply, redis.Error), so serve stops at start with one line that says
// what is wrong instead of waiting for a Redis that will never come.
type unknownMasterHook struct{ master string }

func (h unknownMasterHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil && errors.Is(err, redis.Nil) {
			return nil, unknownMasterError(h.master)
		}
		return conn, err
	}
}

func (unknownMasterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (unknownMasterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// unknownMasterError is the sentinels' nil answer to GET-MASTER-ADDR-BY-NAME:
// a redis.Error, as the error replies that refuse a configuration are.
type unknownMasterError string

func (e unknownMasterError) Error() string {
	return fmt.Sprintf("the sentinels monitor no master named %q", string(e))
}

func (unknownMasterError) RedisError() {}
