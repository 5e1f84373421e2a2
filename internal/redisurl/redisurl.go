// Package redisurl parses every Redis form of the --store URL into
// go-redis options, with the timeouts a login can afford: one Redis
// (redis://, rediss://; Parse), a primary that Redis Sentinel manages
// (redis+sentinel://, rediss+sentinel://; ParseSentinel) and a Redis
// Cluster (redis+cluster://, rediss+cluster://; ParseCluster). It is
// apart from the token store and the throttle so that both, and serve,
// share one parser.
package redisurl

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The client bounds every form gets, so that a call to a node that is
// down or stuck fails well inside API.md's 503-within-5-s: a dial may take
// 1 s, a read or a write 500 ms, a wait for a pooled connection 1 s, and a
// failed command is tried once more.
const (
	DialTimeout = 1 * time.Second
	IOTimeout   = 500 * time.Millisecond
	PoolTimeout = 1 * time.Second
	MaxRetries  = 1
)

// Parse parses the URL of one Redis, redis:// or, for TLS, rediss://, as
// go-redis reads it, into client options with the bounds above; timeouts
// the URL gives (dial_timeout=, read_timeout=, ...) win. Its errors never
// quote the URL's password.
func Parse(rawURL string) (*redis.Options, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		// A *url.Error quotes the whole URL, password included: keep only its reason.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("redis store URL: %w", err)
	}
	if opt.DialTimeout == 0 {
		opt.DialTimeout = DialTimeout
	}
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = IOTimeout
	}
	if opt.WriteTimeout == 0 {
		opt.WriteTimeout = IOTimeout
	}
	if opt.PoolTimeout == 0 {
		opt.PoolTimeout = PoolTimeout
	}
	if opt.MaxRetries == 0 {
		opt.MaxRetries = MaxRetries
	}
	// One dial attempt per try: go-redis's default 5 would outlast a
	// call's bound.
	opt.DialerRetries = 1
	// Let the caller's context bound every call.
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

// ParseCluster parses redis+cluster://[user:pass@]h1:p1,h2:p2,… (rediss+cluster://
// for TLS) into the options of a Redis Cluster client: the nodes to learn
// the cluster's slots from (any one that answers will do), the
// credentials, which every node shares, and the bounds above.
//
// A cluster has only database 0, so a path (a DB or anything else) is an
// error, not something to ignore: redis+cluster://h:p/1 would otherwise
// put a store meant for DB 1 in DB 0. So is a query or a fragment, rather
// than options that would be silently dropped. Each node is host:port,
// with the port given. With TLS each node's certificate is checked against
// the host it is reached at, which for the nodes the cluster itself
// reports (CLUSTER SLOTS) is their announced address.
//
// Its errors never quote the password.
func ParseCluster(rawURL string) (*redis.ClusterOptions, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	var useTLS bool
	switch strings.ToLower(scheme) {
	case "redis+cluster":
	case "rediss+cluster":
		useTLS = true
	default:
		ok = false
	}
	if !ok {
		return nil, errors.New("redis cluster URL: want redis+cluster://[user:pass@]host:port,host:port,… or rediss+cluster://…")
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
		switch rest[i] {
		case '/':
			return nil, errors.New("redis cluster URL: a path is not allowed (a cluster has only database 0)")
		case '?':
			return nil, errors.New("redis cluster URL: a query is not allowed (a cluster URL takes no options)")
		default:
			return nil, errors.New("redis cluster URL: a fragment (#…) is not allowed")
		}
	}

	opt := &redis.ClusterOptions{
		DialTimeout:  DialTimeout,
		ReadTimeout:  IOTimeout,
		WriteTimeout: IOTimeout,
		PoolTimeout:  PoolTimeout,
		MaxRetries:   MaxRetries,
		// One dial attempt per try: go-redis's default 5 would outlast a
		// call's bound.
		DialerRetries: 1,
		// Let the caller's context bound every call.
		ContextTimeoutEnabled: true,
	}
	if useTLS {
		// No ServerName: each node is verified against its own host
		// (tls.Dial takes it from the address), not all against the first.
		opt.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}

	hosts := authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		hosts = authority[i+1:]
		user, pass, hasPass := strings.Cut(authority[:i], ":")
		var err error
		if opt.Username, err = url.PathUnescape(user); err != nil {
			return nil, errors.New("redis cluster URL: the user name has a bad %-escape")
		}
		if hasPass {
			if opt.Password, err = url.PathUnescape(pass); err != nil {
				// Not quoted, nor the escape: it is part of the password.
				return nil, errors.New("redis cluster URL: the password has a bad %-escape")
			}
		}
	}
	if hosts == "" {
		return nil, errors.New("redis cluster URL: no host:port given")
	}
	// Nodes are named by position, not quoted: in a URL whose "@" is
	// missing, the first one holds what was meant as the password.
	for i, node := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(node)
		if err == nil && host == "" {
			err = errors.New("no host")
		}
		if n, perr := strconv.Atoi(port); err == nil && (perr != nil || n < 1 || n > 65535) {
			err = errors.New("the port is not a number from 1 to 65535")
		}
		if err != nil {
			return nil, fmt.Errorf("redis cluster URL: node %d of %d: want host:port", i+1, strings.Count(hosts, ",")+1)
		}
		opt.Addrs = append(opt.Addrs, node)
	}
	return opt, nil
}

// IsCluster reports whether rawURL names a Redis Cluster
// (redis+cluster:// or rediss+cluster://, any case).
func IsCluster(rawURL string) bool {
	u := strings.ToLower(rawURL)
	return strings.HasPrefix(u, "redis+cluster://") || strings.HasPrefix(u, "rediss+cluster://")
}

// Sentinel URL schemes (API.md, Operations): a primary that Redis
// Sentinel manages, found through the sentinels and followed through
// failover; the rediss form speaks TLS to the sentinels and the data nodes.
const (
	sentinelScheme    = "redis+sentinel://"
	sentinelTLSScheme = "rediss+sentinel://"
)

// IsSentinel reports whether rawURL names a Sentinel-managed primary
// (redis+sentinel:// or rediss+sentinel://).
func IsSentinel(rawURL string) bool {
	return strings.HasPrefix(rawURL, sentinelScheme) || strings.HasPrefix(rawURL, sentinelTLSScheme)
}

// ParseSentinel reads
//
//	redis+sentinel://[user:pass@]s1:p1,s2:p2,…/MASTER[/DB][?sentinel_password=…]
//
// (or rediss+sentinel://) into failover options, with the bounds Parse
// gives one Redis. The user and password are the data nodes'
// (what AUTH on the primary wants); sentinel_password is the sentinels'
// own requirepass.
//
// It is hand-written rather than url.Parse's or go-redis's
// ParseFailoverURL: a host list is no URL host, and go-redis's form names
// one sentinel and the master in a query. Its errors name the part that is
// wrong and never quote a password, since they reach the operator's
// terminal and CI logs.
func ParseSentinel(rawURL string) (*redis.FailoverOptions, error) {
	opt, err := parseSentinel(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis store URL: %w", err)
	}
	opt.DialTimeout = DialTimeout
	opt.ReadTimeout = IOTimeout
	opt.WriteTimeout = IOTimeout
	opt.PoolTimeout = PoolTimeout
	opt.MaxRetries = MaxRetries
	opt.DialerRetries = 1
	opt.ContextTimeoutEnabled = true
	return opt, nil
}

// parseSentinel is ParseSentinel without the bounds: the URL cut into its
// scheme, user info, sentinel addresses, master and database, and query.
func parseSentinel(rawURL string) (*redis.FailoverOptions, error) {
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
		if err := sentinelUserinfo(opt, authority[:at]); err != nil {
			return nil, err
		}
		authority = authority[at+1:]
	}
	if err := sentinelAddrs(opt, authority); err != nil {
		return nil, err
	}
	if err := sentinelMaster(opt, path); err != nil {
		return nil, err
	}
	if err := sentinelQuery(opt, rawQuery); err != nil {
		return nil, err
	}
	return opt, nil
}

// sentinelUserinfo sets opt's user name and password, the data nodes',
// from the user info (before the '@', not included).
func sentinelUserinfo(opt *redis.FailoverOptions, userinfo string) error {
	rawUser, rawPass, hasPass := strings.Cut(userinfo, ":")
	user, err := url.PathUnescape(rawUser)
	if err != nil {
		return errors.New("the user name is not validly %-escaped")
	}
	pass, err := url.PathUnescape(rawPass)
	if err != nil {
		return errors.New("the password is not validly %-escaped")
	}
	if !hasPass || pass == "" {
		return errors.New("user info without a password (want user:pass@ or :pass@)")
	}
	opt.Username, opt.Password = user, pass
	return nil
}

// sentinelAddrs sets opt's sentinel addresses from the comma-separated
// host:port list between the user info and the path.
func sentinelAddrs(opt *redis.FailoverOptions, authority string) error {
	if authority == "" {
		return errors.New("no sentinel addresses (want host:port,host:port,… before the master name)")
	}
	for _, addr := range strings.Split(authority, ",") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return fmt.Errorf("sentinel address %q: want host:port", addr)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("sentinel address %q: port %q is not a number from 1 to 65535", addr, port)
		}
		opt.SentinelAddrs = append(opt.SentinelAddrs, net.JoinHostPort(host, port))
	}
	return nil
}

// sentinelMaster sets opt's master name and database from the path,
// MASTER or MASTER/DB (no leading '/').
func sentinelMaster(opt *redis.FailoverOptions, path string) error {
	segments := strings.Split(path, "/")
	master, err := url.PathUnescape(segments[0])
	switch {
	case err != nil:
		return errors.New("the master name is not validly %-escaped")
	case master == "":
		return errors.New("no master name (want …/MASTER[/DB] after the sentinel addresses)")
	case len(segments) > 2:
		return fmt.Errorf("path /%s: want /MASTER or /MASTER/DB", path)
	}
	opt.MasterName = master
	if len(segments) == 2 && segments[1] != "" { // "/MASTER/" is "/MASTER"
		db, err := strconv.Atoi(segments[1])
		if err != nil || db < 0 || segments[1] != strconv.Itoa(db) {
			return fmt.Errorf("database %q is not a number (want /MASTER/DB, DB from 0)", segments[1])
		}
		opt.DB = db
	}
	return nil
}

// sentinelQuery sets opt's sentinel password from the query, its only
// parameter.
func sentinelQuery(opt *redis.FailoverOptions, rawQuery string) error {
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return errors.New("the query is not validly %-escaped")
	}
	for name, values := range query {
		switch {
		case name != "sentinel_password":
			return fmt.Errorf("unknown query parameter %q (the only one is sentinel_password)", name)
		case len(values) != 1 || values[0] == "":
			return errors.New("sentinel_password: want it once, not empty")
		}
		opt.SentinelPassword = values[0]
	}
	return nil
}
