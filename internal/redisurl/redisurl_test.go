package redisurl

import (
	"strings"
	"testing"
	"time"
)

func TestParseCluster(t *testing.T) {
	for _, tt := range []struct {
		url              string
		addrs            []string
		username, passwd string
		tls              bool
	}{
		{"redis+cluster://10.0.0.1:7000", []string{"10.0.0.1:7000"}, "", "", false},
		{"redis+cluster://h1:7000,h2:7001,h3:7002", []string{"h1:7000", "h2:7001", "h3:7002"}, "", "", false},
		{"rediss+cluster://h1:6380,h2:6380", []string{"h1:6380", "h2:6380"}, "", "", true},
		{"REDIS+CLUSTER://h1:7000", []string{"h1:7000"}, "", "", false},
		{"redis+cluster://[::1]:7000,[2001:db8::2]:7000", []string{"[::1]:7000", "[2001:db8::2]:7000"}, "", "", false},
		{"redis+cluster://alice:s3cret@h1:7000,h2:7000", []string{"h1:7000", "h2:7000"}, "alice", "s3cret", false},
		{"redis+cluster://:s3cret@h1:7000", []string{"h1:7000"}, "", "s3cret", false},
		{"redis+cluster://alice@h1:7000", []string{"h1:7000"}, "alice", "", false},
		{"redis+cluster://alice:p%40ss%3Aw%2Cd@h1:7000", []string{"h1:7000"}, "alice", "p@ss:w,d", false},
		{"redis+cluster://alice:p@ss@h1:7000", []string{"h1:7000"}, "alice", "p@ss", false}, // the last @ ends the credentials
	} {
		opt, err := ParseCluster(tt.url)
		if err != nil {
			t.Errorf("ParseCluster(%q) = %v; want nil", tt.url, err)
			continue
		}
		if strings.Join(opt.Addrs, " ") != strings.Join(tt.addrs, " ") || opt.Username != tt.username || opt.Password != tt.passwd {
			t.Errorf("ParseCluster(%q) = addrs %q, user %q, password %q; want %q, %q, %q",
				tt.url, opt.Addrs, opt.Username, opt.Password, tt.addrs, tt.username, tt.passwd)
		}
		if got := opt.TLSConfig != nil; got != tt.tls {
			t.Errorf("ParseCluster(%q): TLS %v; want %v", tt.url, got, tt.tls)
		}
		if opt.TLSConfig != nil && opt.TLSConfig.ServerName != "" {
			t.Errorf("ParseCluster(%q): TLS ServerName %q; want empty (each node checked against its own host)", tt.url, opt.TLSConfig.ServerName)
		}
	}
}

// TestParseClusterBounds: a cluster client gets the bounds redisstore.Dial
// gives a single Redis.
func TestParseClusterBounds(t *testing.T) {
	opt, err := ParseCluster("redis+cluster://h1:7000")
	if err != nil {
		t.Fatalf("ParseCluster = %v", err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"DialTimeout", opt.DialTimeout, time.Second},
		{"ReadTimeout", opt.ReadTimeout, 500 * time.Millisecond},
		{"WriteTimeout", opt.WriteTimeout, 500 * time.Millisecond},
		{"PoolTimeout", opt.PoolTimeout, time.Second},
		{"MaxRetries", opt.MaxRetries, 1},
		{"DialerRetries", opt.DialerRetries, 1},
		{"ContextTimeoutEnabled", opt.ContextTimeoutEnabled, true},
	} {
		if c.got != c.want {
			t.Errorf("ParseCluster(...).%s = %v; want %v", c.name, c.got, c.want)
		}
	}
}

func TestParseClusterErrors(t *testing.T) {
	const secret = "hunter2-secret"
	for _, tt := range []struct {
		url, want string
	}{
		{"redis+cluster://h1:7000/0", "a path is not allowed"},
		{"redis+cluster://h1:7000,h2:7000/3", "a path is not allowed"},
		{"redis+cluster://h1:7000/", "a path is not allowed"},
		{"redis+cluster://u:" + secret + "@h1:7000/1", "a path is not allowed"},
		{"redis+cluster://h1:7000?dial_timeout=3s", "a query is not allowed"},
		{"redis+cluster://h1:7000#x", "a fragment"},
		{"redis+cluster://", "no host:port given"},
		{"redis+cluster://u:" + secret + "@", "no host:port given"},
		{"redis+cluster://u:" + secret + "@/0", "a path is not allowed"},
		{"redis+cluster://h1", "node 1 of 1: want host:port"},
		{"redis+cluster://h1:7000,", "node 2 of 2: want host:port"},
		{"redis+cluster://h1:7000,,h3:7000", "node 2 of 3: want host:port"},
		{"redis+cluster://:7000", "node 1 of 1: want host:port"},
		{"redis+cluster://h1:0", "node 1 of 1: want host:port"},
		{"redis+cluster://h1:65536", "node 1 of 1: want host:port"},
		{"redis+cluster://h1:port", "node 1 of 1: want host:port"},
		{"redis+cluster://u:" + secret + "@h1:x", "node 1 of 1: want host:port"},
		{"redis+cluster://u:" + secret + ",h1:7000", "node 1 of 2: want host:port"}, // the @ forgotten: the password is a node
		{"redis+cluster://u:" + secret + "%zz@h1:7000", "the password has a bad %-escape"},
		{"redis+cluster://u%zz:" + secret + "@h1:7000", "the user name has a bad %-escape"},
		{"redis://h1:7000", "want redis+cluster://"},
		{"redis+sentinel://h1:26379/mymaster", "want redis+cluster://"},
		{"h1:7000,h2:7000", "want redis+cluster://"},
		{"redis+cluster:h1:7000", "want redis+cluster://"},
	} {
		opt, err := ParseCluster(tt.url)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseCluster(%q) = %v, %v; want an error saying %q", tt.url, opt, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ParseCluster(%q) = %v; want an error that does not quote the password", tt.url, err)
		}
	}
}
