package redisurl

import (
	"slices"
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

// TestParseBounds: every form's client gets the same bounds, so that a
// call to a node that is down or stuck fails inside API.md's 5 s.
func TestParseBounds(t *testing.T) {
	type bounds struct {
		dial, read, write, pool time.Duration
		retries, dialerRetries  int
		ctxTimeout              bool
	}
	want := bounds{time.Second, 500 * time.Millisecond, 500 * time.Millisecond, time.Second, 1, 1, true}
	forms := map[string]func() (bounds, error){
		"redis://h1:6379/0": func() (bounds, error) {
			o, err := Parse("redis://h1:6379/0")
			if err != nil {
				return bounds{}, err
			}
			return bounds{o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled}, nil
		},
		"redis+sentinel://s1:26379/m": func() (bounds, error) {
			o, err := ParseSentinel("redis+sentinel://s1:26379/m")
			if err != nil {
				return bounds{}, err
			}
			return bounds{o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled}, nil
		},
		"redis+cluster://h1:7000": func() (bounds, error) {
			o, err := ParseCluster("redis+cluster://h1:7000")
			if err != nil {
				return bounds{}, err
			}
			return bounds{o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled}, nil
		},
	}
	for url, parse := range forms {
		got, err := parse()
		if got != want || err != nil {
			t.Errorf("parsing %s: bounds %+v, %v; want %+v, nil", url, got, err, want)
		}
	}
}

// TestParseURLTimeoutsWin: timeouts a redis:// URL gives are kept.
func TestParseURLTimeoutsWin(t *testing.T) {
	o, err := Parse("redis://h1:6379/0?dial_timeout=3s&read_timeout=2s")
	if err != nil {
		t.Fatalf("Parse(dial_timeout=3s, read_timeout=2s) = %v", err)
	}
	if o.DialTimeout != 3*time.Second || o.ReadTimeout != 2*time.Second || o.WriteTimeout != 500*time.Millisecond {
		t.Errorf("Parse(dial_timeout=3s, read_timeout=2s) = dial %v, read %v, write %v; want 3s, 2s, 500ms", o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
	}
}

// TestParseErrorHidesPassword: a bad redis:// URL is refused without
// quoting its password.
func TestParseErrorHidesPassword(t *testing.T) {
	for _, raw := range []string{"redis://:s3cret@127.0.0.1:xx/0", "redis://user:s3cret@127.0.0.1:6379/abc", "rediss://:s3cret@[::1/0"} {
		_, err := Parse(raw)
		if err == nil || !strings.HasPrefix(err.Error(), "redis store URL: ") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Parse(%q) = %v; want a \"redis store URL: \" error without the password", raw, err)
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

// The passwords of the URL-parser cases: no error may quote them, nor any
// piece of them.
const (
	testDataPassword     = "Data-Secret-7"
	testSentinelPassword = "Sentinel-Secret-9"
)

// TestParseSentinelURL: the forms API.md's Operations gives, read into the
// failover client's options.
func TestParseSentinelURL(t *testing.T) {
	for _, tc := range []struct {
		url                string
		addrs              []string
		master             string
		db                 int
		user, pass, sentPW string
		tls                bool
	}{
		{url: "redis+sentinel://127.0.0.1:26379/mymaster",
			addrs: []string{"127.0.0.1:26379"}, master: "mymaster"},
		{url: "redis+sentinel://s1:26379,s2:26380,s3:26381/mymaster/3",
			addrs: []string{"s1:26379", "s2:26380", "s3:26381"}, master: "mymaster", db: 3},
		{url: "redis+sentinel://s1:26379/mymaster/",
			addrs: []string{"s1:26379"}, master: "mymaster"},
		{url: "redis+sentinel://authsvc:" + testDataPassword + "@s1:1,s2:2/m/0?sentinel_password=" + testSentinelPassword,
			addrs: []string{"s1:1", "s2:2"}, master: "m", user: "authsvc", pass: testDataPassword, sentPW: testSentinelPassword},
		{url: "redis+sentinel://:" + testDataPassword + "@[::1]:26379/m",
			addrs: []string{"[::1]:26379"}, master: "m", pass: testDataPassword},
		// Escaped: '@', '/' and ':' in a password; a master name with a space.
		{url: "redis+sentinel://u:p%40ss%2Fw%3Ard@s1:1/my%20master",
			addrs: []string{"s1:1"}, master: "my master", user: "u", pass: "p@ss/w:rd"},
		// An unescaped '@' in the password: the last '@' ends the user info.
		{url: "redis+sentinel://u:p@ss@s1:1/m",
			addrs: []string{"s1:1"}, master: "m", user: "u", pass: "p@ss"},
		{url: "rediss+sentinel://s1:26379,s2:26379/mymaster/1",
			addrs: []string{"s1:26379", "s2:26379"}, master: "mymaster", db: 1, tls: true},
	} {
		opt, err := ParseSentinel(tc.url)
		if err != nil {
			t.Errorf("ParseSentinel(%q) = %v; want no error", tc.url, err)
			continue
		}
		if !slices.Equal(opt.SentinelAddrs, tc.addrs) || opt.MasterName != tc.master || opt.DB != tc.db {
			t.Errorf("ParseSentinel(%q) = sentinels %q, master %q, db %d; want %q, %q, %d",
				tc.url, opt.SentinelAddrs, opt.MasterName, opt.DB, tc.addrs, tc.master, tc.db)
		}
		if opt.Username != tc.user || opt.Password != tc.pass || opt.SentinelPassword != tc.sentPW {
			t.Errorf("ParseSentinel(%q) = user %q, password %q, sentinel password %q; want %q, %q, %q",
				tc.url, opt.Username, opt.Password, opt.SentinelPassword, tc.user, tc.pass, tc.sentPW)
		}
		if got := opt.TLSConfig != nil; got != tc.tls {
			t.Errorf("ParseSentinel(%q): TLS %v; want %v", tc.url, got, tc.tls)
		}
		if opt.TLSConfig != nil && opt.TLSConfig.ServerName != "" {
			t.Errorf("ParseSentinel(%q): TLS ServerName %q; want none (each dialled address's own)", tc.url, opt.TLSConfig.ServerName)
		}
	}
}

// TestParseSentinelURLErrors: a malformed URL is refused with an error
// that names what is wrong and quotes neither password, nor a piece of
// one.
func TestParseSentinelURLErrors(t *testing.T) {
	const userinfo = "authsvc:" + testDataPassword + "@"
	const sentPW = "sentinel_password=" + testSentinelPassword
	for _, tc := range []struct {
		url, want string
	}{
		{"redis+sentinel://" + userinfo + "s1:26379", "no master name"},
		{"redis+sentinel://" + userinfo + "s1:26379/", "no master name"},
		{"redis+sentinel://" + userinfo + "s1:26379//0", "no master name"},
		{"redis+sentinel://" + userinfo + "/mymaster", "no sentinel addresses"},
		{"redis+sentinel:///mymaster?" + sentPW, "no sentinel addresses"},
		{"redis+sentinel://" + userinfo + "s1/mymaster", `sentinel address "s1": want host:port`},
		{"redis+sentinel://" + userinfo + "s1:26379,/mymaster", `sentinel address "": want host:port`},
		{"redis+sentinel://" + userinfo + ":26379/mymaster", `sentinel address ":26379": want host:port`},
		{"redis+sentinel://" + userinfo + "s1:26379,s2:sentinel/mymaster", `port "sentinel" is not a number`},
		{"redis+sentinel://" + userinfo + "s1:0/mymaster", `port "0" is not a number from 1 to 65535`},
		{"redis+sentinel://" + userinfo + "s1:65536/mymaster", `port "65536" is not a number from 1 to 65535`},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster/zero", `database "zero" is not a number`},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster/-1", `database "-1" is not a number`},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster/+1", `database "+1" is not a number`},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster/0/1", "want /MASTER or /MASTER/DB"},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster?master_name=x&" + sentPW, `unknown query parameter "master_name"`},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster?dial_timeout=3s", `unknown query parameter "dial_timeout"`},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster?sentinel_password=", "sentinel_password: want it once, not empty"},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster?" + sentPW + "&" + sentPW, "sentinel_password: want it once"},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster?sentinel_password=%zz" + testSentinelPassword, "query is not validly %-escaped"},
		{"redis+sentinel://authsvc@s1:26379/mymaster", "user info without a password"},
		{"redis+sentinel://authsvc:%zz" + testDataPassword + "@s1:26379/mymaster", "password is not validly %-escaped"},
		// Unescaped '/', '?' or '#' in a password would move a piece of it
		// past the addresses, where an error would quote it.
		{"redis+sentinel://authsvc:Data/Secret-7@s1:26379/mymaster", "'@' after the sentinel addresses"},
		{"redis+sentinel://authsvc:Data?Secret-7@s1:26379/mymaster", "'@' after the sentinel addresses"},
		{"redis+sentinel://authsvc:Data#Secret-7@s1:26379/mymaster", "a fragment (#…) has no meaning here"},
		{"redis+sentinel://" + userinfo + "s1:26379/mymaster#" + testDataPassword, "a fragment (#…) has no meaning here"},
		{"redis+cluster://" + userinfo + "s1:26379/mymaster", "want redis+sentinel:// or rediss+sentinel://"},
	} {
		_, err := ParseSentinel(tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSentinel(%q) = %v; want an error containing %q", tc.url, err, tc.want)
			continue
		}
		for _, secret := range []string{testDataPassword, testSentinelPassword, "Data", "Secret"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("ParseSentinel(%q) = %q; want no password, nor a piece of one (%q) in the error", tc.url, err, secret)
			}
		}
	}
}
