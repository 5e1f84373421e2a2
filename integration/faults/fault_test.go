package faults

// The fault suite of issue 19, point 11: real servers, real Redis and
// PostgreSQL processes, each case asserting what API.md's "Operations"
// promises, with its figures in t.Logf for README.md's "Reliability"
// table. This file has its helpers and the kill -9 of a server;
// faultredis_test.go restarts Redis, faultpg_test.go PostgreSQL,
// faultdisk_test.go fills the disk, and hupstorm_test.go has the SIGHUP
// storm. Run them with go test -race -run 'TestFault|TestSIGHUPStorm' .

import (
	"authsvc/integration/harness"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// faultReply is one request of a fault case and what came of it.
type faultReply struct {
	kind      string // "login", or the kind of /info request the case names
	reqID     string // the X-Request-Id sent, which the server keeps
	user      string
	token     string // the token presented, or the one a 200 login handed out
	status    int    // 0: no reply
	code      string // an error reply's "code"
	sent, got time.Time
	err       error // why there was no reply
}

// faultLoad sends a fault case's requests, each with a request id of its
// own, and keeps every reply.
type faultLoad struct {
	client *http.Client

	mu      sync.Mutex // guards replies
	replies []faultReply
}

// faultSeq numbers the fault cases' requests: no two share a request id.
var faultSeq atomic.Int64

// newFaultLoad returns a load with a client of its own: no kept-alive
// connection outlives the case, or the server it was made to. Its timeout
// is well past every bound of API.md, so a stuck server fails the case
// instead of hanging it.
func newFaultLoad() *faultLoad {
	return &faultLoad{client: &http.Client{
		Timeout:   3 * harness.OutageBound,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16},
	}}
}

// do sends one request and records what came of it.
func (l *faultLoad) do(kind, method, url, user, token, body string) faultReply {
	r := faultReply{kind: kind, reqID: fmt.Sprintf("fault-%d", faultSeq.Add(1)), user: user, sent: time.Now()}
	if kind != "login" {
		r.token = token
	}
	defer func() {
		l.mu.Lock()
		l.replies = append(l.replies, r)
		l.mu.Unlock()
	}()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		r.err = err
		return r
	}
	req.Header.Set("X-Request-Id", r.reqID)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		r.got, r.err = time.Now(), err
		return r
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.got, r.status = time.Now(), resp.StatusCode
	if err != nil {
		r.err = err // the reply was sent, its body cut short
		return r
	}
	var reply struct{ Token, Code string }
	json.Unmarshal(b, &reply)
	r.code = reply.Code
	if kind == "login" && r.status == http.StatusOK {
		if len(reply.Token) != 40 {
			r.err = fmt.Errorf("login reply %q has no 40-hex token", b)
		}
		r.token = reply.Token
	}
	return r
}

// login posts user's credentials; testUsers' password is user+"-pw",
// faultUsers' is faultPassword(user).
func (l *faultLoad) login(base, user, password string) faultReply {
	return l.do("login", "POST", base+"/api/auth/login/", user, "", fmt.Sprintf(`{"username":%q,"password":%q}`, user, password))
}

// info presents token to /api/auth/info; kind says what the case expects of it.
func (l *faultLoad) info(kind, base, user, token string) faultReply {
	return l.do(kind, "GET", base+"/api/auth/info", user, token, "")
}

// waitLogins waits until n logins have answered 200, or within has
// passed (the test's checks of the replies then fail it).
func (l *faultLoad) waitLogins(n int, within time.Duration) {
	deadline := time.Now().Add(within)
	for {
		l.mu.Lock()
		ok := len(successfulLogins(l.replies)) >= n
		l.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// run starts n workers, each calling step(w) in a loop until stop is
// closed, and returns a function that waits for them.
func (l *faultLoad) run(n int, stop <-chan struct{}, step func(w int)) (wait func()) {
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				step(w)
			}
		})
	}
	return wg.Wait
}

// close closes the client's idle connections, the spare ones its
// transport dialed included: a connection that never carried a request
// would hold the server's graceful shutdown for 5 s (net/http's rule for
// connections that have not sent a request yet).
func (l *faultLoad) close() { l.client.CloseIdleConnections() }

// all returns a copy of the replies so far.
func (l *faultLoad) all() []faultReply {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.replies)
}

// faultTally is the replies counted by kind and status, as the README's
// figures give them: "login 200×1234 503×56; info 200×1234".
func faultTally(replies []faultReply) string {
	by := map[string]map[int]int{}
	for _, r := range replies {
		if by[r.kind] == nil {
			by[r.kind] = map[int]int{}
		}
		by[r.kind][r.status]++
	}
	kinds := make([]string, 0, len(by))
	for k := range by {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		codes := make([]int, 0, len(by[k]))
		for c := range by[k] {
			codes = append(codes, c)
		}
		sort.Ints(codes)
		s := k
		for _, c := range codes {
			name := strconv.Itoa(c)
			if c == 0 {
				name = "no reply"
			}
			s += fmt.Sprintf(" %s×%d", name, by[k][c])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// faultErrors reports a case's failures, at most max of them in full and
// the rest as a count, so that a broken server does not flood the log.
type faultErrors struct {
	t     *testing.T
	max   int
	count int
}

func (e *faultErrors) errorf(format string, args ...any) {
	e.t.Helper()
	e.count++
	if e.count <= e.max {
		e.t.Errorf(format, args...)
	}
}

func (e *faultErrors) done() {
	e.t.Helper()
	if e.count > e.max {
		e.t.Errorf("… and %d more such failures", e.count-e.max)
	}
}

// logExcerpt returns log without its access lines (msg=request), at most
// the last 100 of the rest: what a failed case shows of its server.
func logExcerpt(log string) string {
	var kept []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, " msg=request ") {
			kept = append(kept, line)
		}
	}
	if len(kept) > 100 {
		kept = append([]string{fmt.Sprintf("(%d lines before these)", len(kept)-100)}, kept[len(kept)-100:]...)
	}
	return strings.Join(kept, "\n")
}

// slogPair is one key=value of a log/slog text line; a quoted value may
// hold escaped quotes.
var slogPair = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_.]*)=("(?:[^"\\]|\\.)*"|\S*)`)

// slogFields returns the keys and values of one log/slog text line.
func slogFields(line string) map[string]string {
	fields := map[string]string{}
	for _, m := range slogPair.FindAllStringSubmatch(line, -1) {
		v := m[2]
		if strings.HasPrefix(v, `"`) {
			if u, err := strconv.Unquote(v); err == nil {
				v = u
			}
		}
		if _, seen := fields[m[1]]; !seen {
			fields[m[1]] = v
		}
	}
	return fields
}

// checkLoginAudit checks API.md's audit promise for every login that got
// a reply: one audit line (msg=login) with its request id in the log that
// log returns, whose outcome names the reply's code ("success" for a
// 200). The audit line is written before its reply, so it is there at
// once; the check still rereads the log for a while before it calls a
// line missing, and then shows every line that names the request, so
// that a failure says whether the server saw the request at all. It
// returns how many replies it checked and how many of those failed.
func checkLoginAudit(t *testing.T, log func() string, replies []faultReply) (checked, failed int) {
	t.Helper()
	var text string
	var outcomes map[string][]string
	for deadline := time.Now().Add(auditGrace); ; time.Sleep(50 * time.Millisecond) {
		text = log()
		outcomes = loginOutcomes(text)
		if !missingAudit(outcomes, replies) || time.Now().After(deadline) {
			break
		}
	}
	errs := faultErrors{t: t, max: 10}
	for _, r := range replies {
		if r.kind != "login" || r.status == 0 {
			continue
		}
		checked++
		want := r.code
		if r.status == http.StatusOK {
			want = "success"
		}
		switch got := outcomes[r.reqID]; {
		case len(got) == 0:
			errs.errorf("login %s answered %d %q at %s: no audit line (a reply without its audit line) within %v; the log's lines naming it:\n%s",
				r.reqID, r.status, r.code, r.got.Format("15:04:05.000"), auditGrace, linesNaming(text, r.reqID))
		case len(got) > 1:
			errs.errorf("login %s answered %d: %d audit lines %q; want one", r.reqID, r.status, len(got), got)
		case got[0] != want:
			errs.errorf("login %s answered %d %q: audit outcome=%s; want outcome=%s", r.reqID, r.status, r.code, got[0], want)
		}
	}
	errs.done()
	return checked, errs.count
}

// auditGrace is how long checkLoginAudit rereads a log that lacks a
// reply's audit line.
const auditGrace = 3 * time.Second

// loginOutcomes returns the outcomes of the login audit lines in log, by
// request id.
func loginOutcomes(log string) map[string][]string {
	outcomes := map[string][]string{}
	for _, line := range strings.Split(log, "\n") {
		f := slogFields(line)
		if f["msg"] == "login" && f["request_id"] != "" {
			outcomes[f["request_id"]] = append(outcomes[f["request_id"]], f["outcome"])
		}
	}
	return outcomes
}

// missingAudit reports whether a login of replies that got a reply has no
// audit line in outcomes.
func missingAudit(outcomes map[string][]string, replies []faultReply) bool {
	for _, r := range replies {
		if r.kind == "login" && r.status != 0 && len(outcomes[r.reqID]) == 0 {
			return true
		}
	}
	return false
}

// linesNaming returns the lines of log, access lines included, that hold
// the request id id, or "(none)".
func linesNaming(log, id string) string {
	var found []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "request_id="+id+" ") || strings.HasSuffix(line, "request_id="+id) || strings.Contains(line, `"request_id":"`+id+`"`) {
			found = append(found, line)
		}
	}
	if len(found) == 0 {
		return "(none)"
	}
	return strings.Join(found, "\n")
}

// infoAll presents each token of logins (200 replies) to /api/auth/info
// on base, from a few clients at once, and returns the replies, of kind
// "after".
func infoAll(base string, logins []faultReply) []faultReply {
	check := newFaultLoad()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(logins)); i = next.Add(1) - 1 {
				check.info("after", base, logins[i].user, logins[i].token)
			}
		})
	}
	wg.Wait()
	check.close()
	return check.all()
}

// successfulLogins returns the replies that handed out a token.
func successfulLogins(replies []faultReply) []faultReply {
	var out []faultReply
	for _, r := range replies {
		if r.kind == "login" && r.status == http.StatusOK && r.err == nil {
			out = append(out, r)
		}
	}
	return out
}

// buildAuthsvc returns the server's binary, the one TestMain built for
// the package.
func buildAuthsvc(t *testing.T) string {
	t.Helper()
	harness.RequireBinary(t)
	return harness.Binary()
}

// requireOrSkip skips t with the reason, or fails it where the fault
// suite must run (CI, or AUTHSVC_REQUIRE_E2E set): never a silent skip.
func requireOrSkip(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" || os.Getenv("AUTHSVC_REQUIRE_E2E") != "" {
		t.Fatalf(format+" (CI or AUTHSVC_REQUIRE_E2E is set: this case must run)", args...)
	}
	t.Skipf(format, args...)
}

// fileLog returns a function reading the file at path whole.
func fileLog(path string) func() string {
	return func() string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
}

// TestFaultKillServerRedis: a server on the Redis store killed with
// SIGKILL under login and /info load, then started again on the same
// Redis: every token a 200 login handed out answers 200 on the new
// process, and every login that got a reply, whatever its status, has its
// audit line, with the reply's outcome, in the killed process's stderr
// file (API.md, Operations: "Faults" and "Audit").
func TestFaultKillServerRedis(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	bin := buildAuthsvc(t)
	dir := t.TempDir()
	usersPath := harness.WriteTestUsers(t)
	// No eviction (--max-tokens-per-user 0): every token issued must stay
	// live; no throttle in the way of the load's logins.
	args := []string{"serve", "--addr", "127.0.0.1:0", "--users", usersPath, "--store", redisURL,
		"--store-prefix", testservers.UniquePrefix(), "--cost", "4", "--max-tokens-per-user", "0",
		"--login-rate", "1000", "--login-burst", "1000"}
	start := func(name string) *harness.ServerProcess {
		path := filepath.Join(dir, name+".log")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close() // the child has its own descriptor
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{} // nothing from the real environment
		cmd.Stdout, cmd.Stderr = f, f
		return harness.StartServerProcess(t, cmd, fileLog(path))
	}

	first := start("first")
	load := newFaultLoad()
	defer load.close()
	stop := make(chan struct{})
	names := []string{"alice", "bob"}
	wait := load.run(4, stop, func(w int) {
		user := names[w%2]
		if r := load.login(first.Base, user, user+"-pw"); r.status == http.StatusOK && r.err == nil {
			load.info("info", first.Base, user, r.token)
		}
	})
	// Kill once some logins have answered: on a loaded machine under
	// -race the first may take seconds (its hasher's worker starting).
	time.Sleep(1500 * time.Millisecond)
	load.waitLogins(4, harness.HealBound())
	killedAt := time.Now()
	first.Kill()
	close(stop)
	wait()
	replies := load.all()

	second := start("second")
	restarted := time.Since(killedAt)

	// Before the kill, every reply was a success: the load is within the
	// server's capacity, and the tokens are good.
	errs := faultErrors{t: t, max: 10}
	cut := 0
	for _, r := range replies {
		switch {
		case r.status == 0:
			if r.got.Before(killedAt) {
				errs.errorf("%s %s failed %v before the kill, the server still up: %v", r.kind, r.reqID, killedAt.Sub(r.got), r.err)
			}
			cut++
		case r.status != http.StatusOK:
			errs.errorf("%s %s before the kill = %d %q; want 200", r.kind, r.reqID, r.status, r.code)
		}
	}
	errs.done()
	tokens := successfulLogins(replies)
	if len(tokens) == 0 {
		t.Fatalf("no login answered 200 before the kill: %s", faultTally(replies))
	}

	// Every token handed out answers on the new process.
	lost := faultErrors{t: t, max: 10}
	for _, r := range infoAll(second.Base, tokens) {
		if r.status != http.StatusOK {
			lost.errorf("token of %s, issued by the killed server, on the new one: info = %d %q %v; want 200", r.user, r.status, r.code, r.err)
		}
	}
	lost.done()

	// Every login that got a reply has its audit line in the killed
	// server's stderr file.
	audited, unaudited := checkLoginAudit(t, first.Log, replies)
	t.Logf("killed after %s: %s; %d requests cut short by the kill; restarted in %v; %d/%d tokens answer 200 on the new process; %d/%d replied logins have their audit line",
		killedAt.Sub(replies[0].sent).Round(time.Millisecond), faultTally(replies), cut, restarted.Round(time.Millisecond),
		len(tokens)-lost.count, len(tokens), audited-unaudited, audited)
}
