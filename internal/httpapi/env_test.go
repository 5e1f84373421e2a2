package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/login"
	"authsvc/internal/password"
	"authsvc/internal/secret"
	"authsvc/internal/servertest"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// TestMain lets the test binary be the hasher pool's worker, as the server
// binary is: every test env starts "os.Executable() hash-worker".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == password.WorkerCommand {
		if err := password.RunWorker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "authsvc: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Settings serve gives the handlers that a test never varies (internal/cli).
const (
	maxHeldRefusals = 4096             // the tarpit's bound
	shutdownGrace   = 10 * time.Second // how long the rehashes waiting at the end may take
)

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testEnv is a server on the real handler, the real memory store and a
// real users file, wired as serve wires it.
type testEnv struct {
	t         testing.TB
	usersPath string
	users     *usersfile.Directory // the users file, whatever deps.Users wraps it in
	store     *tokens.MemoryStore  // nil when envConfig.store replaced it
	clock     *testClock
	handler   http.Handler
	deps      httpapi.Deps
	keys      secret.Keyring // seals the second factors
	// introspector is a personal access token of the introspect scope,
	// minted by the first introspect call.
	introspector string
}

// envConfig is what a test env is built from: the serve settings a
// handler test varies, under internal/cli's names for them, and the
// parts a test may put in place of the real ones.
type envConfig struct {
	tokenTTL, tokenIdle          time.Duration
	maxPerUser                   int
	throttle                     throttle.Config
	passwordSlots, passwordQueue int
	passwordWait, passwordIdle   time.Duration
	refusalDelay                 time.Duration
	passwordMinLength            int
	hashPolicy                   password.HashPolicy
	corsOrigins                  []string
	mfaIssuer                    string
	resetFloor                   time.Duration // a reset confirm's least time
	requireMFA                   users.MFAPolicy

	users     []users.User                               // the users file's; testUsers when nil
	keys      secret.Keyring                             // seals second factors; a new key when it has none
	store     tokens.Store                               // keeps the tokens instead of a memory store
	directory func(*usersfile.Directory) users.Directory // serves the users instead of the users file
	realTime  bool                                       // the handlers read time.Now, not the env's clock
}

// testConfig is serve's default configuration for a test: generous
// per-address limits (every test request comes from 192.0.2.1), two
// hasher slots and refusals answered at once.
func testConfig() envConfig {
	th := throttle.DefaultConfig()
	th.AddrRate, th.AddrBurst = 1000, 1000
	policy := password.DefaultHashPolicy()
	// New hashes as cheap as testUsers' own: no rehash on login, fast password changes.
	policy.Scheme, policy.BcryptCost = password.SchemeBcrypt, servertest.TestCost
	return envConfig{
		tokenTTL:          24 * time.Hour,
		maxPerUser:        100,
		throttle:          th,
		passwordSlots:     2,
		passwordQueue:     8,
		passwordWait:      2 * time.Second,
		passwordIdle:      30 * time.Second,
		passwordMinLength: password.DefaultMinLength,
		hashPolicy:        policy,
		mfaIssuer:         "authsvc",
		resetFloor:        20 * time.Millisecond,
	}
}

func newTestEnv(t *testing.T, policy httpapi.TokenPolicy) *testEnv {
	t.Helper()
	return newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL, c.maxPerUser = policy.TTL, policy.MaxPerUser
	})
}

// newTestEnvConfig is a server wired as serve wires it (internal/cli's
// buildDeps), from testConfig with change applied, on testUsers and the
// test's clock. A nil log discards its lines.
func newTestEnvConfig(t testing.TB, log *slog.Logger, change func(c *envConfig)) *testEnv {
	t.Helper()
	cfg := testConfig()
	if change != nil {
		change(&cfg)
	}
	if cfg.users == nil {
		cfg.users = servertest.TestUsers(t)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &testEnv{
		t:         t,
		usersPath: filepath.Join(t.TempDir(), "users.json"),
		clock:     &testClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)},
		keys:      cfg.keys,
	}
	if err := usersfile.Write(e.usersPath, cfg.users); err != nil {
		t.Fatal(err)
	}
	if e.keys.Current().IsZero() {
		key, err := secret.Generate()
		if err != nil {
			t.Fatal(err)
		}
		e.keys = secret.NewKeyring(key)
	}
	var err error
	if e.users, err = usersfile.Open(e.usersPath, log); err != nil {
		t.Fatal(err)
	}
	e.deps = e.newDeps(cfg, log)
	e.handler = httpapi.NewServer(e.deps)
	return e
}

// newDeps makes the server's dependencies from cfg as buildDeps does, on
// the env's users file, with its keys and its clock; the hasher's workers
// and the rehashes still waiting end with the test.
func (e *testEnv) newDeps(cfg envConfig, log *slog.Logger) httpapi.Deps {
	t := e.t
	d := httpapi.Deps{
		Log:           log,
		Now:           e.clock.Now,
		Users:         e.users,
		Store:         cfg.store,
		Policy:        httpapi.TokenPolicy{TTL: cfg.tokenTTL, Idle: cfg.tokenIdle, MaxPerUser: cfg.maxPerUser},
		MetricsOnMain: true,
		CORSOrigins:   cfg.corsOrigins,
		MFA:           httpapi.MFAConfig{Issuer: cfg.mfaIssuer, Keys: e.keys},
		Reset:         httpapi.ResetPolicy{Floor: cfg.resetFloor},
		RequireMFA:    cfg.requireMFA,
		LogFormat:     "text",
		Passwords: httpapi.PasswordSetter{
			Policy: password.Policy{MinLength: cfg.passwordMinLength},
			Hash: func(password string) (string, error) {
				return cfg.hashPolicy.Hash([]byte(password))
			},
		},
	}
	if cfg.realTime {
		d.Now = time.Now
	}
	if cfg.directory != nil {
		d.Users = cfg.directory(e.users)
	}
	if d.Store == nil {
		e.store = tokens.NewMemoryStore()
		d.Store = e.store
	}
	adm := login.NewAdmission(cfg.passwordSlots, cfg.passwordQueue, cfg.passwordWait)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	hasher := password.NewPool(cfg.passwordSlots, exe, cfg.passwordIdle, log)
	t.Cleanup(func() { hasher.Close() })
	d.Guard = &login.Guard{
		Throttle:  throttle.NewMemory(cfg.throttle),
		Admission: adm,
		Hasher:    hasher,
		Tarpit:    login.NewTarpit(cfg.refusalDelay, maxHeldRefusals),
		Log:       log,
		Now:       d.Now,
		Policy:    cfg.hashPolicy,
	}
	d.Metrics = httpapi.NewMetrics(httpapi.MetricsSources{Users: d.Users, Store: d.Store, Admission: adm})
	d.AccessTokenUses = httpapi.NewAccessTokenUses(d.Users, log) // flushed by the tests that need it
	d.Guard.Metrics = d.Metrics
	// Cleaned up first, before the hasher stops, as serve closes them.
	guard := d.Guard
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		guard.CloseRehashes(ctx)
	})
	return d
}

// do sends a request through the handler; header is "Name: value" lines.
func (e *testEnv) do(method, path, body string, header ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	for _, h := range header {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Add(name, value)
	}
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, req)
	return w
}

// login returns a fresh token for username, failing the test otherwise.
func (e *testEnv) login(username string) string {
	e.t.Helper()
	w := e.do("POST", "/api/auth/login/", `{"username":"`+username+`","password":"`+username+`-pw"}`, "Content-Type: application/json")
	if w.Code != http.StatusOK {
		e.t.Fatalf("login(%s) = %d %s; want 200", username, w.Code, w.Body)
	}
	var reply struct{ Token string }
	if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
		e.t.Fatal(err)
	}
	return reply.Token
}

// errorCode returns the code of an error body, failing unless it is one.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q; want application/json", ct)
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("error body %q is not JSON: %v", w.Body, err)
	}
	detail, _ := body["detail"].(string)
	code, _ := body["code"].(string)
	if detail == "" || code == "" || len(body) != 2 {
		t.Errorf("error body = %s; want {detail, code}", w.Body)
	}
	return code
}

const jsonCT = "Content-Type: application/json"
