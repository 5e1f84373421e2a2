package redisstore

import (
	"slices"
	"strings"
	"testing"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/storetest"
)

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
		opt, err := parseSentinelURL(tc.url)
		if err != nil {
			t.Errorf("parseSentinelURL(%q) = %v; want no error", tc.url, err)
			continue
		}
		if !slices.Equal(opt.SentinelAddrs, tc.addrs) || opt.MasterName != tc.master || opt.DB != tc.db {
			t.Errorf("parseSentinelURL(%q) = sentinels %q, master %q, db %d; want %q, %q, %d",
				tc.url, opt.SentinelAddrs, opt.MasterName, opt.DB, tc.addrs, tc.master, tc.db)
		}
		if opt.Username != tc.user || opt.Password != tc.pass || opt.SentinelPassword != tc.sentPW {
			t.Errorf("parseSentinelURL(%q) = user %q, password %q, sentinel password %q; want %q, %q, %q",
				tc.url, opt.Username, opt.Password, opt.SentinelPassword, tc.user, tc.pass, tc.sentPW)
		}
		if got := opt.TLSConfig != nil; got != tc.tls {
			t.Errorf("parseSentinelURL(%q): TLS %v; want %v", tc.url, got, tc.tls)
		}
		if opt.TLSConfig != nil && opt.TLSConfig.ServerName != "" {
			t.Errorf("parseSentinelURL(%q): TLS ServerName %q; want none (each dialled address's own)", tc.url, opt.TLSConfig.ServerName)
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
		_, err := parseSentinelURL(tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseSentinelURL(%q) = %v; want an error containing %q", tc.url, err, tc.want)
			continue
		}
		for _, secret := range []string{testDataPassword, testSentinelPassword, "Data", "Secret"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("parseSentinelURL(%q) = %q; want no password, nor a piece of one (%q) in the error", tc.url, err, secret)
			}
		}
	}
}

// TestDialSentinelOptions: Dial gives a Sentinel URL's client the
// timeouts, retries and context bound of a plain redis:// one (503 within
// API.md's 5 s either way), and its errors are the parser's, password-free.
func TestDialSentinelOptions(t *testing.T) {
	plain, err := Dial("redis://127.0.0.1:6379/2")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	url := "redis+sentinel://u:" + testDataPassword + "@127.0.0.1:26379,127.0.0.1:26380/mymaster/2?sentinel_password=" + testSentinelPassword
	failover, err := Dial(url)
	if err != nil {
		t.Fatalf("Dial(%q) = %v; want a client", url, err)
	}
	defer failover.Close()
	p, f := plain.Options(), failover.Options()
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"DialTimeout", f.DialTimeout, p.DialTimeout},
		{"ReadTimeout", f.ReadTimeout, p.ReadTimeout},
		{"WriteTimeout", f.WriteTimeout, p.WriteTimeout},
		{"PoolTimeout", f.PoolTimeout, p.PoolTimeout},
		{"MaxRetries", f.MaxRetries, p.MaxRetries},
		{"DialerRetries", f.DialerRetries, p.DialerRetries},
		{"ContextTimeoutEnabled", f.ContextTimeoutEnabled, p.ContextTimeoutEnabled},
		{"DB", f.DB, p.DB},
		{"Password", f.Password, testDataPassword},
	} {
		if c.got != c.want {
			t.Errorf("Dial(redis+sentinel://…).Options().%s = %v; want %v, as Dial(redis://…)'s", c.name, c.got, c.want)
		}
	}

	bad := "redis+sentinel://u:" + testDataPassword + "@127.0.0.1:26379/mymaster/x"
	if _, err := Dial(bad); err == nil || !strings.HasPrefix(err.Error(), "redis store URL: ") || strings.Contains(err.Error(), testDataPassword) {
		t.Errorf("Dial(%q) = %v; want a \"redis store URL: \" error without the password", bad, err)
	}
}

// TestRedisStoreSentinel: the store's conformance suite, unchanged, on a
// client that reaches the primary through three sentinels.
func TestRedisStoreSentinel(t *testing.T) {
	g := testservers.Sentinel(t)
	storetest.Run(t, func(t *testing.T) tokens.Store {
		return newTestRedisStore(t, g.URL)
	})
}
