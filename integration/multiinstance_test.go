package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// outageBound is API.md's "Operations" bound: with Redis down, requests that
// need it get 503 within 5 s; with Redis back, service resumes within 5 s.
const outageBound = 5 * time.Second

// linkBound is how soon an instance notices that its token cache's
// invalidation link to Redis is gone and stops answering from the cache:
// its subscription breaks at once when Redis closes the connection, and a
// quiet one is given up after 60 ms (redisstore); the rest is scheduling
// on a loaded machine.
const linkBound = 250 * time.Millisecond

// aliceInfo is alice's info reply as testUsers defines her.
const aliceInfo = `{"username":"alice","name":"Alice","email":"alice@example.com","groups":["dev"],"admin":false}`

// bobInfo is bob's info reply as testUsers defines him.
const bobInfo = `{"username":"bob","name":"Bob","email":"","groups":[],"admin":true}`

// miClient bounds every request well past outageBound, so a stuck server
// fails the test with a measured duration instead of hanging it.
var miClient = &http.Client{Timeout: 3 * outageBound}

// miReply is one HTTP exchange: its answer and how long it took.
type miReply struct {
	status  int
	header  http.Header
	body    string
	elapsed time.Duration
}

// code returns the "code" field of an error body, or "" if there is none.
func (r miReply) code() string {
	var e struct{ Code string }
	json.Unmarshal([]byte(r.body), &e)
	return e.Code
}

func (r miReply) String() string {
	return fmt.Sprintf("%d %s (in %v)", r.status, strings.TrimSpace(r.body), r.elapsed)
}

// miDo sends one request with an optional token and JSON body.
func miDo(t *testing.T, method, url, token, body string) miReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("content-type", "application/json")
	}
	if token != "" {
		req.Header.Set("authorization", "Token "+token)
	}
	start := time.Now()
	resp, err := miClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (after %v)", method, url, err, time.Since(start))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return miReply{status: resp.StatusCode, header: resp.Header, body: string(b), elapsed: elapsed}
}

func miLogin(t *testing.T, base, user string) miReply {
	t.Helper()
	return miDo(t, "POST", base+"/api/auth/login/", "", fmt.Sprintf(`{"username":%q,"password":%q}`, user, user+"-pw"))
}

// sameJSON reports whether a and b hold equal JSON values.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// wantInfo checks that token works on base for GET /api/auth/info with want's body.
func wantInfo(t *testing.T, name, base, token, want string) {
	t.Helper()
	r := miDo(t, "GET", base+"/api/auth/info", token, "")
	if r.status != 200 || !sameJSON(r.body, want) {
		t.Errorf("%s: info = %v; want 200 %s", name, r, want)
	}
}

// wantInvalidToken checks that token gets 401 invalid_token on base.
func wantInvalidToken(t *testing.T, name, base, token string) {
	t.Helper()
	r := miDo(t, "GET", base+"/api/auth/info", token, "")
	if r.status != 401 || r.code() != "invalid_token" {
		t.Errorf("%s: info = %v; want 401 invalid_token", name, r)
	}
}

// wantInvalidTokenWithin checks that token gets 401 invalid_token on base,
// another instance than the one that revoked it, within revocationBound
// (API.md, Operations: what other instances get where a token dies "at
// once" or "everywhere"); the revoking instance is checked with
// wantInvalidToken, at once.
func wantInvalidTokenWithin(t *testing.T, name, base, token string) {
	t.Helper()
	start := time.Now()
	for {
		r := miDo(t, "GET", base+"/api/auth/info", token, "")
		if r.status == 401 && r.code() == "invalid_token" {
			return
		}
		if time.Since(start) > revocationBound {
			t.Errorf("%s: info = %v %v after the revocation; want 401 invalid_token within %v", name, r, time.Since(start), revocationBound)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// wantUnavailable checks a reply given while the store is unreachable:
// 503 unavailable with Retry-After, answered within outageBound.
func wantUnavailable(t *testing.T, name string, r miReply, wantCode bool) {
	t.Helper()
	if r.elapsed >= outageBound {
		t.Errorf("%s with Redis down took %v; want < %v", name, r.elapsed, outageBound)
	}
	switch {
	case r.status == 200 || r.status == 204:
		t.Errorf("%s with Redis down = %v; want 503, never a success", name, r)
	case r.status >= 500 && r.status != 503:
		t.Errorf("%s with Redis down = %v; want 503, never a %d", name, r, r.status)
	case r.status != 503:
		t.Errorf("%s with Redis down = %v; want 503", name, r)
	}
	if wantCode && r.code() != "unavailable" {
		t.Errorf("%s with Redis down: code %q in %v; want \"unavailable\"", name, r.code(), r)
	}
	if n, err := strconv.Atoi(r.header.Get("Retry-After")); r.status == 503 && (err != nil || n <= 0) {
		t.Errorf("%s with Redis down: Retry-After %q; want a positive number of seconds", name, r.header.Get("Retry-After"))
	}
}

func tokenOf(t *testing.T, name string, r miReply) string {
	t.Helper()
	var reply struct{ Token string }
	if r.status != 200 || json.Unmarshal([]byte(r.body), &reply) != nil || len(reply.Token) != 40 {
		t.Fatalf("%s: login = %v; want 200 with a 40-hex token", name, r)
	}
	return reply.Token
}

// TestMultiInstance runs two servers on one Redis and checks that they share
// tokens and revocations, fail closed while Redis is down, and resume when it
// is back, without a restart.
func TestMultiInstance(t *testing.T) {
	t.Parallel()
	redisURL, stopRedis, restartRedis := testservers.Redis(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	prefix := testservers.UniquePrefix()
	args := []string{"--users", usersPath, "--store", redisURL, "--store-prefix", prefix}
	baseA, logA, stopA := startServer(t, nil, args...)
	baseB, logB, stopB := startServer(t, nil, args...)
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
	aliceA := tokenOf(t, "alice on A", miLogin(t, baseA, "alice"))
	aliceB := tokenOf(t, "alice on B", miLogin(t, baseB, "alice"))
	wantInfo(t, "A's token on B", baseB, aliceA, aliceInfo)
	wantInfo(t, "B's token on A", baseA, aliceB, aliceInfo)

	// 2. Revocations on one server hold on it at once, and on the other
	// within revocationBound (each caches the tokens it checked).
	if r := miDo(t, "POST", baseA+"/api/auth/logout/", aliceA, ""); r.status != 204 {
		t.Fatalf("logout on A = %v; want 204", r)
	}
	wantInvalidTokenWithin(t, "token logged out on A, on B", baseB, aliceA)
	wantInvalidToken(t, "token logged out on A, on A", baseA, aliceA)
	wantInfo(t, "alice's other token after a logout, on A", baseA, aliceB, aliceInfo)

	bobA := tokenOf(t, "bob on A", miLogin(t, baseA, "bob"))
	alice2A := tokenOf(t, "second alice on A", miLogin(t, baseA, "alice"))
	alice3B := tokenOf(t, "third alice on B", miLogin(t, baseB, "alice"))
	if r := miDo(t, "POST", baseB+"/api/auth/logoutall/", alice3B, ""); r.status != 204 {
		t.Fatalf("logoutall on B = %v; want 204", r)
	}
	for _, s := range servers {
		for name, token := range map[string]string{"aliceB": aliceB, "alice2A": alice2A, "alice3B": alice3B} {
			check := wantInvalidToken
			if s.base != baseB {
				check = wantInvalidTokenWithin
			}
			check(t, fmt.Sprintf("%s after logoutall on B, on %s", name, s.name), s.base, token)
		}
		wantInfo(t, "bob after alice's logoutall, on "+s.name, s.base, bobA, bobInfo)
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
			r := miDo(t, "GET", s.base+"/api/auth/info", bobA, "")
			if r.status != 200 {
				break
			}
			if time.Since(down) > linkBound {
				t.Errorf("info on %s %v after Redis stopped = %v; want its cache dropped within %v", s.name, time.Since(down), r, linkBound)
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, s := range servers {
		wantUnavailable(t, "login on "+s.name, miLogin(t, s.base, "alice"), true)
		wantUnavailable(t, "info on "+s.name, miDo(t, "GET", s.base+"/api/auth/info", bobA, ""), true)
		wantUnavailable(t, "logout on "+s.name, miDo(t, "POST", s.base+"/api/auth/logout/", bobA, ""), true)
		wantUnavailable(t, "logoutall on "+s.name, miDo(t, "POST", s.base+"/api/auth/logoutall/", bobA, ""), true)
		wantUnavailable(t, "readyz on "+s.name, miDo(t, "GET", s.base+"/readyz", "", ""), false)
		if r := miDo(t, "GET", s.base+"/healthz", "", ""); r.status != 200 {
			t.Errorf("healthz on %s with Redis down = %v; want 200", s.name, r)
		}
	}

	// 4. Redis back: both servers ready within 5 s, no restart.
	restartRedis()
	back := time.Now()
	for _, s := range servers {
		for {
			r := miDo(t, "GET", s.base+"/readyz", "", "")
			if r.status == 200 {
				break
			}
			if time.Since(back) >= outageBound {
				t.Fatalf("readyz on %s %v after Redis came back = %v; want 200 within %v", s.name, time.Since(back), r, outageBound)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	fresh := tokenOf(t, "alice on A after Redis came back", miLogin(t, baseA, "alice"))
	wantInfo(t, "fresh token from A on B after Redis came back", baseB, fresh, aliceInfo)
	if elapsed := time.Since(back); elapsed >= outageBound {
		t.Errorf("service resumed %v after Redis came back; want < %v", elapsed, outageBound)
	}

	stopBoth()
}

// TestRedisStoreUnreachableAtStart: a server whose Redis is not there starts
// anyway (the store connects lazily), is live but not ready, and answers
// every request that needs the store with 503, never 500.
func TestRedisStoreUnreachableAtStart(t *testing.T) {
	t.Parallel()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	store := "redis://127.0.0.1:" + testservers.FreePort(t) + "/0" // closed: nothing listens there
	base, log, stop := startServer(t, nil, "--users", usersPath, "--store", store, "--store-prefix", testservers.UniquePrefix())
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s", log)
		}
	}()

	if r := miDo(t, "GET", base+"/healthz", "", ""); r.status != 200 {
		t.Errorf("healthz with Redis unreachable = %v; want 200", r)
	}
	wantUnavailable(t, "readyz", miDo(t, "GET", base+"/readyz", "", ""), false)
	wantUnavailable(t, "login", miLogin(t, base, "alice"), true)
	wantUnavailable(t, "info", miDo(t, "GET", base+"/api/auth/info", strings.Repeat("ab", 20), ""), true)

	if err := stop(); err != nil {
		t.Errorf("run after stop = %v; want nil", err)
	}
}
