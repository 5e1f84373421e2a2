// Package redisurl parses the --store URL of a Redis Cluster into go-redis
// options, with the timeouts a login can afford. It is apart from the
// token store and the throttle so that both, and serve, can share one
// parser.
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

// The client bounds redisstore.Dial gives a single Redis, so that a call to
// a node that is down or stuck fails well inside API.md's 503-within-5-s:
// a dial may take 1 s, a read or a write 500 ms, a wait for a pooled
// connection 1 s, and a failed command is tried once more.
const (
	DialTimeout = 1 * time.Second
	IOTimeout   = 500 * time.Millisecond
	PoolTimeout = 1 * time.Second
	MaxRetries  = 1
)

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
