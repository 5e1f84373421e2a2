package cli

// Benchmarks and measurement helpers for `make bench` (bench/run.sh). Nothing
// here asserts a timing: the benchmarks report. TestBenchServe is make
// bench's in-process server; run as a test, it checks that server.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/login"
	"authsvc/internal/throttle"
	"authsvc/internal/tick"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"

	"golang.org/x/crypto/bcrypt"
)

// benchTokensPerUser spreads bench sessions over users as a server at the
// default --max-tokens-per-user (100) would hold them: N tokens, N/100 users.
const benchTokensPerUser = 100

// benchUserSource loads a users file holding one user, "bench", in dir.
func benchUserSource(tb testing.TB, dir string, log *slog.Logger) *usersfile.Directory {
	tb.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("bench-pw"), bcrypt.MinCost)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, "users.json")
	u := users.User{Username: "bench", PasswordHash: string(hash), Name: "Bench", Email: "bench@example.com", Groups: []string{"bench"}}
	if err := usersfile.Write(path, []users.User{u}); err != nil {
		tb.Fatal(err)
	}
	users, err := usersfile.Open(path, log)
	if err != nil {
		tb.Fatal(err)
	}
	return users
}

// benchUsernames returns the synthetic owners of n bench sessions, made
// before a heap measurement starts: their strings belong to the users
// directory, not to the sessions. There are enough of them that no user
// holds more than benchTokensPerUser of the n, or the store would evict.
func benchUsernames(n int) []string {
	names := make([]string, max(1, (n+benchTokensPerUser-1)/benchTokensPerUser))
	for i := range names {
		names[i] = fmt.Sprintf("user%07d", i)
	}
	return names
}

// benchUserAgent is the User-Agent of a bench session's i-th login: one of
// a few clients in common use, as a real population of sessions shows them.
func benchUserAgent(i int) string {
	agents := [...]string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
		"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
		"okhttp/4.12.0",
		"python-requests/2.32.3",
		"curl/8.5.0",
	}
	return agents[i%len(agents)]
}

// benchSession is the session the login handler would store for the i-th
// login of username: with a session id, the client address (one per user)
// and a User-Agent, each string a fresh copy as every request brings its
// own, so that the heap shows whether the store shares equal strings.
func benchSession(username string, user, i int, expires time.Time) tokens.Session {
	ip := netip.AddrFrom4([4]byte{10, byte(user >> 16), byte(user >> 8), byte(user)})
	return tokens.Session{Username: username, Stamp: uint64(user), ExpiresAt: expires, ID: tokens.NewSessionID(),
		Client: throttle.ClientKey(ip), UserAgent: login.CutUTF8(strings.Clone(benchUserAgent(i)), login.MaxUserAgent)}
}

// fillStore issues n sessions round-robin over names, the way the login
// handler issues them: a fresh token's digest, the session's records, a
// 24 h expiry, the default per-user limit.
func fillStore(tb testing.TB, s tokens.Store, names []string, n int, now time.Time) {
	tb.Helper()
	ctx := context.Background()
	expires := now.Add(24 * time.Hour).Truncate(time.Second).UTC()
	for i := range n {
		_, digest := tokens.New()
		user := i % len(names)
		if _, err := s.Issue(ctx, digest, benchSession(names[user], user, i/len(names), expires), benchTokensPerUser, now); err != nil {
			tb.Fatal(err)
		}
	}
}

// issueBenchToken issues a live token for the user "bench" and returns it.
func issueBenchToken(tb testing.TB, s tokens.Store, users *usersfile.Directory, now time.Time) string {
	tb.Helper()
	token, digest := tokens.New()
	u, _ := users.Lookup(context.Background(), "bench")
	sess := benchSession(u.Username(), 0, 0, now.Add(24*time.Hour).Truncate(time.Second).UTC())
	sess.Stamp = u.SessionGeneration()
	if _, err := s.Issue(context.Background(), digest, sess, benchTokensPerUser, now); err != nil {
		tb.Fatal(err)
	}
	return token
}

func countLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// benchDeps is Deps as serve builds them (metrics included, every
// setting at its default, the throttle too), but for the per-user limit
// the bench's sessions are spread by. logTo is where the log goes; nil
// drops every log line before it is formatted, to measure what the access
// log costs. A real destination (stderr) is written through newLogWriter,
// batched and flushed every logFlushInterval as serve writes its log, and
// closed (flushed) when tb ends; io.Discard is used as is, so that the
// micro-benchmarks and the allocation census measure the handler. Either
// is given to the access log as its output, as serve gives it.
func benchDeps(tb testing.TB, users *usersfile.Directory, store tokens.Store, logTo io.Writer) httpapi.Deps {
	log := slog.New(slog.DiscardHandler)
	opts := []depsOption{withDirectory(users), withStore(store)}
	switch logTo {
	case nil:
	case io.Discard:
		log = httpapi.NewLogger("text", logTo)
		opts = append(opts, withLogOutput(logTo))
	default:
		w := newLogWriter(logTo, logFlushInterval)
		tb.Cleanup(func() { w.Close() })
		log = httpapi.NewLogger("text", w)
		opts = append(opts, withLogOutput(w))
	}
	cfg := defaultServeConfig()
	cfg.maxPerUser = benchTokensPerUser
	d, closeDeps, err := buildDeps(cfg, log, opts...)
	tb.Cleanup(closeDeps)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

const benchAuthorization = "Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"

// BenchmarkParseAuthorization: the authorization header to a token digest
// (scheme, separator, hex decode, SHA-256).
func BenchmarkParseAuthorization(b *testing.B) {
	h := http.Header{"Authorization": {benchAuthorization}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := tokens.ParseAuthorization(h); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDigestLookup: a token's digest and its memory-store look-up, with
// 1k and 1M live sessions.
func BenchmarkDigestLookup(b *testing.B) {
	for _, n := range []int{1000, 1_000_000} {
		b.Run("tokens="+countLabel(n), func(b *testing.B) {
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			users := benchUserSource(b, b.TempDir(), log)
			store := tokens.NewMemoryStore()
			now := time.Now()
			fillStore(b, store, benchUsernames(n-1), n-1, now)
			token := issueBenchToken(b, store, users, now)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				d, err := tokens.DigestOf(token)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := store.Lookup(ctx, d, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// discardResponse is a reusable ResponseWriter that keeps nothing: the
// allocations left are the handler's own.
type discardResponse struct {
	h      http.Header
	status int
}

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(status int)      { d.status = status }

// BenchmarkInfoHandler: GET /api/auth/info through the whole handler as
// serve builds it (request id, metrics, access log formatted to io.Discard,
// routing, method check, header parse, digest, memory-store look-up, user
// check, reply). The request is built once and
// reused: building one per operation would only count httptest's work.
//
//	httptest: an httptest.ResponseRecorder per operation, as tests use it;
//	discard: a reused ResponseWriter, so allocs/op is the handler's own;
//	discard-nolog: the same with a logger that drops every line before
//	formatting it: the difference is the access log's cost.
func BenchmarkInfoHandler(b *testing.B) {
	users, store, now := benchInfoSetup(b)
	req := benchInfoRequest("Token " + issueBenchToken(b, store, users, now))

	logged := httpapi.NewServer(benchDeps(b, users, store, io.Discard))
	unlogged := httpapi.NewServer(benchDeps(b, users, store, nil))

	b.Run("httptest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			logged.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	})
	b.Run("discard", func(b *testing.B) { benchServe(b, logged, req, http.StatusOK) })
	b.Run("discard-nolog", func(b *testing.B) { benchServe(b, unlogged, req, http.StatusOK) })
}

// benchInfoSetup is the /info benchmarks' setup: the users file of
// "bench", and a memory store holding 999 sessions of other users.
func benchInfoSetup(b *testing.B) (*usersfile.Directory, tokens.Store, time.Time) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	users := benchUserSource(b, b.TempDir(), log)
	store := tokens.NewMemoryStore()
	now := time.Now()
	fillStore(b, store, benchUsernames(999), 999, now)
	return users, store, now
}

// benchInfoRequest is GET /api/auth/info with Authorization auth, from a fixed
// client address; the benchmarks reuse it.
func benchInfoRequest(auth string) *http.Request {
	req := httptest.NewRequest("GET", "/api/auth/info", nil)
	req.Header.Set("Authorization", auth)
	req.RemoteAddr = "192.0.2.1:40000"
	return req
}

// benchServe serves req with h b.N times into a reused ResponseWriter, so
// that allocs/op is the handler's own, and fails unless every reply has
// status want.
func benchServe(b *testing.B, h http.Handler, req *http.Request, want int) {
	w := &discardResponse{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, req)
		if w.status != want {
			b.Fatalf("status %d; want %d", w.status, want)
		}
	}
}

// benchPAT adds a personal access token with the info scope to the user
// "bench" of dir, as `authsvc token create` does, and returns it.
func benchPAT(tb testing.TB, dir users.Directory, now time.Time) string {
	tb.Helper()
	tok, t := users.MintAccessToken("bench", []string{users.ScopeInfo}, now, now.Add(users.DefaultAccessTokenTTL))
	if err := users.CreateAccessToken(context.Background(), dir, "bench", t); err != nil {
		tb.Fatal(err)
	}
	return tok
}

// BenchmarkInfoHandlerPAT: BenchmarkInfoHandler's discard cases with a
// personal access token (Bearer, scope info) instead of a session: the
// checksum, the digest, the directory's look-up by digest, the scope, the
// use recorded. Issue 30 wants it to cost about what a session costs (make
// bench: /info with a personal access token ÷ with a session ≥ 0.95).
func BenchmarkInfoHandlerPAT(b *testing.B) {
	users, store, now := benchInfoSetup(b)
	req := benchInfoRequest("Bearer " + benchPAT(b, users, now))

	b.Run("discard", func(b *testing.B) {
		benchServe(b, httpapi.NewServer(benchDeps(b, users, store, io.Discard)), req, http.StatusOK)
	})
	b.Run("discard-nolog", func(b *testing.B) {
		benchServe(b, httpapi.NewServer(benchDeps(b, users, store, nil)), req, http.StatusOK)
	})
}

// BenchmarkInfoJunkPAT: /info with a made-up personal access token whose
// checksum fails (a valid token with its last character changed), through
// the whole handler as BenchmarkInfoHandler's discard case: refused with
// 401 before any store or directory is read.
func BenchmarkInfoJunkPAT(b *testing.B) {
	users, store, _ := benchInfoSetup(b)
	junk := benchJunkPAT()
	if tokens.ValidPAT(junk) {
		b.Fatalf("ValidPAT(%q) = true; want a checksum that fails", junk)
	}
	req := benchInfoRequest("Bearer " + junk)
	benchServe(b, httpapi.NewServer(benchDeps(b, users, store, io.Discard)), req, http.StatusUnauthorized)
}

// benchJunkPAT returns a fresh personal access token with its last checksum
// character changed: the form of a token, a checksum that fails.
func benchJunkPAT() string {
	tok, _ := tokens.NewPAT()
	last := byte('0')
	if tok[len(tok)-1] == '0' {
		last = '1'
	}
	return tok[:len(tok)-1] + string(last)
}

// BenchmarkHeapPerToken reports the live heap a memory store holds per
// session (B/token), filled as the login handler fills it: N tokens over
// N/100 users at the default per-user limit of 100, 24 h expiry, each with
// its records (id, client, User-Agent, times). Run it with
// -benchtime 1x.
func BenchmarkHeapPerToken(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run("tokens="+countLabel(n), func(b *testing.B) {
			names := benchUsernames(n)
			now := time.Now()
			var perToken float64
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				store := tokens.NewMemoryStore()
				fillStore(b, store, names, n, now)
				runtime.GC()
				runtime.ReadMemStats(&after)
				if got, _ := store.Len(); got != n {
					b.Fatalf("store holds %d sessions; want %d", got, n)
				}
				perToken = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
				runtime.KeepAlive(store)
			}
			b.ReportMetric(perToken, "B/token")
		})
	}
}

// A benchServer is make bench's in-process server: the real handler and
// memory store, preloaded with live sessions (authsvc has no preload hook,
// and logging in a million times at bcrypt cost 12 would take a day and a
// half), listening on 127.0.0.1.
type benchServer struct {
	addr  string // host:port
	token string // a live token of the user "bench"
	store *tokens.MemoryStore

	done     chan struct{} // closed when the server stops serving
	serveErr error         // why, once done is closed
}

// startBenchServer starts a benchServer holding n live sessions, its log
// written to logTo as benchDeps writes it; it stops when tb ends. It checks
// what make bench relies on: the store holds n sessions, and the token it
// hands out gets 200 from /api/auth/info over the listening socket.
func startBenchServer(tb testing.TB, n int, logTo io.Writer) *benchServer {
	tb.Helper()
	users := benchUserSource(tb, tb.TempDir(), slog.New(slog.DiscardHandler))
	store := tokens.NewMemoryStore()
	now := time.Now()
	fillStore(tb, store, benchUsernames(n-1), n-1, now)
	token := issueBenchToken(tb, store, users, now)
	if got, _ := store.Len(); got != n {
		tb.Fatalf("bench store holds %d sessions; want %d", got, n)
	}
	deps := benchDeps(tb, users, store, logTo)
	srv := newHTTPServer(deps.Log, httpapi.NewServer(deps))
	runtime.GC()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &benchServer{addr: ln.Addr().String(), token: token, store: store, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.serveErr = srv.Serve(ln)
	}()
	ctx, stop := context.WithCancel(context.Background())
	go tick.Every(ctx, time.Minute, func(now time.Time) { store.Sweep(now) }) // as serve runs it with a 24h TTL
	tb.Cleanup(func() {
		stop()
		srv.Close()
		<-s.done
	})
	if status, body := s.info(tb, token); status != http.StatusOK || !strings.Contains(body, `"username":"bench"`) {
		tb.Fatalf("GET /api/auth/info with the bench token = %d %s; want 200 for the user bench", status, body)
	}
	return s
}

// info sends GET /api/auth/info with token to s and returns the status and body.
func (s *benchServer) info(tb testing.TB, token string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest("GET", "http://"+s.addr+"/api/auth/info", nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Token "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// publish writes "ADDR TOKEN" to the file out, atomically: make bench
// waits for the file and reads it whole.
func (s *benchServer) publish(tb testing.TB, out string) {
	tb.Helper()
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, []byte(s.addr+" "+s.token+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, out); err != nil {
		tb.Fatal(err)
	}
}

// TestBenchServe is make bench's in-process server (benchServer), with
// $AUTHSVC_BENCH_TOKENS live sessions (default 1000). With
// $AUTHSVC_BENCH_SERVE=FILE it writes "ADDR TOKEN" to FILE once it serves
// and runs until SIGTERM or SIGINT, or for at most $AUTHSVC_BENCH_SERVE_FOR
// (default 9m). $AUTHSVC_BENCH_ACCESS_LOG=off drops every log line before
// it is formatted, to measure what the access log costs; otherwise the log
// goes to stderr through newLogWriter, as authsvc's does.
//
// Without $AUTHSVC_BENCH_SERVE it checks the server make bench would get:
// the file it publishes names an address that serves and a token of
// "bench" that the server takes, and no other token.
func TestBenchServe(t *testing.T) {
	// Not parallel: bench/run.sh runs it alone, as the server it measures.
	out := os.Getenv("AUTHSVC_BENCH_SERVE")
	if out == "" {
		s := startBenchServer(t, 1000, io.Discard)
		out = filepath.Join(t.TempDir(), "inproc.addr")
		s.publish(t, out)
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(data))
		if len(f) != 2 || f[0] != s.addr || !strings.HasSuffix(string(data), "\n") {
			t.Fatalf("published %q; want %q", data, s.addr+" TOKEN\n")
		}
		if status, body := s.info(t, f[1]); status != http.StatusOK || !strings.HasPrefix(body, `{"username":"bench",`) {
			t.Errorf("GET /api/auth/info with the published token = %d %s; want 200 for the user bench", status, body)
		}
		if status, _ := s.info(t, strings.Repeat("0", tokens.Length)); status != http.StatusUnauthorized {
			t.Errorf("GET /api/auth/info with a token never issued = %d; want 401", status)
		}
		if n, _ := s.store.Len(); n != 1000 {
			t.Errorf("bench store holds %d sessions after serving; want 1000", n)
		}
		return
	}
	n := 1000
	if v := os.Getenv("AUTHSVC_BENCH_TOKENS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("AUTHSVC_BENCH_TOKENS=%q: want a positive integer", v)
		}
	}
	life := 9 * time.Minute
	if v := os.Getenv("AUTHSVC_BENCH_SERVE_FOR"); v != "" {
		var err error
		if life, err = time.ParseDuration(v); err != nil {
			t.Fatalf("AUTHSVC_BENCH_SERVE_FOR=%q: %v", v, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var logTo io.Writer = os.Stderr
	if os.Getenv("AUTHSVC_BENCH_ACCESS_LOG") == "off" {
		logTo = nil
	}
	s := startBenchServer(t, n, logTo)
	s.publish(t, out)
	select {
	case <-ctx.Done():
	case <-time.After(life):
	case <-s.done:
		t.Fatalf("bench server stopped serving: %v", s.serveErr)
	}
}

// BenchmarkInfoAllocSites is make bench's allocation census of GET
// /api/auth/info: with every allocation sampled, it serves b.N requests
// through the whole handler (as BenchmarkInfoHandler/discard does) and
// prints one line per allocation site on stdout: "ALLOC <per request>
// <product line> <allocating function>". The product line is the innermost
// frame in the module's non-test files (bench/ is tooling), named by its
// path in the module; the allocating function is the innermost frame
// outside the runtime. Run it with -benchtime NNNx (make bench: 20000x).
func BenchmarkInfoAllocSites(b *testing.B) {
	users := benchUserSource(b, b.TempDir(), slog.New(slog.DiscardHandler))
	store := tokens.NewMemoryStore()
	now := time.Now()
	fillStore(b, store, benchUsernames(999), 999, now)
	token := issueBenchToken(b, store, users, now)
	h := httpapi.NewServer(benchDeps(b, users, store, io.Discard))
	req := httptest.NewRequest("GET", "/api/auth/info", nil)
	req.Header.Set("Authorization", "Token "+token)
	req.RemoteAddr = "192.0.2.1:40000"
	w := &discardResponse{h: make(http.Header)}
	serve := func(requests int) {
		for range requests {
			clear(w.h)
			w.status = 0
			h.ServeHTTP(w, req)
			if w.status != http.StatusOK {
				b.Fatalf("GET /api/auth/info = %d; want 200", w.status)
			}
		}
	}
	serve(1000) // warm up: lazily built state is not per request

	_, self, _, _ := runtime.Caller(0)
	moduleDir := filepath.Join(filepath.Dir(self), "..", "..") + string(filepath.Separator)
	const loop = "authsvc/internal/cli.BenchmarkInfoAllocSites.func"

	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	snapshot := func() map[[2]string]int64 {
		runtime.GC() // the profile is published at the end of a GC cycle
		runtime.GC()
		var recs []runtime.MemProfileRecord
		for {
			k, _ := runtime.MemProfile(nil, true)
			recs = make([]runtime.MemProfileRecord, k+64)
			if k, ok := runtime.MemProfile(recs, true); ok {
				recs = recs[:k]
				break
			}
		}
		sites := make(map[[2]string]int64)
		for _, rec := range recs {
			var site, origin string
			inLoop := false
			frames := runtime.CallersFrames(rec.Stack())
			for {
				f, more := frames.Next()
				switch {
				case strings.HasPrefix(f.Function, "runtime."):
				case site == "":
					site = f.Function
				}
				if rel, ok := strings.CutPrefix(f.File, moduleDir); ok && origin == "" && !strings.HasSuffix(rel, "_test.go") && !strings.HasPrefix(rel, "bench"+string(filepath.Separator)) {
					origin = fmt.Sprintf("%s:%d", filepath.ToSlash(rel), f.Line)
				}
				if strings.HasPrefix(f.Function, loop) {
					inLoop = true
				}
				if !more {
					break
				}
			}
			if inLoop && rec.AllocObjects > 0 {
				if origin == "" {
					origin = "(outside the product)"
				}
				sites[[2]string{origin, site}] += rec.AllocObjects
			}
		}
		return sites
	}
	before := snapshot()
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		serve(1)
		n++
	}
	after := snapshot()
	for k, c := range after {
		if d := c - before[k]; d > 0 {
			fmt.Printf("ALLOC\t%.3f\t%s\t%s\n", float64(d)/float64(n), k[0], k[1])
		}
	}
}
