package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Server limits. API.md fixes the header timeout (10 s) and the shutdown grace (10 s).
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 20 * time.Second // a trickled 16 KiB body is cut off
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 32 << 10
	shutdownGrace     = 10 * time.Second
	logFlushInterval  = 100 * time.Millisecond // how late a log line may be written
	maxHeldRefusals   = 4096                   // refused logins held by the tarpit at once: about 40 MB of parked goroutines and connections
)

// serveConfig is the serve command's flags.
type serveConfig struct {
	addr           string
	usersPath      string
	tokenTTL       time.Duration
	store          string
	storePrefix    string
	maxPerUser     int
	reloadInterval time.Duration
	logFormat      string
	throttle       throttleConfig
	trustedProxies []netip.Prefix
	bcryptSlots    int
	bcryptQueue    int
	bcryptWait     time.Duration
	refusalDelay   time.Duration
	metricsAddr    string
	corsOrigins    []string
	accessLog      bool
}

func parseServeFlags(args []string, getenv func(string) string, stdout io.Writer) (serveConfig, error) {
	var c serveConfig
	var trusted, corsOrigins stringList
	fs := serveFlagSet(&c, &trusted, &corsOrigins)
	var fromEnv []string // every serve flag has its AUTHSVC_* variable
	fs.VisitAll(func(f *flag.Flag) { fromEnv = append(fromEnv, f.Name) })
	if err := parseFlags(fs, args, getenv, fromEnv, stdout); err != nil {
		return c, err
	}
	t := &c.throttle
	var err error
	if c.trustedProxies, err = parsePrefixes(trusted); err != nil {
		return c, &usageError{msg: "serve: " + err.Error()}
	}
	if c.corsOrigins, err = normalizeOrigins(corsOrigins); err != nil {
		return c, err
	}
	switch {
	case t.PairFailures < 1 || t.UserFailures < 1 || t.AddrBurst < 1 || t.MaxEntries < 1:
		return c, usagef("serve: --login-failures, --user-failures, --login-burst and --throttle-entries must be at least 1")
	case t.Window <= 0 || t.BaseBackoff <= 0 || t.MaxBackoff <= 0 || t.AddrRate <= 0:
		return c, usagef("serve: --login-window, --login-backoff, --login-max-backoff and --login-rate must be positive")
	case c.refusalDelay < 0:
		return c, usagef("serve: --refusal-delay must not be negative")
	case c.bcryptSlots < 1 || c.bcryptQueue < 0 || c.bcryptWait <= 0:
		return c, usagef("serve: --bcrypt-slots must be at least 1, --bcrypt-queue not negative, --bcrypt-wait positive")
	case fs.NArg() > 0:
		return c, usagef("serve: unexpected argument %q", fs.Arg(0))
	case c.tokenTTL < 0:
		return c, usagef("serve: --token-ttl must not be negative")
	case c.maxPerUser < 0:
		return c, usagef("serve: --max-tokens-per-user must not be negative")
	case c.reloadInterval <= 0:
		return c, usagef("serve: --reload-interval must be positive")
	case c.logFormat != "text" && c.logFormat != "json":
		return c, usagef("serve: --log-format must be text or json")
	}
	return c, nil
}

// serveFlagSet defines every serve flag on c and the two repeatable lists.
func serveFlagSet(c *serveConfig, trusted, corsOrigins *stringList) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&c.usersPath, "users", "users.json", "users file")
	fs.DurationVar(&c.tokenTTL, "token-ttl", 24*time.Hour, "token lifetime, 0 = never")
	fs.StringVar(&c.store, "store", "memory", "token store")
	fs.StringVar(&c.storePrefix, "store-prefix", "authsvc:", "key prefix in Redis")
	fs.IntVar(&c.maxPerUser, "max-tokens-per-user", 100, "live tokens per user, 0 = no limit")
	fs.DurationVar(&c.reloadInterval, "reload-interval", time.Second, "users file check interval")
	fs.StringVar(&c.logFormat, "log-format", "text", "text or json")
	t := &c.throttle
	fs.IntVar(&t.PairFailures, "login-failures", 5, "failed logins per (username, client) before backoff")
	fs.DurationVar(&t.Window, "login-window", 15*time.Minute, "a failure streak is forgotten after this long without a failure")
	fs.DurationVar(&t.BaseBackoff, "login-backoff", time.Second, "first backoff, doubled per further failure")
	fs.DurationVar(&t.MaxBackoff, "login-max-backoff", 5*time.Minute, "backoff cap")
	fs.IntVar(&t.UserFailures, "user-failures", 100, "failed logins per username over all clients before it is refused everywhere")
	fs.Float64Var(&t.AddrRate, "login-rate", 1, "login attempts per second per client address")
	fs.IntVar(&t.AddrBurst, "login-burst", 10, "login attempts a client address may make at once")
	fs.IntVar(&t.MaxEntries, "throttle-entries", 100000, "keys per throttle table")
	fs.Var(trusted, "trusted-proxy", "CIDR of a proxy whose X-Forwarded-For is believed (repeatable)")
	slots := runtime.GOMAXPROCS(0)
	fs.IntVar(&c.bcryptSlots, "bcrypt-slots", slots, "password checks at once")
	fs.IntVar(&c.bcryptQueue, "bcrypt-queue", 4*slots, "password checks waiting for a slot")
	fs.DurationVar(&c.bcryptWait, "bcrypt-wait", 2*time.Second, "longest wait for a slot before 503")
	fs.DurationVar(&c.refusalDelay, "refusal-delay", 250*time.Millisecond, "hold a refused login (429, 503) this long before replying; 0 = at once")
	fs.BoolVar(&c.accessLog, "access-log", true, "log one line per request (audit and error lines are always logged)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve /metrics on this address instead of --addr")
	fs.Var(corsOrigins, "cors-origin", "origin whose pages may call the API, e.g. https://app.example.com (repeatable)")
	return fs
}

// newLogger returns the service's logger.
func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// openStore returns the token store that spec names.
func openStore(spec, prefix string) (Store, error) {
	switch {
	case spec == "memory":
		return newMemoryStore(), nil
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"):
		s, err := newRedisStore(spec, prefix)
		if err != nil {
			return nil, &usageError{msg: "serve: --store: " + err.Error()}
		}
		return s, nil
	}
	return nil, usagef("serve: --store %q: want memory, redis://… or rediss://…", spec)
}

// serve runs the server until ctx is done, then shuts it down gracefully.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseServeFlags(args, getenv, stdout)
	if err != nil {
		return err
	}
	logOut := newLogWriter(stderr, logFlushInterval)
	defer logOut.Close()
	log := newLogger(cfg.logFormat, logOut)
	start := time.Now()
	if err := bootstrapUsers(cfg.usersPath, stderr); err != nil {
		return err
	}
	users, err := loadUserSource(cfg.usersPath, log)
	if err != nil {
		return err
	}
	store, err := openStore(cfg.store, cfg.storePrefix)
	if err != nil {
		return err
	}
	defer store.Close()
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	adm := newAdmission(cfg.bcryptSlots, cfg.bcryptQueue, cfg.bcryptWait)
	hasher := newHasherPool(cfg.bcryptSlots)
	defer hasher.Close()
	// The hasher's threads hold a P each while they hash: add Ps for token
	// checks (see hasherPool). Half as many as the hashers left /info 62% of
	// its throughput under a login flood on 2 cores; as many cost 5% unloaded.
	procs := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(procs + max(1, cfg.bcryptSlots/2))
	defer runtime.GOMAXPROCS(procs)
	m := newMetrics(metricsSources{users: users, store: store, admission: adm})
	m.reloaded(nil, start)
	users.onReload = func(err error) { m.reloaded(err, time.Now()) }
	srv := newHTTPServer(log, newServer(serverDeps{
		log:    log,
		users:  users,
		store:  store,
		policy: tokenPolicy{ttl: cfg.tokenTTL, maxPerUser: cfg.maxPerUser},
		guard: loginGuard{
			throttle:  newThrottle(cfg.throttle),
			admission: adm,
			hasher:    hasher,
			tarpit:    newTarpit(cfg.refusalDelay, maxHeldRefusals),
			trusted:   cfg.trustedProxies,
		},
		now:           time.Now,
		metrics:       m,
		metricsOnMain: cfg.metricsAddr == "",
		corsOrigins:   cfg.corsOrigins,
		noAccessLog:   !cfg.accessLog,
	}))
	servers := []*http.Server{srv}
	listeners := []net.Listener{ln}
	if cfg.metricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.metricsAddr)
		if err != nil {
			ln.Close()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.handler())
		servers = append(servers, newHTTPServer(log, mux))
		listeners = append(listeners, mln)
		log.Info("metrics listening", "addr", mln.Addr().String())
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go users.watch(ctx, cfg.reloadInterval, hup)
	if ms, ok := store.(*memoryStore); ok && cfg.tokenTTL > 0 {
		go sweepLoop(ctx, ms, min(cfg.tokenTTL, time.Minute))
	}

	log.Info("listening", "addr", ln.Addr().String(), "users", len(users.dir().byName), "store", storeKind(cfg.store))
	serveErr := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { serveErr <- srv.Serve(listeners[i]) }()
	}
	select {
	case err := <-serveErr:
		for _, srv := range servers {
			srv.Close()
		}
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down", "grace", shutdownGrace)
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancelShutdown()
	for _, srv := range servers {
		if err := srv.Shutdown(shutdownCtx); err != nil {
			log.Warn("grace period over; closing remaining connections", "err", err)
			srv.Close()
		}
	}
	log.Info("stopped")
	return nil
}

// newHTTPServer returns a server with every limit set.
func newHTTPServer(log *slog.Logger, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// storeKind names the store without the URL's credentials.
func storeKind(spec string) string {
	if spec == "memory" {
		return spec
	}
	scheme, _, _ := strings.Cut(spec, "://")
	return scheme
}

// sweepLoop deletes expired sessions every interval until ctx is done.
func sweepLoop(ctx context.Context, s *memoryStore, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s.Sweep(now)
		}
	}
}

// bootstrapUsers creates a missing users file with one admin user, "admin",
// and prints its random password once to stderr: the one way into a new
// installation.
func bootstrapUsers(path string, stderr io.Writer) error {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil // exists, or unreadable: loading it will say which
	}
	var secret [18]byte
	rand.Read(secret[:])
	password := base64.RawURLEncoding.EncodeToString(secret[:])
	hash, err := bcrypt.GenerateFromPassword([]byte(password), defaultCost)
	if err != nil {
		return err
	}
	created := false
	err = editUsers(path, true, func(users []User) ([]User, error) {
		if len(users) > 0 {
			return users, nil // another process created it meanwhile
		}
		created = true
		return []User{{Username: "admin", PasswordHash: string(hash), Name: "Administrator", Groups: []string{}, Admin: true}}, nil
	})
	if err != nil {
		return fmt.Errorf("create users file: %w", err)
	}
	if created {
		fmt.Fprintf(stderr, "authsvc: created %s with the admin user \"admin\"; change its password with 'authsvc user passwd admin'; password: %s\n", path, password)
	}
	return nil
}
