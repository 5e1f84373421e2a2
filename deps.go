package main

import (
	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"
)

// maxHeldRefusals bounds the refused logins the tarpit holds at once:
// about 40 MB of parked goroutines and connections.
const maxHeldRefusals = 4096

// A depsOption changes one dependency buildDeps would otherwise make from
// the configuration; tests and benchmarks use them.
type depsOption func(*serverDeps)

// withClock makes the handlers and the throttle read the time from now.
func withClock(now func() time.Time) depsOption {
	return func(d *serverDeps) { d.now = now }
}

// withDirectory serves users from dir instead of the --users file.
func withDirectory(dir Directory) depsOption {
	return func(d *serverDeps) { d.users = dir }
}

// withLogOutput tells the access log where log writes, so that it can
// format its lines itself (accesslog.go); serve knows, tests need not.
func withLogOutput(out io.Writer) depsOption {
	return func(d *serverDeps) { d.logOut = out }
}

// withStore keeps tokens in store instead of the --store one; the login
// throttle is then kept in memory.
func withStore(store tokens.Store) depsOption {
	return func(d *serverDeps) { d.store = store }
}

// buildDeps wires the server's dependencies from cfg, the one place where
// each is made: the user directory, the token store, the login guard and
// the metrics. closeDeps releases what it started (the hasher's threads,
// the store); it is safe to call once whatever buildDeps returned.
func buildDeps(cfg serveConfig, log *slog.Logger, opts ...depsOption) (d serverDeps, closeDeps func(), err error) {
	d = serverDeps{
		log:           log,
		now:           time.Now,
		policy:        tokenPolicy{ttl: cfg.tokenTTL, idle: cfg.tokenIdle, maxPerUser: cfg.maxPerUser},
		metricsOnMain: cfg.metricsAddr == "",
		corsOrigins:   cfg.corsOrigins,
		noAccessLog:   !cfg.accessLog,
		logFormat:     cfg.logFormat,
		passwords: passwordSetter{
			policy: password.Policy{MinLength: cfg.passwordMinLength},
			hash: func(password string) (string, error) {
				return cfg.hashPolicy.Hash([]byte(password))
			},
		},
	}
	for _, opt := range opts {
		opt(&d)
	}
	var closers []io.Closer
	closeDeps = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i].Close()
		}
	}
	if d.users == nil {
		if isPostgresURL(cfg.usersPath) {
			pg, err := openPGDirectory(context.Background(), cfg.usersPath, cfg.userCache, log)
			if err != nil {
				return d, closeDeps, err
			}
			closers = append(closers, pg)
			d.users = pg
		} else if d.users, err = openFileDirectory(cfg.usersPath, log); err != nil {
			return d, closeDeps, err
		}
	}
	var th throttle.Throttle
	if d.store == nil {
		var closeStore func() error
		if d.store, th, closeStore, err = openStore(cfg.store, cfg.storePrefix, cfg.throttle); err != nil {
			return d, closeDeps, err
		}
		closers = append(closers, closerFunc(closeStore))
	} else {
		th = throttle.NewMemory(cfg.throttle)
	}
	adm := newAdmission(cfg.bcryptSlots, cfg.bcryptQueue, cfg.bcryptWait)
	// The workers run this very binary (hashworker.go); tests run theirs, whose TestMain knows the command.
	exe, err := os.Executable()
	if err != nil {
		log.Warn("cannot find the server's binary; checking passwords in its own process", "err", err)
	}
	hasher := password.NewPool(cfg.bcryptSlots, exe, log)
	closers = append(closers, hasher)
	d.guard = &loginGuard{
		throttle:  th,
		admission: adm,
		hasher:    hasher,
		tarpit:    newTarpit(cfg.refusalDelay, maxHeldRefusals),
		trusted:   cfg.trustedProxies,
		log:       log,
		now:       d.now,
		policy:    cfg.hashPolicy,
	}
	d.metrics = newMetrics(metricsSources{users: d.users, store: d.store, admission: adm})
	d.guard.metrics = d.metrics
	return d, closeDeps, nil
}

// A closerFunc is a Close method.
type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// isPostgresURL reports whether a --users value names a PostgreSQL database
// rather than a users file.
func isPostgresURL(users string) bool {
	return strings.HasPrefix(users, "postgres://") || strings.HasPrefix(users, "postgresql://")
}

// openCLIDirectory opens the directory --users names for one CLI command:
// the users file unloaded (each edit reads it under the lock), or the
// PostgreSQL database. done releases it.
func openCLIDirectory(ctx context.Context, users string) (dir Directory, done func(), err error) {
	if !isPostgresURL(users) {
		return newFileDirectory(users, slog.New(slog.DiscardHandler)), func() {}, nil
	}
	pg, err := openPGDirectory(ctx, users, 16, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	return pg, func() { pg.Close() }, nil
}
