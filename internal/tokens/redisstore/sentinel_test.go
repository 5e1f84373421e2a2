package redisstore

import (
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
