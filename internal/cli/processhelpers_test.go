package cli

// The helpers of the process-level tests that moved to integration/ which
// tests here still use, kept as they were in the files they came from.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/secret"

	"github.com/redis/go-redis/v9"
)

// From multiinstance_test.go.

// outageBound is API.md's "Operations" bound: with Redis down, requests that
// need it get 503 within 5 s; with Redis back, service resumes within 5 s.
const outageBound = 5 * time.Second

// aliceInfo is alice's info reply as testUsers defines her.
const aliceInfo = `{"username":"alice","name":"Alice","email":"alice@example.com","groups":["dev"],"admin":false}`

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

func tokenOf(t *testing.T, name string, r miReply) string {
	t.Helper()
	var reply struct{ Token string }
	if r.status != 200 || json.Unmarshal([]byte(r.body), &reply) != nil || len(reply.Token) != 40 {
		t.Fatalf("%s: login = %v; want 200 with a 40-hex token", name, r)
	}
	return reply.Token
}

// From deadtoken_test.go.

// waitInfo polls info with token until it answers want, or fails after 5 s
// (API.md: changes reach the server within 5 s).
func waitInfo(t *testing.T, base, token string, want int, why string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := getInfo(t, base, token, "")
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: info = %d %s; want %d within 5 s", why, code, body, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLogin logs in until it succeeds, or fails after 5 s, and returns the token.
func waitLogin(t *testing.T, base, username, password string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, body := postJSON(t, base+"/api/auth/login/", `{"username":"`+username+`","password":"`+password+`"}`)
		if resp.StatusCode == 200 {
			var reply struct{ Token string }
			if err := json.Unmarshal([]byte(body), &reply); err != nil {
				t.Fatal(err)
			}
			return reply.Token
		}
		if time.Now().After(deadline) {
			t.Fatalf("login(%s) = %d %s; want 200 within 5 s", username, resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stillDead checks that token stays 401 over a few reload intervals.
func stillDead(t *testing.T, base, token, why string) {
	t.Helper()
	for range 10 {
		if code, body := getInfo(t, base, token, ""); code != 401 {
			t.Fatalf("%s: info = %d %s; want 401: dead stays dead", why, code, body)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// From djangotokens_test.go.

func mustParseRedisURL(t *testing.T, url string) *redis.Options {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// From djangohashes_test.go.

// django42Fixture is the real Django 4.2 dump, one user per hash form (a
// verbatim copy of ../shared/fixtures/django; its README lists every
// password). Never edited.
const django42Fixture = "testdata/django42/dumpdata.json"

// waitForRehash returns username's hash once it is no longer old: the
// rehash on login may be written after the reply.
func waitForRehash(t *testing.T, username, old string, hashOf func(string) string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if h := hashOf(username); h != old {
			return h
		}
		if time.Now().After(deadline) {
			t.Errorf("%s's hash was not rehashed within 10 s of the first login", username)
			return old
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// From mfae2e_test.go.

// mfaCall sends a JSON request to the running server, with token unless
// it is "", and returns the status and the decoded body (nil for none).
func mfaCall(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	status, _, out := mfaCallFrom(t, http.DefaultClient, method, url, token, body)
	return status, out
}

// mfaCallFrom is mfaCall with client (one bound to a source address, say),
// returning the reply's header too.
func mfaCallFrom(t *testing.T, client *http.Client, method, url, token, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: body %q is not JSON", method, url, raw)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// writeKeyFile writes a new secret key file at path, as an operator makes
// one for a fleet, and returns its key.
func writeKeyFile(t *testing.T, path string) secret.Key {
	t.Helper()
	k, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := secret.Write(path, k); err != nil {
		t.Fatal(err)
	}
	return k
}

// From passwordfleet_test.go.

// A raceLogin is one login of a racing client: when it was sent, what it
// got, and the token when it got 200.
type raceLogin struct {
	sent  time.Time
	code  int
	token string
}

// racingLogins starts 4 clients that log in as alice with her old password
// on base, as fast as they can. snapshot returns the logins made so far;
// stop stops the clients (once: later calls only return) and returns every
// login they made.
func racingLogins(t *testing.T, base string) (snapshot, stop func() []raceLogin) {
	done := make(chan struct{})
	var (
		mu     sync.Mutex // guards logins
		logins []raceLogin
	)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				sent := time.Now()
				r := miDo(t, "POST", base+"/api/auth/login/", "", `{"username":"alice","password":"alice-pw"}`)
				l := raceLogin{sent: sent, code: r.status}
				if r.status == 200 {
					var reply struct{ Token string }
					json.Unmarshal([]byte(r.body), &reply)
					l.token = reply.Token
				}
				mu.Lock()
				logins = append(logins, l)
				mu.Unlock()
			}
		})
	}
	snapshot = func() []raceLogin {
		mu.Lock()
		defer mu.Unlock()
		return append([]raceLogin(nil), logins...)
	}
	stop = sync.OnceValue(func() []raceLogin {
		close(done)
		wg.Wait()
		return snapshot()
	})
	return snapshot, stop
}

// awaitTokens waits until logins have handed out at least one token, so
// that the change that follows races logins that succeed, however slowly
// the machine runs them (under -race and the whole suite's load a login
// took up to 2 s).
func awaitTokens(t *testing.T, snapshot func() []raceLogin) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, all := issuedBefore(snapshot(), time.Now()); all > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no login with the old password got a token within 30 s (%d logins)", len(snapshot()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// issuedBefore returns how many of logins got a token before at, and how
// many logins in all got one.
func issuedBefore(logins []raceLogin, at time.Time) (before, all int) {
	for _, l := range logins {
		if l.token != "" {
			all++
			if l.sent.Before(at) {
				before++
			}
		}
	}
	return before, all
}

// hupAndWait sends the process a SIGHUP and waits for the server whose log
// is log to reload.
func hupAndWait(t *testing.T, log *lineLog) {
	t.Helper()
	reloads := strings.Count(log.String(), "users file reloaded")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); strings.Count(log.String(), "users file reloaded") == reloads; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload within 10 s of SIGHUP; log:\n%s", log)
		}
	}
}
