package cli

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/login"
	"authsvc/internal/password"
	"authsvc/internal/password/passwordtest"
	"authsvc/internal/servertest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// wavePassword is every imported user's password in these tests.
const wavePassword = "wave-password-2026"

// writeImportedUsers writes a users file of n users as `user import` leaves
// Django's: pbkdf2_sha256 hashes, here at Django's minimum of 1,000
// iterations so that checking them costs little and the rehashes the most.
func writeImportedUsers(t *testing.T, n int) string {
	t.Helper()
	const salt = "wavesalt2026"
	sum, err := pbkdf2.Key(sha256.New, wavePassword, []byte(salt), 1000, sha256.Size)
	if err != nil {
		t.Fatal(err)
	}
	hash := "pbkdf2_sha256$1000$" + salt + "$" + base64.StdEncoding.EncodeToString(sum)
	list := make([]users.User, n)
	for i := range list {
		list[i] = users.User{Username: waveUser(i), PasswordHash: hash, Groups: []string{}}
	}
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, list); err != nil {
		t.Fatal(err)
	}
	return path
}

func waveUser(i int) string { return fmt.Sprintf("user%04d", i) }

// A waveServer is a server run as serve runs it (runServers), on a users
// file.
type waveServer struct {
	base string
	deps httpapi.Deps
	dir  *usersfile.Directory
	log  *servertest.LineLog
	// stop cancels the server's context and waits for runServers to
	// return: the shutdown serve makes, its last rehashes written.
	stop func()
}

// startWaveServer starts a server on the users file at path, with the
// hash policy policy, its login guard set by tune before it serves.
func startWaveServer(t *testing.T, path string, policy password.HashPolicy, tune func(*login.Guard)) *waveServer {
	t.Helper()
	cfg := testConfig(path)
	cfg.addr = "127.0.0.1:0"
	cfg.hashPolicy = policy
	log := servertest.NewLineLog()
	deps, closeDeps, err := buildDeps(cfg, slog.New(slog.NewTextHandler(log, nil)))
	t.Cleanup(closeDeps)
	if err != nil {
		t.Fatal(err)
	}
	tune(deps.Guard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServers(ctx, cfg, deps) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("runServers = %v; want nil", err)
			}
		})
	}
	t.Cleanup(stop) // before closeDeps
	m := log.WaitFor(t, regexp.MustCompile(`msg=listening addr=(\S+)`))
	return &waveServer{base: "http://" + m[1], deps: deps, dir: deps.Users.(*usersfile.Directory), log: log, stop: stop}
}

// loginAll logs users 0 to n-1 in from 8 clients at once (a 503, the
// hashers' queue full, is tried again) and returns their tokens.
func loginAll(t *testing.T, base string, n int) []string {
	t.Helper()
	tokens := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				var err error
				if tokens[i], err = waveLogin(base, waveUser(i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	return tokens
}

// waveLogin logs username in with wavePassword, trying again after a 503,
// and returns the token.
func waveLogin(base, username string) (string, error) {
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, username, wavePassword)
	for {
		resp, err := http.Post(base+"/api/auth/login/", "application/json", strings.NewReader(body))
		if err != nil {
			return "", err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			return "", err
		case resp.StatusCode == http.StatusServiceUnavailable:
			time.Sleep(10 * time.Millisecond)
			continue
		case resp.StatusCode != http.StatusOK:
			return "", fmt.Errorf("login of %s = %d %s; want 200", username, resp.StatusCode, data)
		}
		var reply httpapi.LoginReply
		if err := json.Unmarshal(data, &reply); err != nil {
			return "", fmt.Errorf("login of %s: %v", username, err)
		}
		return reply.Token, nil
	}
}

// metricsOf returns m's metrics as /metrics serves them.
func metricsOf(m *httpapi.Metrics) string {
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	return w.Body.String()
}

// TestRehashWaveBatched (issue 20, point 3): a wave of first logins of
// imported users rewrites the users file once per batch of rehashes, not
// once per login; afterwards every one of them has the policy's hash, logs
// in with the same password, and keeps the token of that first login. The
// policy is bcrypt at the test cost: argon2id's 19 MiB, twice per user,
// would take a minute under -race (TestRehashWrittenAtShutdown has it).
func TestRehashWaveBatched(t *testing.T) {
	t.Parallel()
	const n, batch = 200, 50
	path := writeImportedUsers(t, n)
	policy := testConfig(path).hashPolicy
	srv := startWaveServer(t, path, policy, func(g *login.Guard) {
		g.RehashDelay = time.Hour // only full batches, and the flush below, write
		g.RehashBatch = batch
	})
	tokens := loginAll(t, srv.base, n)
	srv.deps.Guard.FlushRehashes(context.Background())
	if got, most := srv.dir.Writes(), int64(n/batch+1); got < 1 || got > most {
		t.Errorf("users file writes after %d first logins = %d; want 1 to %d (a write per batch of %d, and the flush)", n, got, most, batch)
	}
	stored := mustReadUsers(t, path)
	for i := range n {
		h, err := password.ParseHash(stored[waveUser(i)].PasswordHash)
		if err != nil || policy.NeedsRehash(h) {
			t.Errorf("%s's hash after the first login = %v, %v; want one under the policy", waveUser(i), h, err)
		}
	}
	metrics := metricsOf(srv.deps.Metrics)
	if want := fmt.Sprintf(`authsvc_rehashes_total{result="ok"} %d`, n); !strings.Contains(metrics, want+"\n") {
		t.Errorf("/metrics lacks %s", want)
	}
	if got := strings.Count(srv.log.String(), `msg="rehashed on login"`); got != n {
		t.Errorf(`"rehashed on login" log lines = %d; want %d, one per user`, got, n)
	}
	writes := srv.dir.Writes()
	loginAll(t, srv.base, n) // the new hashes take the same password
	if got := srv.dir.Writes(); got != writes {
		t.Errorf("users file writes after every user's second login = %d; want %d, none more", got, writes)
	}
	for i := 0; i < n; i += 37 {
		if code, body := servertest.GetInfo(t, srv.base, tokens[i], ""); code != http.StatusOK {
			t.Errorf("info with %s's token from before the rehash = %d %s; want 200", waveUser(i), code, body)
		}
	}
}

// TestRehashWrittenAtShutdown: the rehashes still waiting when the server
// is told to stop are written before it returns.
func TestRehashWrittenAtShutdown(t *testing.T) {
	t.Parallel()
	path := writeImportedUsers(t, 3)
	imported := mustReadUsers(t, path)[waveUser(0)].PasswordHash
	srv := startWaveServer(t, path, password.DefaultHashPolicy(), func(g *login.Guard) { g.RehashDelay = time.Hour })
	loginAll(t, srv.base, 2)
	if got := mustReadUsers(t, path)[waveUser(0)].PasswordHash; got != imported || srv.dir.Writes() != 0 {
		t.Fatalf("users file written before the shutdown (%d writes); want the rehashes still waiting", srv.dir.Writes())
	}
	srv.stop() // as SIGTERM does: serve's context done
	stored := mustReadUsers(t, path)
	for i, want := range []string{password.SchemeArgon2id, password.SchemeArgon2id, password.SchemePBKDF2} {
		if h, err := password.ParseHash(stored[waveUser(i)].PasswordHash); err != nil || h.Scheme() != want {
			t.Errorf("%s's hash once the server stopped = %v, %v; want %s", waveUser(i), h, err, want)
		}
	}
	if got := srv.dir.Writes(); got != 1 {
		t.Errorf("users file writes at shutdown = %d; want 1", got)
	}
	if got := strings.Count(srv.log.String(), `msg="rehashed on login"`); got != 2 {
		t.Errorf(`"rehashed on login" log lines = %d; want 2:\n%s`, got, srv.log)
	}
}

// A stallingDirectory is the real users file whose UpdateAll waits, the
// first time, until released: a write that cannot keep up.
type stallingDirectory struct {
	*usersfile.Directory
	entered chan struct{} // closed when the first UpdateAll starts
	release chan struct{} // closed by the test: UpdateAll goes on
	once    sync.Once
}

func (d *stallingDirectory) UpdateAll(ctx context.Context, changes map[string]func(*users.User) error, opts ...users.WriteOption) (map[string]error, error) {
	d.once.Do(func() {
		close(d.entered)
		<-d.release
	})
	return d.Directory.UpdateAll(ctx, changes, opts...)
}

// TestRehashQueueBounded: while a write is slow, the rehashes waiting are
// bounded (four batches); one more is dropped (counted skipped, logged
// once, no hash in the log) and its user keeps the old hash, to be
// rehashed at a later login; the rest are written.
func TestRehashQueueBounded(t *testing.T) {
	t.Parallel()
	const batch, n = 2, 2 + 4*2 + 1
	ctx := context.Background()
	old := passwordtest.MustHash(t, "pw", servertest.TestCost) // bcrypt at the test cost, under a policy one above it
	list := make([]users.User, n)
	for i := range list {
		list[i] = users.User{Username: waveUser(i), PasswordHash: old, Groups: []string{}}
	}
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, list); err != nil {
		t.Fatal(err)
	}
	file, err := usersfile.Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	dir := &stallingDirectory{Directory: file, entered: make(chan struct{}), release: make(chan struct{})}
	log := servertest.NewLineLog()
	cfg := testConfig(path)
	cfg.hashPolicy.BcryptCost = servertest.TestCost + 1
	d, closeDeps, err := buildDeps(cfg, slog.New(slog.NewTextHandler(log, nil)), withDirectory(dir))
	t.Cleanup(closeDeps)
	if err != nil {
		t.Fatal(err)
	}
	g := d.Guard
	g.RehashDelay, g.RehashBatch = time.Hour, batch
	rehash := func(i int) {
		u, err := dir.Lookup(ctx, waveUser(i))
		if err != nil {
			t.Fatal(err)
		}
		g.Rehash(ctx, dir, u, "pw")
	}
	rehash(0)
	rehash(1) // a full batch: its write starts, and stalls
	select {
	case <-dir.entered:
	case <-time.After(10 * time.Second):
		close(dir.release)
		t.Fatalf("no UpdateAll 10 s after a full batch of %d rehashes was queued", batch)
	}
	for i := 2; i < n; i++ {
		rehash(i) // the last one finds four batches waiting
	}
	close(dir.release)
	g.FlushRehashes(ctx)
	stored := mustReadUsers(t, path)
	for i := range n {
		h, err := password.ParseHash(stored[waveUser(i)].PasswordHash)
		want := servertest.TestCost + 1
		if i == n-1 {
			want = servertest.TestCost // dropped
		}
		if err != nil || h.Cost != want {
			t.Errorf("%s's hash after the writes = %v, %v; want bcrypt at cost %d", waveUser(i), h, err, want)
		}
	}
	metrics := metricsOf(d.Metrics)
	for _, want := range []string{`authsvc_rehashes_total{result="ok"} 10`, `authsvc_rehashes_total{result="skipped"} 1`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	logged := log.String()
	if !regexp.MustCompile(`level=WARN msg="rehashes on login dropped: .*" dropped=1`).MatchString(logged) {
		t.Errorf("log lacks the line telling of the dropped rehash:\n%s", logged)
	}
	if strings.Contains(logged, "$2a$") || strings.Contains(logged, `"pw"`) {
		t.Errorf("log holds a hash or the password:\n%s", logged)
	}
}
