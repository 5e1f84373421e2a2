package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"authsvc/internal/connlimit"
	"authsvc/internal/httpapi"
	"authsvc/internal/password"
	"authsvc/internal/redisurl"
	"authsvc/internal/secret"
	"authsvc/internal/throttle"
	"authsvc/internal/throttle/redisthrottle"
	"authsvc/internal/tick"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/redisstore"
	"authsvc/internal/users"
)

// Server limits. API.md fixes the header timeout (10 s) and the shutdown grace (10 s).
const (
	readHeaderTimeout = 10 * time.Second
	// A trickled 16 KiB body is cut off with the headers' deadline: equal
	// timeouts cost one read deadline a request, not two.
	readTimeout    = readHeaderTimeout
	writeTimeout   = 30 * time.Second
	idleTimeout    = 120 * time.Second
	maxHeaderBytes = 32 << 10
	shutdownGrace  = 10 * time.Second
	// storeCheckTimeout bounds the token store's check at start: long
	// enough for a Redis that answers, short enough not to hold a fleet up.
	storeCheckTimeout = 3 * time.Second
	logFlushInterval  = 100 * time.Millisecond // how late a log line may be written
	// userNoticeTimeout bounds reading a user again on another instance's
	// notice (hearUserNotices); the notices wait meanwhile.
	userNoticeTimeout = 5 * time.Second
)

// storeForms are the --store forms openStore takes, as serve's and user
// import's --help name them.
const storeForms = "memory, redis://[user:pass@]host:port/db, redis+sentinel://[user:pass@]host:port,…/master[/db], redis+cluster://[user:pass@]host:port,…, or each of the three Redis forms over TLS: rediss://…, rediss+sentinel://…, rediss+cluster://…"

// openStore returns the token store that spec names and the login throttle
// that goes with it. With Redis, the throttle's counters are shared too: a
// fleet allows as many guesses as one instance. The function returned
// closes both.
//
// cmd names the command in a usage error.
func openStore(cmd, spec, prefix string, th throttle.Config) (tokens.Store, throttle.Throttle, func() error, error) {
	switch {
	case spec == "memory":
		return tokens.NewMemoryStore(), throttle.NewMemory(th), func() error { return nil }, nil
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"), redisurl.IsSentinel(spec):
		// A Sentinel URL's client follows the primary through failover;
		// the store and the throttle use it as they would one Redis's.
		client, err := redisstore.Dial(spec)
		if err != nil {
			return nil, nil, nil, &usageError{msg: cmd + ": --store: " + err.Error()}
		}
		if prefix == "" {
			prefix = redisstore.DefaultPrefix
		}
		s := redisstore.New(client, prefix)
		closeBoth := func() error {
			s.Close()
			return client.Close()
		}
		return s, redisthrottle.New(client, prefix, th), closeBoth, nil
	}
	if redisurl.IsCluster(spec) {
		// A cluster's store has its own key layout (redisstore's
		// keys.go); the throttle shares the client, as it shares one
		// Redis's, since its scripts are cluster-ready (redisthrottle).
		if strings.ContainsAny(prefix, "{}") {
			return nil, nil, nil, usagef("%s: --store-prefix %q: a Redis Cluster's prefix may not hold { or } (they would move the keys' hash tags)", cmd, prefix)
		}
		client, err := redisstore.DialCluster(spec)
		if err != nil {
			return nil, nil, nil, &usageError{msg: cmd + ": --store: " + err.Error()}
		}
		if prefix == "" {
			prefix = redisstore.DefaultPrefix
		}
		s, err := redisstore.NewCluster(client, prefix)
		if err != nil {
			client.Close()
			return nil, nil, nil, &usageError{msg: cmd + ": --store-prefix: " + err.Error()}
		}
		closeBoth := func() error {
			s.Close()
			return client.Close()
		}
		return s, redisthrottle.New(client, prefix, th), closeBoth, nil
	}
	// Not quoted: a URL of another kind may hold a password.
	return nil, nil, nil, usagef("%s: --store: want memory, redis://…, rediss://…, redis+sentinel://…, rediss+sentinel://…, redis+cluster://… or rediss+cluster://…", cmd)
}

// serve runs "authsvc serve": the server, until ctx is done, then shuts
// it down gracefully.
func serve(ctx context.Context, e *env, args []string) error {
	stdout, stderr := e.stdout, e.stderr
	cfg, err := parseServeFlags(args, e.getenv, stdout)
	if err != nil {
		return err
	}
	logOut := newLogWriter(stderr, logFlushInterval)
	defer logOut.Close()
	log := httpapi.NewLogger(cfg.logFormat, logOut)
	for _, note := range cfg.deprecated {
		log.Warn(note)
	}
	start := time.Now()
	if err := bootstrap(ctx, cfg.usersPath, cfg.hashPolicy, stderr); err != nil {
		return err
	}
	keys, missing, err := loadSecretKeys(cfg.keyFiles())
	if err != nil {
		return err
	}
	deps, closeDeps, err := buildDeps(cfg, log, withLogOutput(logOut), withSecretKeys(keys))
	defer closeDeps()
	if err != nil {
		return err
	}
	if err := checkSecretKeys(ctx, deps.Users, keys); err != nil {
		return err
	}
	if missing != "" {
		// Only now: a new key would open none of the factors the
		// directory may hold, and would stand in the way of the one that
		// does.
		deps.MFA.Keys = createSecretKey(missing, log)
	}
	// Audit lines skip the batching: each is written before its reply.
	deps.Guard.Log = httpapi.NewLogger(cfg.logFormat, logOut.synced())
	if err := checkStore(ctx, deps.Store, log); err != nil {
		return err
	}
	deps.Metrics.Reloaded(nil, start)
	return runServers(ctx, cfg, deps)
}

// bootstrap gives a new installation its one way in: when the directory
// at users has never held a user, it adds the admin user "admin" with a
// random password (its hash under policy) and prints that password once to
// stderr.
func bootstrap(ctx context.Context, spec string, policy password.HashPolicy, stderr io.Writer) error {
	dir, done, err := openCLIDirectory(ctx, spec, false, stderr)
	if err != nil {
		return err
	}
	defer done()
	return users.BootstrapAdmin(ctx, dir, policy, stderr)
}

// secretKeyFiles are the secret key files serve is given, which user
// check checks as serve would.
type secretKeyFiles struct {
	cmd       string   // the command, for a usage error
	usersPath string   // --users: the default key file is beside a users file
	current   string   // --secret-key-file; "" for the default
	old       []string // --old-secret-key-file
}

// keyFiles returns serve's secret key files.
func (c serveConfig) keyFiles() secretKeyFiles {
	return secretKeyFiles{cmd: "serve", usersPath: c.usersPath, current: c.secretKeyFile, old: c.oldSecretKeyFile}
}

// loadSecretKeys returns the keyring of --secret-key-file and
// --old-secret-key-file. With a users file and no --secret-key-file, the
// key is authsvc.key beside it; when that file does not exist, the ring is
// empty and missing names it, for serve to create once checkSecretKeys has
// found no second factor that needs another key (createSecretKey). With
// PostgreSQL and none given, the ring is empty: enrolment answers 503, and
// checkSecretKeys stops a start over a database that holds secrets. It
// never writes a file: user check runs it too.
func loadSecretKeys(files secretKeyFiles) (ring secret.Keyring, missing string, err error) {
	path := files.current
	if path == "" && len(files.old) > 0 {
		return secret.Keyring{}, "", usagef("%s: --old-secret-key-file needs --secret-key-file, the key that replaced it", files.cmd)
	}
	if path == "" && isPostgresURL(files.usersPath) {
		return secret.Keyring{}, "", nil
	}
	byDefault := path == ""
	if byDefault {
		path = filepath.Join(filepath.Dir(files.usersPath), defaultKeyFile)
	}
	key, err := secret.Load(path)
	if byDefault && errors.Is(err, fs.ErrNotExist) {
		return secret.Keyring{}, path, nil
	}
	if err != nil {
		return secret.Keyring{}, "", fmt.Errorf("--secret-key-file: %w", err)
	}
	var old []secret.Key
	for _, p := range files.old {
		k, err := secret.Load(p)
		if err != nil {
			return secret.Keyring{}, "", fmt.Errorf("--old-secret-key-file: %w", err)
		}
		old = append(old, k)
	}
	return secret.NewKeyring(key, old...), "", nil
}

// createSecretKey creates the default key file at path (mode 0600), or
// loads the one another instance starting at the same moment created, and
// returns its ring. A key that cannot be made (a full disk, a read-only
// folder) costs enrolment only: it answers 503, and the ring is empty. It
// never replaces a file (secret.Write).
func createSecretKey(path string, log *slog.Logger) secret.Keyring {
	key, created, err := secret.LoadOrCreate(path)
	if err != nil {
		log.Warn("cannot create the secret key file; second-factor enrolment answers 503 until it can be", "path", path, "err", err)
		return secret.Keyring{}
	}
	if created {
		log.Info("created the secret key file; every instance reading these users needs the same key", "path", path, "key_id", key.ID())
	}
	return secret.NewKeyring(key)
}

// checkSecretKeys stops serve, with one line, over a directory whose second
// factors need a key that keys does not hold: the users who have them
// could not log in, and nothing but the right key would mend that.
func checkSecretKeys(ctx context.Context, dir users.Directory, keys secret.Keyring) error {
	need, err := dir.FactorKeys(ctx)
	if err != nil {
		return fmt.Errorf("cannot read the second factors of %s: %w", dir, err)
	}
	missing, n := keysMissing(need, keys)
	if len(missing) == 0 {
		return nil
	}
	if keys.Current().IsZero() {
		return fmt.Errorf("%s holds second factors of %d users, sealed under key %s, and serve has no secret key: give it with --secret-key-file", dir, n, strings.Join(missing, ", "))
	}
	return fmt.Errorf("%s holds second factors of %d users sealed under key %s, which --secret-key-file (key %s) and --old-secret-key-file do not hold", dir, n, strings.Join(missing, ", "), keys.Current().ID())
}

// keysMissing returns the IDs of the keys in need (key ID → users, as
// Directory.FactorKeys counts them) that keys does not hold, sorted, and
// how many users need them.
func keysMissing(need map[string]int, keys secret.Keyring) (missing []string, users int) {
	for id, n := range need {
		if _, ok := keys.Key(id); !ok {
			missing = append(missing, id)
			users += n
		}
	}
	slices.Sort(missing)
	return missing, users
}

// checkStore stops serve on a token store that refuses its configuration
// (wrong credentials, a database that does not exist), which waiting would
// not mend; one that cannot be reached yet is waited for, /readyz
// answering 503 meanwhile, so that a fleet may start in any order.
func checkStore(ctx context.Context, store tokens.Store, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
	defer cancel()
	err := store.Ping(ctx)
	switch {
	case errors.Is(err, tokens.ErrRefused):
		return fmt.Errorf("--store: %w", err)
	case err != nil:
		log.Warn("token store not reachable yet; /readyz answers 503 until it is", "err", err)
	}
	return nil
}

// runServers serves the API (and the metrics, on --metrics-addr) with deps,
// keeps the users and sessions fresh, and shuts down gracefully once ctx is done.
func runServers(ctx context.Context, cfg serveConfig, deps httpapi.Deps) error {
	log := deps.Log
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	maxConns := cfg.maxConns
	if maxConns == 0 {
		maxConns = connlimit.DefaultMax()
	}
	conns := connlimit.New(maxConns)
	uses := httpapi.NewAccessTokenUses(deps.Users, log)
	deps.AccessTokenUses = uses
	api := newHTTPServer(log, httpapi.NewServer(deps))
	api.ConnState = conns.ConnState
	servers := []*http.Server{api}
	listeners := []net.Listener{conns.Listener(ln)}
	if cfg.metricsAddr != "" {
		mln, err := net.Listen("tcp", cfg.metricsAddr)
		if err != nil {
			ln.Close()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", deps.Metrics.Handler())
		servers = append(servers, newHTTPServer(log, mux))
		listeners = append(listeners, mln)
		log.Info("metrics listening", "addr", mln.Addr().String())
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go deps.Users.Watch(ctx, cfg.reloadInterval, hup, users.WatchHooks{
		Reloaded: func(err error) { deps.Metrics.Reloaded(err, time.Now()) },
		Cut:      func(c users.Cut) { endTokens(ctx, deps, c) },
	})
	hearUserNotices(ctx, deps, hup)
	go keepEnrolmentPending(ctx, cfg.reloadInterval, deps)
	usesDone := make(chan struct{})
	go func() { uses.Run(ctx, httpapi.PATUseFlush); close(usesDone) }()
	defer func() { cancel(); <-usesDone }() // the last uses are written before serve returns
	if cfg.tokenTTL > 0 {
		go tick.Every(ctx, min(cfg.tokenTTL, time.Minute), func(now time.Time) { deps.Store.Sweep(now) })
	}

	log.Info("listening", "addr", ln.Addr().String(), "users", deps.Users.Len(), "directory", directoryKind(cfg.usersPath), "store", storeKind(cfg.store), "max_conns", maxConns)
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
	// No login is left to queue one: the rehashes waiting are written in
	// what is left of the grace.
	deps.Guard.CloseRehashes(shutdownCtx)
	log.Info("stopped")
	return nil
}

// endTokens tells the store of c, a change of the user directory that
// killed tokens: it removes the user's tokens issued before c.Before or on
// a password other than the one the directory now has (c.Stamp), and
// refuses logins on another from then on, so that no later change brings
// them back and no instance that has not reloaded yet issues one that any
// instance sharing the store accepts (after user passwd, the first
// instance to reload does this for the fleet). If the store cannot be
// reached the cut-off and the stamp still hold wherever the directory
// says so.
func endTokens(ctx context.Context, deps httpapi.Deps, c users.Cut) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := deps.Store.Supersede(ctx, deps.Policy.Supersession(c.Username, c.Stamp, c.Before, time.Now()))
	if err != nil {
		deps.Log.Warn("could not remove a changed user's tokens from the store", "err", err)
		return
	}
	deps.Metrics.Revoked(httpapi.RevokedUserChange, n)
}

// hearUserNotices makes this instance read a user again as soon as an
// instance sharing the token store says that their record changed in the
// directory (a personal access token revoked: tokens.UserNotifier), rather
// than at its next reload. A notice for every user ("", some may have been
// lost) asks Watch for a reload as a SIGHUP does: Reload itself would not
// tell the store of the cuts the change holds (endTokens). A store of one
// instance hears none.
func hearUserNotices(ctx context.Context, deps httpapi.Deps, reload chan<- os.Signal) {
	n, ok := deps.Store.(tokens.UserNotifier)
	if !ok {
		return
	}
	n.OnUserNotice(func(username string) {
		if ctx.Err() != nil {
			return // shutting down
		}
		if username == "" {
			select {
			case reload <- syscall.SIGHUP:
			default: // a reload is pending already
			}
			return
		}
		rctx, cancel := context.WithTimeout(ctx, userNoticeTimeout)
		defer cancel()
		if _, err := deps.Users.Recheck(rctx, username); err != nil && !errors.Is(err, users.ErrNotFound) && ctx.Err() == nil {
			// The directory's own reload still brings the change.
			deps.Log.Warn("could not read a user again on another instance's notice", "username", username, "err", err)
		}
	})
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

// directoryKind names the user directory without a URL's credentials.
func directoryKind(users string) string {
	if isPostgresURL(users) {
		return "postgres"
	}
	return "file"
}

// storeKind names the store without the URL's credentials.
func storeKind(spec string) string {
	if spec == "memory" {
		return spec
	}
	scheme, _, _ := strings.Cut(spec, "://")
	return scheme
}
