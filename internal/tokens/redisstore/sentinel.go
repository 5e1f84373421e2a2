package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"authsvc/internal/redisurl"

	"github.com/redis/go-redis/v9"
)

// Sentinel URL schemes (API.md, Operations): a primary that Redis
// Sentinel manages, found through the sentinels and followed through
// failover; the rediss form speaks TLS to the sentinels and the data nodes.
const (
	sentinelScheme    = "redis+sentinel://"
	sentinelTLSScheme = "rediss+sentinel://"
)

// IsSentinelURL reports whether rawURL names a Sentinel-managed primary
// (redis+sentinel:// or rediss+sentinel://), which Dial accepts too.
func IsSentinelURL(rawURL string) bool {
	return strings.HasPrefix(rawURL, sentinelScheme) || strings.HasPrefix(rawURL, sentinelTLSScheme)
}

// parseSentinelURL reads
//
//	redis+sentinel://[user:pass@]s1:p1,s2:p2,…/MASTER[/DB][?sentinel_password=…]
//
// (or rediss+sentinel://) into failover options, without timeouts (Dial
// adds them). The user and password are the data nodes' (what AUTH on the
// primary wants); sentinel_password is the sentinels' own requirepass.
//
// It is hand-written rather than url.Parse's or go-redis's
// ParseFailoverURL: a host list is no URL host, and go-redis's form names
// one sentinel and the master in a query. Its errors name the part that is
// wrong and never quote a password, since they reach the operator's
// terminal and CI logs.
func parseSentinelURL(rawURL string) (*redis.FailoverOptions, error) {
	var rest string
	opt := &redis.FailoverOptions{}
	switch {
	case strings.HasPrefix(rawURL, sentinelScheme):
		rest = rawURL[len(sentinelScheme):]
	case strings.HasPrefix(rawURL, sentinelTLSScheme):
		rest = rawURL[len(sentinelTLSScheme):]
		// No ServerName: crypto/tls takes it from each address dialled, a
		// sentinel's or the primary's (the sentinels report IP addresses,
		// so the data nodes' certificates need IP SANs).
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		return nil, errors.New("want redis+sentinel:// or rediss+sentinel://")
	}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		return nil, errors.New("a fragment (#…) has no meaning here")
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	authority, path, _ := strings.Cut(rest, "/")
	// A password holding an unescaped '/' or '?' would end up, '@' and
	// all, in the path or the query, and the error about it would quote a
	// piece of it. Refused here, every part quoted below is password-free.
	if strings.Contains(path, "@") || strings.Contains(rawQuery, "@") {
		return nil, errors.New("'@' after the sentinel addresses: %-escape '@', '/', '?' and '#' in the user name and passwords (%40, %2F, %3F, %23)")
	}

	// Userinfo ends at the last '@': a password may hold one, escaped or not.
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo := authority[:at]
		authority = authority[at+1:]
		rawUser, rawPass, hasPass := strings.Cut(userinfo, ":")
		user, err := url.PathUnescape(rawUser)
		if err != nil {
			return nil, errors.New("the user name is not validly %-escaped")
		}
		pass, err := url.PathUnescape(rawPass)
		if err != nil {
			return nil, errors.New("the password is not validly %-escaped")
		}
		if !hasPass || pass == "" {
			return nil, errors.New("user info without a password (want user:pass@ or :pass@)")
		}
		opt.Username, opt.Password = user, pass
	}

	if authority == "" {
		return nil, errors.New("no sentinel addresses (want host:port,host:port,… before the master name)")
	}
	for _, addr := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("sentinel address %q: want host:port", addr)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("sentinel address %q: port %q is not a number from 1 to 65535", addr, port)
		}
		opt.SentinelAddrs = append(opt.SentinelAddrs, net.JoinHostPort(host, port))
	}

	segments := strings.Split(path, "/")
	master, err := url.PathUnescape(segments[0])
	switch {
	case err != nil:
		return nil, errors.New("the master name is not validly %-escaped")
	case master == "":
		return nil, errors.New("no master name (want …/MASTER[/DB] after the sentinel addresses)")
	case len(segments) > 2:
		return nil, fmt.Errorf("path /%s: want /MASTER or /MASTER/DB", path)
	}
	opt.MasterName = master
	if len(segments) == 2 && segments[1] != "" { // "/MASTER/" is "/MASTER"
		db, err := strconv.Atoi(segments[1])
		if err != nil || db < 0 || segments[1] != strconv.Itoa(db) {
			return nil, fmt.Errorf("database %q is not a number (want /MASTER/DB, DB from 0)", segments[1])
		}
		opt.DB = db
	}

	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, errors.New("the query is not validly %-escaped")
	}
	for name, values := range query {
		switch {
		case name != "sentinel_password":
			return nil, fmt.Errorf("unknown query parameter %q (the only one is sentinel_password)", name)
		case len(values) != 1 || values[0] == "":
			return nil, errors.New("sentinel_password: want it once, not empty")
		}
		opt.SentinelPassword = values[0]
	}
	return opt, nil
}

// dialSentinel is Dial for a Sentinel URL: a client that asks the
// sentinels for the primary's address on every new connection and drops
// its connections to a primary they replaced (go-redis's failover client).
//
// Options, and why:
//   - the timeouts, retries and context bound are Dial's, for the same
//     reason (503 within API.md's 5 s); a dial to a primary that was
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
	opt, err := parseSentinelURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis store URL: %w", err)
	}
	opt.DialTimeout = redisDialTimeout
	opt.ReadTimeout = redisIOTimeout
	opt.WriteTimeout = redisIOTimeout
	opt.PoolTimeout = redisurl.PoolTimeout
	opt.MaxRetries = redisurl.MaxRetries
	opt.DialerRetries = 1
	opt.ContextTimeoutEnabled = true
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
