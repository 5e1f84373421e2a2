package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// TestMultiInstance runs two servers on one Redis and checks that they share
// tokens and revocations, fail closed while Redis is down, and resume when it
// is back, without a restart.
func TestMultiInstance(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, stopRedis, restartRedis := testservers.Redis(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	prefix := testservers.UniquePrefix()
	args := []string{"--cost", "4", "--users", usersPath, "--store", redisURL, "--store-prefix", prefix}
	baseA, logA, stopA := harness.StartServer(t, nil, args...)
	baseB, logB, stopB := harness.StartServer(t, nil, args...)
	servers := []struct{ name, base string }{{"A", baseA}, {"B", baseB}}
	stopped := false
	stopBoth := func() {
		t.Helper()
		stopped = true
		if err := stopA(); err != nil {
			t.Errorf("run (A) after stop = %v; want nil", err)
		}
		if err := stopB(); err != nil {
			t.Errorf("run (B) after stop = %v; want nil", err)
		}
	}
	defer func() {
		if !stopped {
			stopBoth()
		}
		if t.Failed() {
			t.Logf("server A log:\n%s", logA)
			t.Logf("server B log:\n%s", logB)
		}
	}()

	// 1. A token from either server works on the other.
	aliceA := harness.TokenOf(t, "alice on A", harness.Login(t, baseA, "alice"))
	aliceB := harness.TokenOf(t, "alice on B", harness.Login(t, baseB, "alice"))
	harness.WantInfo(t, "A's token on B", baseB, aliceA, harness.AliceInfo)
	harness.WantInfo(t, "B's token on A", baseA, aliceB, harness.AliceInfo)

	// 2. Revocations on one server hold on it at once, and on the other
	// within revocationBound (each caches the tokens it checked).
	if r := harness.Do(t, "POST", baseA+"/api/auth/logout/", aliceA, ""); r.Status != 204 {
		t.Fatalf("logout on A = %v; want 204", r)
	}
	harness.WantInvalidTokenWithin(t, "token logged out on A, on B", baseB, aliceA)
	harness.WantInvalidToken(t, "token logged out on A, on A", baseA, aliceA)
	harness.WantInfo(t, "alice's other token after a logout, on A", baseA, aliceB, harness.AliceInfo)

	bobA := harness.TokenOf(t, "bob on A", harness.Login(t, baseA, "bob"))
	alice2A := harness.TokenOf(t, "second alice on A", harness.Login(t, baseA, "alice"))
	alice3B := harness.TokenOf(t, "third alice on B", harness.Login(t, baseB, "alice"))
	if r := harness.Do(t, "POST", baseB+"/api/auth/logoutall/", alice3B, ""); r.Status != 204 {
		t.Fatalf("logoutall on B = %v; want 204", r)
	}
	for _, s := range servers {
		for name, token := range map[string]string{"aliceB": aliceB, "alice2A": alice2A, "alice3B": alice3B} {
			check := harness.WantInvalidToken
			if s.base != baseB {
				check = harness.WantInvalidTokenWithin
			}
			check(t, fmt.Sprintf("%s after logoutall on B, on %s", name, s.name), s.base, token)
		}
		harness.WantInfo(t, "bob after alice's logoutall, on "+s.name, s.base, bobA, harness.BobInfo)
	}

	if stopRedis == nil || restartRedis == nil {
		stopBoth()
		t.Skip("outage and recovery need a Redis the test can stop: unset AUTHSVC_TEST_REDIS")
	}

	// 3. Redis down: everything that needs it is 503 within 5 s, on both.
	// A token check may still be answered from the instance's cache (a
	// live token only) until it notices that its invalidation link is
	// gone: at most linkBound, after which it answers 503 like the rest.
	stopRedis()
	for _, s := range servers {
		down := time.Now()
		for {
			r := harness.Do(t, "GET", s.base+"/api/auth/info", bobA, "")
			if r.Status != 200 {
				break
			}
			if time.Since(down) > harness.LinkBound {
				t.Errorf("info on %s %v after Redis stopped = %v; want its cache dropped within %v", s.name, time.Since(down), r, harness.LinkBound)
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, s := range servers {
		harness.WantUnavailable(t, "login on "+s.name, harness.Login(t, s.base, "alice"), true)
		harness.WantUnavailable(t, "info on "+s.name, harness.Do(t, "GET", s.base+"/api/auth/info", bobA, ""), true)
		harness.WantUnavailable(t, "logout on "+s.name, harness.Do(t, "POST", s.base+"/api/auth/logout/", bobA, ""), true)
		harness.WantUnavailable(t, "logoutall on "+s.name, harness.Do(t, "POST", s.base+"/api/auth/logoutall/", bobA, ""), true)
		harness.WantUnavailable(t, "readyz on "+s.name, harness.Do(t, "GET", s.base+"/readyz", "", ""), false)
		if r := harness.Do(t, "GET", s.base+"/healthz", "", ""); r.Status != 200 {
			t.Errorf("healthz on %s with Redis down = %v; want 200", s.name, r)
		}
	}

	// 4. Redis back: both servers ready within 5 s, no restart (HealBound
	// under go test; the 5 s itself under AUTHSVC_BENCH=1).
	restartRedis()
	back := time.Now()
	heal := harness.HealBound()
	for _, s := range servers {
		for {
			r := harness.Do(t, "GET", s.base+"/readyz", "", "")
			if r.Status == 200 {
				break
			}
			if time.Since(back) >= heal {
				t.Fatalf("readyz on %s %v after Redis came back = %v; want 200 within %v", s.name, time.Since(back), r, heal)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	fresh := harness.TokenOf(t, "alice on A after Redis came back", harness.Login(t, baseA, "alice"))
	harness.WantInfo(t, "fresh token from A on B after Redis came back", baseB, fresh, harness.AliceInfo)
	elapsed := time.Since(back)
	if elapsed >= heal {
		t.Errorf("service resumed %v after Redis came back; want < %v", elapsed, heal)
	}
	t.Logf("redis restart time to heal: %v", elapsed.Round(time.Millisecond))

	stopBoth()
}

// TestRedisStoreUnreachableAtStart: a server whose Redis is not there starts
// anyway (the store connects lazily), is live but not ready, and answers
// every request that needs the store with 503, never 500.
func TestRedisStoreUnreachableAtStart(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	store := "redis://127.0.0.1:" + testservers.FreePort(t) + "/0" // closed: nothing listens there
	base, log, stop := harness.StartServer(t, nil, "--cost", "4", "--users", usersPath, "--store", store, "--store-prefix", testservers.UniquePrefix())
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", log)
		}
	}()

	if r := harness.Do(t, "GET", base+"/healthz", "", ""); r.Status != 200 {
		t.Errorf("healthz with Redis unreachable = %v; want 200", r)
	}
	harness.WantUnavailable(t, "readyz", harness.Do(t, "GET", base+"/readyz", "", ""), false)
	harness.WantUnavailable(t, "login", harness.Login(t, base, "alice"), true)
	harness.WantUnavailable(t, "info", harness.Do(t, "GET", base+"/api/auth/info", strings.Repeat("ab", 20), ""), true)

	if err := stop(); err != nil {
		t.Errorf("run after stop = %v; want nil", err)
	}
}
