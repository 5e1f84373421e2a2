package faults

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/users/usersfile"
)

// The abuse tests drive the whole program (startServer) over real TCP
// connections: slow and malformed clients, a login flood, and per-client
// throttling from distinct loopback source addresses.

const (
	// abuseWrongPassword is every wrong password the abuse tests send; like
	// the right ones, it must never reach the log.
	abuseWrongPassword = "wr0ng-Abuse-pw"
	// rightLoginBody is alice's right password: a malformed request that
	// carries it must still never get a 2xx.
	rightLoginBody = `{"username":"alice","password":"alice-pw"}`
)

// The server's read timeouts (internal/cli's serve.go): API.md fixes the
// header timeout at 10 s, and a trickled body is cut off with the
// headers' deadline.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = readHeaderTimeout
)

// abuseServer is one running program and what it must never log.
type abuseServer struct {
	base string // http://host:port
	addr string // host:port
	log  *servertest.LineLog

	mu      sync.Mutex // guards secrets
	secrets []string   // passwords and tokens
}

// startAbuseServer runs the program on a users file of testUsers (cost 4,
// so no cost-12 bootstrap) with args. When the test ends it stops the
// server and checks that no log line holds a password or a token.
func startAbuseServer(t *testing.T, args ...string) *abuseServer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	// The users' own hash policy: an unknown user's password is checked
	// against a dummy of the policy's cost, and a failure is held to the
	// slowest check's time, which the default argon2id makes seconds under
	// -race on a loaded machine, past what a probe waits for a reply.
	policy := []string{"--users", path, "--hash", "bcrypt", "--cost", fmt.Sprint(servertest.TestCost)}
	base, log, stop := harness.StartServer(t, nil, append(policy, args...)...)
	s := &abuseServer{
		base:    base,
		addr:    strings.TrimPrefix(base, "http://"),
		log:     log,
		secrets: []string{"alice-pw", "bob-pw", "carol-pw", abuseWrongPassword},
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("run after stop = %v; want nil", err)
		}
		s.checkLog(t)
	})
	return s
}

func (s *abuseServer) addSecret(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets = append(s.secrets, secret)
}

// checkLog fails t if a log line contains a password or a token.
func (s *abuseServer) checkLog(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	lines := strings.Split(s.log.String(), "\n")
	if len(lines) < 2 {
		t.Errorf("server log has %d lines; want the listening line and more", len(lines))
	}
	for _, line := range lines {
		for _, secret := range s.secrets {
			if strings.Contains(line, secret) {
				t.Errorf("log line %q contains the secret %q", line, secret)
			}
		}
	}
}

// loginResult is one login reply.
type loginResult struct {
	status int
	header http.Header
	code   string // the error code, if any
	body   string
}

func (r loginResult) String() string {
	return fmt.Sprintf("%d Retry-After %q %s", r.status, r.header.Get("Retry-After"), strings.TrimSpace(r.body))
}

// login posts a login for username with password through c; header is
// "Name: value" lines. A token in the reply is recorded as a secret.
func (s *abuseServer) login(t *testing.T, c *http.Client, username, password string, header ...string) loginResult {
	t.Helper()
	body, _ := json.Marshal(httpapi.LoginRequest{Username: username, Password: password})
	req, err := http.NewRequest("POST", s.base+"/api/auth/login/", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range header {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Add(name, value)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("login(%s): %v", username, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var reply struct{ Token, Code string }
	json.Unmarshal(b, &reply)
	if reply.Token != "" {
		s.addSecret(reply.Token)
	}
	return loginResult{status: resp.StatusCode, header: resp.Header, code: reply.Code, body: string(b)}
}

// loginAndInfo checks that alice logs in from 127.0.0.1 and her token
// works for info.
func (s *abuseServer) loginAndInfo(t *testing.T) {
	t.Helper()
	token := servertest.LoginToken(t, s.base, "alice", "alice-pw")
	s.addSecret(token)
	if code, body := servertest.GetInfo(t, s.base, token, ""); code != 200 || !strings.Contains(body, `"username":"alice"`) {
		t.Errorf("info with a fresh token = %d %s; want 200 alice", code, body)
	}
}

// healthy checks that /healthz answers 200.
func (s *abuseServer) healthy(t *testing.T) {
	t.Helper()
	resp, err := http.Get(s.base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /healthz = %d; want 200", resp.StatusCode)
	}
}

// dialFrom opens a TCP connection to addr from the loopback address src.
func dialFrom(t *testing.T, addr, src string) *net.TCPConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn.(*net.TCPConn)
}

// isTimeout reports whether err is a read deadline passing: the server
// neither answered nor closed.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readUntilClosed reads whatever the server sends until it closes the
// connection or the deadline passes: the replies it could parse and the
// error that ended the reading (EOF, a reset, a timeout, a garbled reply).
func readUntilClosed(conn net.Conn, deadline time.Time) ([]*http.Response, error) {
	conn.SetReadDeadline(deadline)
	br := bufio.NewReader(conn)
	var replies []*http.Response
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return replies, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		replies = append(replies, resp)
		if err != nil {
			return replies, err
		}
	}
}

// TestAbuseConnections: slow clients are cut off within the server's
// timeouts, hundreds of malformed requests get no 2xx and no 5xx other
// than 503 (or an RFC-mandated 501/505), and afterwards the server still
// serves health, login and info.
func TestAbuseConnections(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	// Generous limits: the malformed requests that reach the login handler
	// must get their real answer, not 429, and never wait for a bcrypt slot
	// (a client that has half-closed its connection cancels the request's
	// context, and a waiting login would get 503).
	s := startAbuseServer(t, "--login-rate", "1000", "--login-burst", "1000",
		"--login-failures", "1000000", "--user-failures", "1000000", "--password-slots", "16")
	// The probes mostly wait on sockets, so they run at once as subtests
	// started from goroutines: t.Parallel would queue them behind
	// -parallel (GOMAXPROCS, 2 here) and add 10 s of wall time.
	var wg sync.WaitGroup
	probe := func(name string, f func(t *testing.T)) { wg.Go(func() { t.Run(name, f) }) }
	probe("half-request-line", func(t *testing.T) {
		slowHeaders(t, s, func(conn net.Conn, stop <-chan struct{}) {
			io.WriteString(conn, "GET /healthz HT")
		})
	})
	probe("silent-connection", func(t *testing.T) {
		slowHeaders(t, s, func(net.Conn, <-chan struct{}) {})
	})
	probe("header-line-a-second", func(t *testing.T) {
		slowHeaders(t, s, func(conn net.Conn, stop <-chan struct{}) {
			io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
			trickle(conn, stop, func(i int) string { return fmt.Sprintf("X-Slow-%d: %d\r\n", i, i) })
		})
	})
	probe("trickled-body", func(t *testing.T) { trickledBody(t, s) })
	probe("malformed", func(t *testing.T) { malformedRequests(t, s) })
	probe("te-and-cl-then-close", func(t *testing.T) { conflictingFramingCloses(t, s) })
	wg.Wait()
	if t.Failed() {
		return
	}
	s.healthy(t)
	s.loginAndInfo(t)
}

// trickle writes next(i) once a second until stop is closed or a write fails.
func trickle(conn net.Conn, stop <-chan struct{}, next func(i int) string) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if _, err := io.WriteString(conn, next(i)); err != nil {
			return
		}
	}
}

// slowHeaders opens a connection, lets send write to it (in its own
// goroutine, until stop), and checks that the server closes it within the
// header timeout plus 2 s of slack: silently (API.md), or after a 408 or
// a 400 (net/http parses a partial request line it holds when the
// deadline passes, and answers 400 for it).
func slowHeaders(t *testing.T, s *abuseServer, send func(conn net.Conn, stop <-chan struct{})) {
	conn := dialFrom(t, s.addr, "127.0.0.1")
	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { send(conn, stop) })
	defer wg.Wait()
	defer close(stop)
	replies, err := readUntilClosed(conn, start.Add(readHeaderTimeout+3*time.Second))
	elapsed := time.Since(start)
	t.Logf("closed after %v (%d replies, %v)", elapsed.Round(time.Millisecond), len(replies), err)
	switch {
	case isTimeout(err):
		t.Fatalf("connection still open after %v; want it closed within the header timeout %v", elapsed, readHeaderTimeout)
	case elapsed > readHeaderTimeout+2*time.Second:
		t.Errorf("connection closed after %v; want within %v + 2s", elapsed, readHeaderTimeout)
	}
	for _, r := range replies {
		if r.StatusCode != http.StatusRequestTimeout && r.StatusCode != http.StatusBadRequest {
			t.Errorf("reply to incomplete headers = %d; want none, 408 or 400", r.StatusCode)
		}
	}
}

// trickledBody posts a login whose 16000-byte body comes a byte a second:
// the server must cut it off (close, or a 4xx) within the read timeout
// plus slack, not hold the connection open.
func trickledBody(t *testing.T, s *abuseServer) {
	conn := dialFrom(t, s.addr, "127.0.0.1")
	start := time.Now()
	io.WriteString(conn, "POST /api/auth/login/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16000\r\n\r\n{")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { trickle(conn, stop, func(int) string { return " " }) })
	defer wg.Wait()
	defer close(stop)
	const limit = readTimeout + 5*time.Second
	replies, err := readUntilClosed(conn, start.Add(limit+2*time.Second))
	elapsed := time.Since(start)
	var statuses []int
	for _, r := range replies {
		statuses = append(statuses, r.StatusCode)
	}
	t.Logf("closed after %v, replies %v, %v", elapsed.Round(time.Millisecond), statuses, err)
	switch {
	case isTimeout(err):
		t.Fatalf("trickled body still open after %v; want it cut off within %v (ReadTimeout %v)", elapsed, limit, readTimeout)
	case elapsed > limit:
		t.Errorf("trickled body cut off after %v; want within %v (ReadTimeout %v)", elapsed, limit, readTimeout)
	}
	for _, code := range statuses {
		if code < 400 || code > 499 {
			t.Errorf("reply to a trickled login body = %d; want a 4xx or a close", code)
		}
	}
}

// malformedCase is one raw request sent on its own connection.
type malformedCase struct {
	name string
	raw  string
	want int // the status of the first reply; 0: any that the rules allow
}

// Request building blocks.
const (
	loginHead = "POST /api/auth/login/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	// mutationBody is a wrong password for an unknown user: random
	// mutations of it must not lock out alice.
	mutationBody = `{"username":"mallory","password":"` + abuseWrongPassword + `"}`
)

// withLength returns head + a Content-Length for body + body.
func withLength(head, body string) string {
	return head + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// oneChunk returns body as one chunk and the last chunk.
func oneChunk(body string) string {
	return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
}

// malformedCases returns the hand-written table followed by seeded random
// requests, mutations and truncations.
func malformedCases() []malformedCase {
	right := rightLoginBody
	wrong := `{"username":"alice","password":"` + abuseWrongPassword + `"}`
	bigHeader := "X-Big: " + strings.Repeat("a", 64<<10) + "\r\n"
	var manyHeaders strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&manyHeaders, "X-H-%d: v\r\n", i)
	}
	big := `{"username":"alice","password":"alice-pw","pad":"` + strings.Repeat("x", 20000) + `"}`
	cases := []malformedCase{
		// Request lines.
		{"empty-lines", "\r\n\r\n\r\n", 0},
		{"garbage-line", "HELLO\r\n\r\n", 400},
		{"no-version", "GET /healthz\r\n\r\n", 400},
		{"extra-token", "GET /healthz HTTP/1.1 x\r\nHost: x\r\n\r\n", 400},
		{"double-spaces", "GET  /healthz  HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"half-line-then-eof", "POST /api/auth/lo", 0},
		{"http-9.9", "GET / HTTP/9.9\r\nHost: x\r\n\r\n", 505},
		{"http-9.9-login", withLength("POST /api/auth/login/ HTTP/9.9\r\nHost: x\r\nContent-Type: application/json\r\n", right), 505},
		{"http-2.0", "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 0},
		{"http-0.9", "GET /healthz HTTP/0.9\r\nHost: x\r\n\r\n", 0},
		{"https-proto", "GET /healthz HTTPS/1.1\r\nHost: x\r\n\r\n", 400},
		{"version-garbage", "GET /healthz HTTP/1.x\r\nHost: x\r\n\r\n", 400},
		{"h2-preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0},
		{"nul-in-method", withLength(strings.Replace(loginHead, "POST", "PO\x00ST", 1), right), 0},
		{"nul-in-path", withLength(strings.Replace(loginHead, "login/", "login/\x00", 1), right), 0},
		{"nul-after-version", withLength(strings.Replace(loginHead, "HTTP/1.1", "HTTP/1.1\x00", 1), right), 400},
		{"space-in-path", withLength(strings.Replace(loginHead, "auth/", "auth/ ", 1), right), 400},
		{"del-in-path", "GET /heal\x7fthz HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"lowercase-method", withLength(strings.Replace(loginHead, "POST", "post", 1), right), 405},
		{"long-method", strings.Repeat("P", 10000) + " / HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"request-line-over-32k", "GET /" + strings.Repeat("a", 64<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n", 431},
		{"bad-escape-in-path", withLength(strings.Replace(loginHead, "login/", "login/%zz", 1), right), 400},
		{"encoded-slashes", withLength(strings.Replace(loginHead, "/api/auth/login/", "/api%2fauth%2flogin/", 1), right), 0},
		{"dot-segments", withLength(strings.Replace(loginHead, "/api/auth/login/", "/api/auth/x/../login/", 1), right), 0},

		// Host.
		{"missing-host", "GET /healthz HTTP/1.1\r\n\r\n", 400},
		{"missing-host-login", withLength("POST /api/auth/login/ HTTP/1.1\r\nContent-Type: application/json\r\n", right), 400},
		{"two-hosts", withLength(loginHead+"Host: y\r\n", right), 400},
		{"host-with-space", withLength(strings.Replace(loginHead, "Host: x", "Host: x y", 1), right), 400},
		{"nul-in-host", withLength(strings.Replace(loginHead, "Host: x", "Host: x\x00y", 1), right), 400},

		// Header lines.
		{"header-without-colon", withLength(loginHead+"X-Junk\r\n", right), 400},
		{"space-before-colon", withLength(strings.Replace(loginHead, "Content-Type:", "Content-Type :", 1), right), 400},
		{"space-in-name", withLength(loginHead+"X Junk: a\r\n", right), 400},
		{"nul-in-value", withLength(loginHead+"X-Note: a\x00b\r\n", right), 400},
		{"nul-in-content-type", withLength(strings.Replace(loginHead, "application/json", "application/json\x00", 1), right), 400},
		{"nul-in-name", withLength(loginHead+"X-\x00: a\r\n", right), 400},
		{"cr-in-value", withLength(loginHead+"X-Note: a\rb\r\n", right), 400},
		{"non-ascii-name", withLength(loginHead+"X-N\xc3\xa4me: a\r\n", right), 400},
		{"leading-space-first-header", withLength("POST /api/auth/login/ HTTP/1.1\r\n Host: x\r\nContent-Type: application/json\r\n", right), 400},
		{"obs-fold", withLength(loginHead+"X-Note: a\r\n b\r\n", wrong), 0},
		{"headers-over-32k", withLength(loginHead+bigHeader, right), 431},
		{"many-headers-over-32k", withLength(loginHead+manyHeaders.String(), right), 431},
		{"bare-lf", strings.ReplaceAll(withLength(loginHead, wrong), "\r\n", "\n"), 0},
		{"bare-cr", "GET /healthz HTTP/1.1\rHost: x\r\r", 0},
		{"no-blank-line", "GET /healthz HTTP/1.1\r\nHost: x\r\n", 0},

		// Content-Length.
		{"cl-overflow", loginHead + "Content-Length: 99999999999999999999999\r\n\r\n" + right, 400},
		{"cl-huge-short-body", loginHead + "Content-Length: 9223372036854775807\r\n\r\n" + right, 0},
		{"cl-huge-big-body", loginHead + "Content-Length: 1000000\r\n\r\n" + big, 413},
		{"cl-negative", loginHead + "Content-Length: -1\r\n\r\n" + right, 400},
		{"cl-negative-large", loginHead + "Content-Length: -9223372036854775808\r\n\r\n" + right, 400},
		{"cl-plus", loginHead + "Content-Length: +" + strconv.Itoa(len(right)) + "\r\n\r\n" + right, 400},
		{"cl-hex", loginHead + "Content-Length: 0x2b\r\n\r\n" + right, 400},
		{"cl-empty", loginHead + "Content-Length: \r\n\r\n" + right, 400},
		{"cl-inner-space", loginHead + "Content-Length: 4 3\r\n\r\n" + right, 400},
		{"cl-list", loginHead + fmt.Sprintf("Content-Length: %d, %d\r\n\r\n", len(right), len(right)+1) + right, 400},
		{"cl-duplicate-different", loginHead + fmt.Sprintf("Content-Length: %d\r\nContent-Length: %d\r\n\r\n", len(right), len(right)+1) + right, 400},
		{"cl-duplicate-same", loginHead + fmt.Sprintf("Content-Length: %d\r\nContent-Length: %d\r\n\r\n", len(wrong), len(wrong)) + wrong, 401},
		{"cl-short", loginHead + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(right)-10) + right, 400},
		{"cl-long", loginHead + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(right)+10) + right, 400},
		{"cl-zero-with-body", loginHead + "Content-Length: 0\r\n\r\n" + right, 400},
		{"no-length-with-body", loginHead + "\r\n" + right, 400},
		{"body-over-16k", withLength(loginHead, big), 413},

		// Chunked bodies.
		{"chunked-bad-size", loginHead + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + right + "\r\n0\r\n\r\n", 400},
		{"chunked-size-too-big", loginHead + "Transfer-Encoding: chunked\r\n\r\n50\r\n" + right + "\r\n0\r\n\r\n", 400},
		{"chunked-size-too-small", loginHead + "Transfer-Encoding: chunked\r\n\r\n10\r\n" + right + "\r\n0\r\n\r\n", 400},
		{"chunked-no-last-chunk", loginHead + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n", len(right), right), 400},
		{"chunked-huge-size", loginHead + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n" + right + "\r\n0\r\n\r\n", 400},
		{"chunked-negative-size", loginHead + "Transfer-Encoding: chunked\r\n\r\n-2b\r\n" + right + "\r\n0\r\n\r\n", 400},
		{"chunked-bare-lf", loginHead + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\n%s\n0\n\n", len(right), right), 400},
		// net/http ignores chunk extensions whatever their syntax (RFC 9112
		// §7.1.1: unrecognized ones MUST be ignored; the framing stays
		// unambiguous), so this body is read and checked: a wrong password.
		{"chunked-nul-extension", loginHead + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x;\x00\r\n%s\r\n0\r\n\r\n", len(wrong), wrong), 401},
		{"chunked-missing-crlf", loginHead + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s0\r\n\r\n", len(right), right), 400},
		{"chunked-over-16k", loginHead + "Transfer-Encoding: chunked\r\n\r\n" + oneChunk(big), 413},
		{"te-gzip", withLength(loginHead+"Transfer-Encoding: gzip\r\n", right), 501},
		{"te-gzip-chunked", loginHead + "Transfer-Encoding: gzip, chunked\r\n\r\n" + oneChunk(right), 501},
		{"te-two-headers", loginHead + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + oneChunk(right), 501},
		{"te-xchunked", loginHead + "Transfer-Encoding: xchunked\r\n\r\n" + oneChunk(right), 501},
		{"te-space-before-colon", loginHead + "Transfer-Encoding : chunked\r\n\r\n" + oneChunk(right), 400},
		{"te-nul", loginHead + "Transfer-Encoding: chunked\x00\r\n\r\n" + oneChunk(right), 400},

		// Smuggling shapes: both framings, or a second request hidden in a body.
		{"cl-te-smuggle-prefix", loginHead + "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG", 400},
		{"te-cl-smuggle-login", loginHead + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n" + withLength(loginHead, wrong), 400},
		{"te-cl-chunked-wins", loginHead + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" + oneChunk(wrong), 401},
		{"cl-smuggle-in-body", withLength(loginHead, withLength(loginHead, wrong)), 400},
		{"te-http10", withLength("POST /api/auth/login/ HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n", wrong), 0},

		// Bodies that are not one login object.
		{"body-trailing-data", withLength(loginHead, right+"x"), 400},
		{"body-two-objects", withLength(loginHead, right+right), 400},
		{"body-raw-nul", withLength(loginHead, strings.Replace(right, "alice-pw", "alice-pw\x00", 1)), 400},
		{"body-bom", withLength(loginHead, "\xef\xbb\xbf"+right), 400},
		{"body-array", withLength(loginHead, `["alice","alice-pw"]`), 400},
		{"body-invalid-utf8", withLength(loginHead, strings.Replace(right, "alice-pw", "alice-pw\xff", 1)), 400}, // not read as U+FFFD
		{"no-content-type", withLength("POST /api/auth/login/ HTTP/1.1\r\nHost: x\r\n", right), 415},
		{"form-body", withLength("POST /api/auth/login/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n", "username=alice&password=alice-pw"), 415},
		{"login-get-with-body", withLength(strings.Replace(loginHead, "POST", "GET", 1), right), 405},
	}

	// Seeded random requests: pure noise, mutations of a wrong-password
	// login for an unknown user, and truncations of alice's right login.
	rng := rand.New(rand.NewSource(20261122))
	for i := range 200 {
		b := make([]byte, 1+rng.Intn(600))
		rng.Read(b)
		cases = append(cases, malformedCase{name: fmt.Sprintf("random-%d", i), raw: string(b)})
	}
	base := []byte(withLength(loginHead, mutationBody))
	for i := range 200 {
		b := append([]byte(nil), base...)
		for range 1 + rng.Intn(4) {
			j := rng.Intn(len(b))
			switch rng.Intn(3) {
			case 0:
				b[j] = byte(rng.Intn(256))
			case 1:
				b = append(b[:j], b[j+1:]...)
			default:
				b = append(b[:j], append([]byte{byte(rng.Intn(256))}, b[j:]...)...)
			}
		}
		cases = append(cases, malformedCase{name: fmt.Sprintf("mutation-%d", i), raw: string(b)})
	}
	full := withLength(loginHead, right)
	for i := range 64 {
		cases = append(cases, malformedCase{name: fmt.Sprintf("truncation-%d", i), raw: full[:rng.Intn(len(full))]})
	}
	return cases
}

// fiveXXAllowed reports whether status is a 5xx that may answer raw: 503,
// 501 for a transfer coding the server does not implement (RFC 9112
// §6.1), 505 for a version other than HTTP/1.x (RFC 9110 §15.6.6). These
// two come from net/http before any handler runs.
func fiveXXAllowed(status int, raw string) bool {
	firstLine, _, _ := strings.Cut(raw, "\n")
	switch status {
	case http.StatusServiceUnavailable:
		return true
	case http.StatusNotImplemented:
		return strings.Contains(strings.ToLower(raw), "transfer-encoding")
	case http.StatusHTTPVersionNotSupported:
		return !strings.Contains(firstLine, " HTTP/1.")
	}
	return false
}

// malformedRequests sends every malformed case on its own connection (a
// few at once), reads the replies until the server closes, and checks
// them: never a hang, never a 2xx, never a 5xx but those allowed.
func malformedRequests(t *testing.T, s *abuseServer) {
	cases := malformedCases()
	type outcome struct {
		statuses []int
		err      error
	}
	outcomes := make([]outcome, len(cases))
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				// Another source address than the final login's, so that
				// no throttle the cases trip can refuse it.
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.9")}, Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", s.addr)
				if err != nil {
					outcomes[i].err = err
					continue
				}
				conn := c.(*net.TCPConn)
				var w sync.WaitGroup
				w.Go(func() {
					io.WriteString(conn, cases[i].raw)
					conn.CloseWrite()
				})
				replies, err := readUntilClosed(conn, time.Now().Add(15*time.Second))
				conn.Close()
				w.Wait()
				for _, r := range replies {
					outcomes[i].statuses = append(outcomes[i].statuses, r.StatusCode)
				}
				outcomes[i].err = err
			}
		})
	}
	for i := range cases {
		work <- i
	}
	close(work)
	wg.Wait()

	histogram := make(map[int]int)
	for i, c := range cases {
		o := outcomes[i]
		var opErr *net.OpError
		switch {
		case isTimeout(o.err):
			t.Errorf("%s: no reply and no close within 15s (replies %v)", c.name, o.statuses)
			continue
		case errors.As(o.err, &opErr) && opErr.Op == "dial":
			t.Errorf("%s: %v", c.name, o.err)
			continue
		}
		if len(o.statuses) == 0 {
			histogram[0]++
			if c.want != 0 {
				t.Errorf("%s: connection closed without a reply (%v); want %d", c.name, o.err, c.want)
			}
			continue
		}
		first := o.statuses[0]
		histogram[first]++
		switch {
		case first >= 200 && first <= 299:
			t.Errorf("%s: first reply %d; want no 2xx for a malformed request (%q)", c.name, first, abbreviate(c.raw))
		case c.want != 0 && first != c.want:
			t.Errorf("%s: first reply %d; want %d (%q)", c.name, first, c.want, abbreviate(c.raw))
		}
		for _, code := range o.statuses {
			if code >= 500 && !fiveXXAllowed(code, c.raw) {
				t.Errorf("%s: reply %d; want no 5xx but 503, a 501 for a transfer coding or a 505 for a version (%q)", c.name, code, abbreviate(c.raw))
			}
		}
		if len(o.statuses) > 1 {
			t.Logf("%s: %d replies on one connection: %v", c.name, len(o.statuses), o.statuses)
		}
	}
	t.Logf("%d malformed requests; first-reply statuses (0 = closed without a reply): %v", len(cases), histogram)
}

// conflictingFramingCloses sends a login with both Transfer-Encoding and
// Content-Length followed by a second request on the same connection. RFC
// 9112 §6.1: a server that processes such a request (by its chunked
// framing) MUST close the connection after responding, or a front end that
// framed it by Content-Length would have the second request smuggled past
// it. net/http (golang/go#80942, not fixed in this Go) keeps the connection
// open, and the product does not yet ask for a close: until it does, this
// probe reports the gap as a skip instead of failing.
func conflictingFramingCloses(t *testing.T, s *abuseServer) {
	wrong := `{"username":"mallory","password":"` + abuseWrongPassword + `"}`
	raw := loginHead + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + oneChunk(wrong) +
		"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	conn := dialFrom(t, s.addr, "127.0.0.9")
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	conn.CloseWrite()
	replies, err := readUntilClosed(conn, time.Now().Add(15*time.Second))
	if isTimeout(err) {
		t.Fatalf("no close within 15s after %d replies", len(replies))
	}
	if len(replies) == 0 || replies[0].StatusCode != 401 {
		t.Fatalf("replies %v (%v); want a first reply 401", replies, err)
	}
	if len(replies) > 1 {
		t.Errorf("after a request with both Transfer-Encoding and Content-Length the server answered a second request on the same connection (%d); RFC 9112 §6.1 says close", replies[1].StatusCode)
	}
}

// abbreviate returns raw cut to 120 bytes for a failure message.
func abbreviate(raw string) string {
	if len(raw) > 120 {
		return raw[:120] + "…"
	}
	return raw
}

// TestAbuseLoginFlood: 64 clients posting wrong passwords as fast as they
// can against one bcrypt slot and a queue of two get only 401, 503 with
// Retry-After, or 429; meanwhile every info call with a valid token gets 200.
func TestAbuseLoginFlood(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	s := startAbuseServer(t,
		"--password-slots", "1", "--password-queue", "2",
		"--login-rate", "1000", "--login-burst", "1000",
		"--login-failures", "1000000", "--user-failures", "1000000")
	token := servertest.LoginToken(t, s.base, "bob", "bob-pw")
	s.addSecret(token)

	flood := harness.ClientFrom(t, "127.0.0.1")
	deadline := time.Now().Add(2 * time.Second)
	var (
		mu       sync.Mutex // guards counts, problems, infoOK
		counts   = make(map[int]int)
		problems []string
		infoOK   int
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	body := `{"username":"alice","password":"` + abuseWrongPassword + `"}`
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				resp, err := flood.Post(s.base+"/api/auth/login/", "application/json", strings.NewReader(body))
				if err != nil {
					problem("login: %v", err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				counts[resp.StatusCode]++
				mu.Unlock()
				switch resp.StatusCode {
				case 401:
				case 429, 503:
					if resp.Header.Get("Retry-After") == "" {
						problem("login %d without Retry-After", resp.StatusCode)
					}
				default:
					problem("login %d; want 401, 429 or 503", resp.StatusCode)
				}
			}
		})
	}
	info := harness.ClientFrom(t, "127.0.0.1")
	wg.Go(func() {
		for {
			req, _ := http.NewRequest("GET", s.base+"/api/auth/info", nil)
			req.Header.Set("Authorization", "Token "+token)
			resp, err := info.Do(req)
			if err != nil {
				problem("info: %v", err)
			} else {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					problem("info during the flood = %d; want 200", resp.StatusCode)
				} else {
					mu.Lock()
					infoOK++
					mu.Unlock()
				}
			}
			if !time.Now().Before(deadline) {
				return
			}
		}
	})
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("logins by status: %v; info calls answered 200: %d", counts, infoOK)
	if counts[401] == 0 || counts[503] == 0 {
		t.Errorf("logins by status = %v; want both 401 (checked) and 503 (refused by admission)", counts)
	}
	if infoOK == 0 {
		t.Errorf("no info call answered during the flood")
	}
	s.healthy(t)
}

// TestAbusePerClientThrottle: the throttle keys on the client's address —
// the TCP peer, or with --trusted-proxy the X-Forwarded-For client — so one
// client's guessing does not lock out another.
func TestAbusePerClientThrottle(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	t.Run("source-address", func(t *testing.T) {
		s := startAbuseServer(t)
		guesser := harness.ClientFrom(t, "127.0.0.2")
		for i := 1; i <= 5; i++ {
			if r := s.login(t, guesser, "alice", abuseWrongPassword); r.status != 401 {
				t.Fatalf("wrong password %d from 127.0.0.2 = %v; want 401", i, r)
			}
		}
		r := s.login(t, guesser, "alice", "alice-pw")
		if r.status != 429 || r.code != "throttled" || r.header.Get("Retry-After") != "1" {
			t.Errorf("right password from 127.0.0.2 after 5 failures = %v; want 429 throttled, Retry-After 1", r)
		}
		if r := s.login(t, harness.ClientFrom(t, "127.0.0.3"), "alice", "alice-pw"); r.status != 200 {
			t.Errorf("right password from 127.0.0.3 = %v; want 200", r)
		}
		time.Sleep(1100 * time.Millisecond) // the Retry-After
		if r := s.login(t, guesser, "alice", "alice-pw"); r.status != 200 {
			t.Errorf("right password from 127.0.0.2 after its Retry-After = %v; want 200", r)
		}

		// Without --trusted-proxy X-Forwarded-For is ignored: a guesser
		// cannot escape its throttle by inventing addresses.
		forger := harness.ClientFrom(t, "127.0.0.4")
		for i := 1; i <= 5; i++ {
			if r := s.login(t, forger, "alice", abuseWrongPassword, fmt.Sprintf("X-Forwarded-For: 198.51.100.%d", i)); r.status != 401 {
				t.Fatalf("wrong password %d from 127.0.0.4 = %v; want 401", i, r)
			}
		}
		if r := s.login(t, forger, "alice", "alice-pw", "X-Forwarded-For: 198.51.100.99"); r.status != 429 {
			t.Errorf("right password from 127.0.0.4 with a fresh X-Forwarded-For = %v; want 429 (untrusted header ignored)", r)
		}
		s.log.WaitFor(t, regexp.MustCompile(`msg=login outcome=throttled username=alice client=127\.0\.0\.4( |$)`))
	})
	t.Run("trusted-proxy", func(t *testing.T) {
		s := startAbuseServer(t, "--trusted-proxy", "127.0.0.0/8")
		proxy := harness.ClientFrom(t, "127.0.0.1")
		for i := 1; i <= 5; i++ {
			if r := s.login(t, proxy, "alice", abuseWrongPassword, "X-Forwarded-For: 203.0.113.7"); r.status != 401 {
				t.Fatalf("wrong password %d for 203.0.113.7 = %v; want 401", i, r)
			}
		}
		r := s.login(t, proxy, "alice", "alice-pw", "X-Forwarded-For: 203.0.113.7")
		if r.status != 429 || r.code != "throttled" || r.header.Get("Retry-After") != "1" {
			t.Errorf("right password for 203.0.113.7 after 5 failures = %v; want 429 throttled, Retry-After 1", r)
		}
		if r := s.login(t, proxy, "alice", "alice-pw", "X-Forwarded-For: 203.0.113.8"); r.status != 200 {
			t.Errorf("right password for 203.0.113.8 through the same proxy connection source = %v; want 200", r)
		}
		s.log.WaitFor(t, regexp.MustCompile(`msg=login outcome=throttled username=alice client=203\.0\.113\.7( |$)`))
		s.log.WaitFor(t, regexp.MustCompile(`msg=login outcome=success username=alice client=203\.0\.113\.8( |$)`))
	})
}
