package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/login"
	"authsvc/internal/password"
	"authsvc/internal/secret"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/redisstore"
	"authsvc/internal/users"
	"authsvc/internal/users/postgres"
	"authsvc/internal/users/usersfile"
)

// maxHeldRefusals bounds the refused logins the tarpit holds at once:
// about 40 MB of parked goroutines and connections.
const maxHeldRefusals = 4096

// A depsOption changes one dependency buildDeps would otherwise make from
// the configuration; tests and benchmarks use them.
type depsOption func(*httpapi.Deps)

// withDirectory serves users from dir instead of the --users file.
func withDirectory(dir users.Directory) depsOption {
	return func(d *httpapi.Deps) { d.Users = dir }
}

// withLogOutput tells the access log where log writes, so that it can
// format its lines itself (accesslog.go); serve knows, tests need not.
func withLogOutput(out io.Writer) depsOption {
	return func(d *httpapi.Deps) { d.LogOut = out }
}

// withSecretKeys gives the second-factor endpoints the keyring that seals
// and opens TOTP secrets; without it enrolment answers 503.
func withSecretKeys(keys secret.Keyring) depsOption {
	return func(d *httpapi.Deps) { d.MFA.Keys = keys }
}

// withStore keeps tokens in store instead of the --store one; the login
// throttle is then kept in memory.
func withStore(store tokens.Store) depsOption {
	return func(d *httpapi.Deps) { d.Store = store }
}

// buildDeps wires the server's dependencies from cfg, the one place where
// each is made: the user directory, the token store, the login guard and
// the metrics. closeDeps releases what it started (the hasher's threads,
// the store); it is safe to call once whatever buildDeps returned.
func buildDeps(cfg serveConfig, log *slog.Logger, opts ...depsOption) (d httpapi.Deps, closeDeps func(), err error) {
	d = httpapi.Deps{
		Log:           log,
		Now:           time.Now,
		Policy:        httpapi.TokenPolicy{TTL: cfg.tokenTTL, Idle: cfg.tokenIdle, MaxPerUser: cfg.maxPerUser, PATMaxTTL: cfg.patMaxTTL},
		MetricsOnMain: cfg.metricsAddr == "",
		CORSOrigins:   cfg.corsOrigins,
		NoAccessLog:   !cfg.accessLog,
		MFA:           httpapi.MFAConfig{Issuer: cfg.mfaIssuer},
		RequireMFA:    cfg.requireMFA,
		Reset:         httpapi.ResetPolicy{URL: cfg.resetURL, TTL: cfg.resetTTL}, // the admin API's reset-link, as user reset-link's
		LogFormat:     cfg.logFormat,
		Passwords: httpapi.PasswordSetter{
			Policy: password.Policy{MinLength: cfg.passwordMinLength},
			Hash: func(password string) (string, error) {
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
	if d.Users == nil {
		var closeUsers io.Closer
		if d.Users, closeUsers, err = openServeDirectory(cfg, log); err != nil {
			return d, closeDeps, err
		}
		closers = append(closers, closeUsers)
	}
	var th throttle.Throttle
	if d.Store == nil {
		var closeStore func() error
		if d.Store, th, closeStore, err = openStore("serve", cfg.store, cfg.storePrefix, cfg.throttle); err != nil {
			return d, closeDeps, err
		}
		closers = append(closers, closerFunc(closeStore))
		if rs, ok := d.Store.(redisstore.Cached); ok {
			rs.SetCacheSize(cfg.storeCache)
		}
	} else {
		th = throttle.NewMemory(cfg.throttle)
	}
	adm := login.NewAdmission(cfg.passwordSlots, cfg.passwordQueue, cfg.passwordWait)
	// The workers run this very binary (internal/password/worker.go); tests run theirs, whose TestMain knows the command.
	exe, err := os.Executable()
	if err != nil {
		log.Warn("cannot find the server's binary; checking passwords in its own process", "err", err)
	}
	hasher := password.NewPool(cfg.passwordSlots, exe, cfg.passwordIdle, log)
	closers = append(closers, hasher)
	d.Guard = &login.Guard{
		Throttle:  th,
		Admission: adm,
		Hasher:    hasher,
		Tarpit:    login.NewTarpit(cfg.refusalDelay, maxHeldRefusals),
		Log:       log,
		Now:       d.Now,
		Policy:    cfg.hashPolicy,
	}
	d.TrustedProxies = cfg.trustedProxies
	d.Metrics = httpapi.NewMetrics(httpapi.MetricsSources{Users: d.Users, Store: d.Store, Admission: adm})
	d.Guard.Metrics = d.Metrics
	reset, resetClosers, err := buildResetMail(cfg, d.Users, d.Metrics, log)
	if err != nil {
		return d, closeDeps, err
	}
	d.ResetRequester = reset
	closers = append(closers, resetClosers...)
	// Closed first, while the directory is open: the rehashes still
	// waiting when serve did not get to write them (it does, within its
	// grace), or a test's.
	closers = append(closers, rehashCloser(d.Guard))
	return d, closeDeps, nil
}

// openServeDirectory opens the directory --users names for serve: the
// PostgreSQL database, which closer releases, or the users file, loaded,
// whose closer does nothing.
func openServeDirectory(cfg serveConfig, log *slog.Logger) (dir users.Directory, closer io.Closer, err error) {
	if isPostgresURL(cfg.usersPath) {
		pg, err := postgres.Open(context.Background(), cfg.usersPath, cfg.userCache, log)
		if err != nil {
			return nil, nil, err
		}
		return pg, pg, nil
	}
	f, err := usersfile.Open(cfg.usersPath, log)
	if err != nil {
		return nil, nil, err
	}
	return f, closerFunc(func() error { return nil }), nil
}

// rehashCloser returns a Closer that waits, for shutdownGrace at most, for
// the rehashes guard has still to write.
func rehashCloser(guard *login.Guard) io.Closer {
	return closerFunc(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		guard.CloseRehashes(ctx)
		return nil
	})
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
// PostgreSQL database, whose schema a command that only reads (readOnly)
// leaves as it is. done releases it, and says on stderr when the command
// created the users file: a mistyped --users would otherwise start a new,
// empty set of users without a word.
func openCLIDirectory(ctx context.Context, spec string, readOnly bool, stderr io.Writer) (dir users.Directory, done func(), err error) {
	if !isPostgresURL(spec) {
		_, statErr := os.Stat(spec)
		existed := !errors.Is(statErr, fs.ErrNotExist)
		return usersfile.New(spec, slog.New(slog.DiscardHandler)), func() {
			if _, err := os.Stat(spec); existed || err != nil {
				return
			}
			path, err := filepath.Abs(spec)
			if err != nil {
				path = spec
			}
			fmt.Fprintf(stderr, "authsvc: created the users file %s\n", path)
		}, nil
	}
	open := postgres.Open
	if readOnly {
		open = postgres.OpenExisting
	}
	pg, err := open(ctx, spec, 16, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, err
	}
	return pg, func() { pg.Close() }, nil
}
