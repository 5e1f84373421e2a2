package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"authsvc/internal/lru"
	"authsvc/internal/password"
	"authsvc/internal/users"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	pgQueryTimeout   = 2 * time.Second // every round trip: a token check must not hang on a dead database
	pgConnectTimeout = 2 * time.Second // unless the URL's connect_timeout says otherwise
	pgOpenTimeout    = 15 * time.Second
	pgMaxConns       = 8 // unless the URL's pool_max_conns says otherwise
	// API.md: token checks go on from the last known state for at most 5 s.
	pgTrustCache = 5 * time.Second
	// After a failed round trip, look-ups fail at once for this long rather
	// than each waiting for its own timeout.
	pgFailFast    = time.Second
	pgListenRetry = time.Second
	pgChannel     = "authsvc_users"
	// The change log keeps this many generations; an instance that fell
	// further behind drops its whole cache instead.
	pgChangesKept = 1000
	// pgMigrationLock is the advisory lock key migrations hold: "authsvc" in ASCII.
	pgMigrationLock = 0x61757468737663
)

// A Directory is the Directory in a PostgreSQL database that every
// instance of a fleet shares (API.md, Users). Lookup answers from a bounded
// cache of the users looked up, filled on a miss; every write bumps one
// generation counter, logs the names it changed under it, and notifies
// pgChannel, all in its transaction, so that Watch can tell each instance
// exactly whose entries to drop and whose tokens died, whether or not a
// notification got through.
//
// Tables (created and migrated by Open, pgMigrations):
// authsvc_schema (version), authsvc_users (one row a user; Page reads it
// in byte order of the usernames, from an index: pgUsernameIndex),
// authsvc_users_state (the generation and the number of users, one row:
// its lock serializes writers), authsvc_user_changes (generation, username;
// "" for a batch of additions), authsvc_tombstones (a deleted user's
// cut-off), authsvc_access_tokens (personal access tokens' digests, by
// trigger: pgAccessTokensSchema). A user's reset link is a column of
// authsvc_users (pgResetLinkSchema).
type Directory struct {
	pool    *pgxpool.Pool
	listenc *pgx.ConnConfig // for the LISTEN connection, kept out of the pool
	log     *slog.Logger
	name    string   // the URL without its password, for messages
	secrets []string // passwords in the URL, scrubbed from every error

	mu    sync.Mutex              // guards cache, tokens, epoch and absent
	cache *lru.Cache[string, row] // users looked up, most recent first; a nil user: no such user
	// tokens are the personal access tokens found, by digest, each valid
	// while cache holds its user at the version it was read at.
	tokens *lru.Cache[[sha256.Size]byte, tokenEntry]
	epoch  uint64 // bumped by every invalidation: a miss that read before one does not cache what it read
	// absent are the digests a read found no token of, good while no
	// change has come since (negcache.go).
	absent absentDigests

	users    atomic.Int64
	slowest  atomic.Pointer[users.SlowestCheck]
	lastOK   atomic.Int64 // Unix ns of the last round trip that worked
	lastFail atomic.Int64 // Unix ns of the last one that did not
	probing  atomic.Bool  // a look-up is finding out whether the database is back

	syncMu  sync.Mutex // serializes catching up with the database; guards seen and failing
	seen    int64      // the generation the cache has caught up with
	failing bool       // the last catch-up failed (logged once per outage)

	slowMu sync.Mutex // serializes rebuilding slowest (a rebuild costs a hash)

	closeMu  sync.Mutex // guards closed and the watchers Add
	closed   bool
	watchers sync.WaitGroup
	done     context.Context // done when closed: stops Watch
	close    context.CancelFunc

	// collate is ` collate "C"` when the username column's collation is
	// not byte order by itself (pgByteOrder), else "": what Page and
	// Count compare and sort usernames with, to use the index there is.
	collate string

	noListen bool // a test's switch: Watch without LISTEN, as when notifications are lost
}

var (
	_ users.Directory        = (*Directory)(nil)
	_ users.ConfirmingReader = (*Directory)(nil)
)

// Open opens the users database at rawURL (postgres:// or
// postgresql://, its parameters passed to the driver as given), creating or
// migrating its tables, with a cache of at most cacheSize users. No error
// quotes the URL's password.
func Open(ctx context.Context, rawURL string, cacheSize int, log *slog.Logger) (*Directory, error) {
	return open(ctx, rawURL, cacheSize, log, true)
}

// OpenExisting is Open for a command that only reads: it does not create
// or migrate the schema, and fails when the database does not hold the
// schema this authsvc knows.
func OpenExisting(ctx context.Context, rawURL string, cacheSize int, log *slog.Logger) (*Directory, error) {
	return open(ctx, rawURL, cacheSize, log, false)
}

func open(ctx context.Context, rawURL string, cacheSize int, log *slog.Logger, migrate bool) (*Directory, error) {
	secrets := urlSecrets(rawURL)
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// pgx redacts passwords only as best it can; this message is a new
		// error, so nothing below it can quote the URL.
		return nil, fmt.Errorf("users database URL: %s", scrub(err.Error(), secrets))
	}
	if p := cfg.ConnConfig.Password; p != "" {
		secrets = append(secrets, p)
	}
	if !strings.Contains(rawURL, "pool_max_conns") {
		cfg.MaxConns = pgMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = pgConnectTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("users database: %s", scrub(err.Error(), secrets))
	}
	d := &Directory{
		pool:    pool,
		listenc: cfg.ConnConfig.Copy(),
		log:     log,
		name:    pgName(cfg.ConnConfig),
		secrets: secrets,
		cache:   lru.New[string, row](cacheSize),
		tokens:  lru.New[[sha256.Size]byte, tokenEntry](cacheSize),
	}
	d.done, d.close = context.WithCancel(context.Background())
	octx, cancel := context.WithTimeout(ctx, pgOpenTimeout)
	defer cancel()
	if err := d.open(octx, migrate); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// open migrates the schema, or with migrate false checks it is current,
// and loads what Lookup does not load on demand.
func (d *Directory) open(ctx context.Context, migrate bool) error {
	if !migrate {
		var version int
		if err := d.pool.QueryRow(ctx, `select version from authsvc_schema`).Scan(&version); err != nil {
			if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
				return fmt.Errorf("users database %s: %w", d.name, ErrNoSchema)
			}
			return d.fail(ctx, "read the schema version (has an authsvc set this database up?)", err)
		}
		if version != len(pgMigrations) {
			return fmt.Errorf("users database %s: schema version %d, this authsvc knows %d; a command that writes (or serve) migrates it", d.name, version, len(pgMigrations))
		}
	} else if err := d.migrate(ctx); err != nil {
		return d.fail(ctx, "migrate", err)
	}
	if err := d.pool.QueryRow(ctx, `select generation from authsvc_users_state`).Scan(&d.seen); err != nil {
		return d.fail(ctx, "read state", err)
	}
	var byteOrder bool
	if err := d.pool.QueryRow(ctx, pgByteOrder).Scan(&byteOrder); err != nil {
		return d.fail(ctx, "read the usernames' collation", err)
	}
	if !byteOrder {
		d.collate = ` collate "C"`
	}
	return d.Reload(ctx)
}

// String names the directory for messages: the URL without its password.
func (d *Directory) String() string { return d.name }

// Name returns how messages name the database at rawURL: its URL without
// a password.
func Name(rawURL string) string {
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return "the users database"
	}
	return pgName(cfg)
}

// pgName is the URL of the database c connects to, without a password.
func pgName(c *pgx.ConnConfig) string {
	u := url.URL{Scheme: "postgres", User: url.User(c.User), Host: net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), Path: "/" + c.Database}
	if strings.HasPrefix(c.Host, "/") { // a Unix socket's directory
		u.Host = ""
		u.RawQuery = url.Values{"host": {c.Host}}.Encode()
	}
	return u.String()
}

// urlPassword finds a password in a connection string that may not parse:
// a URL's user:password@ before the host or password= parameter, or a
// keyword/value string's password=.
var urlPassword = regexp.MustCompile(`^[^:]*://[^:@/]*:(.*)@[^@]*$|[?&]password=([^&]*)|(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// urlSecrets returns the passwords rawURL holds, as written and decoded.
func urlSecrets(rawURL string) []string {
	var secrets []string
	for _, m := range urlPassword.FindAllStringSubmatch(rawURL, -1) {
		for _, s := range m[1:] {
			if s == "" {
				continue
			}
			secrets = append(secrets, s, strings.Trim(s, "'"))
			if dec, err := url.PathUnescape(s); err == nil && dec != s {
				secrets = append(secrets, dec)
			}
			if dec, err := url.QueryUnescape(s); err == nil && dec != s {
				secrets = append(secrets, dec)
			}
		}
	}
	return secrets
}

// scrub returns msg with every secret in it replaced, on one line: the
// driver spreads a failed connection over a line per address tried.
func scrub(msg string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
		}
	}
	return strings.Join(strings.Fields(msg), " ")
}

// A scrubbedError is an error from the driver with the URL's password
// taken out of its message; it unwraps to the sentinels wrapped with it.
type scrubbedError struct {
	msg  string
	wrap []error
}

func (e *scrubbedError) Error() string   { return e.msg }
func (e *scrubbedError) Unwrap() []error { return e.wrap }

// A keptError is an error of a write's own (a refused change, a taken
// name) that write returns as it is, rather than as the database's.
type keptError struct{ err error }

func (e keptError) Error() string { return e.err.Error() }

// keep marks err as the caller's own, not the database's.
func keep(err error) error { return keptError{err} }

// fail turns err from the database during op into what callers see: the
// caller's own error as it is; a refusal by the server (a constraint, a
// permission) as an error; anything else, the database out of reach, as
// ErrUnavailable, which makes look-ups fail fast for a while.
// Either way the message cannot quote the URL's password.
func (d *Directory) fail(ctx context.Context, op string, err error) error {
	var kept keptError
	if errors.As(err, &kept) {
		return kept.err
	}
	msg := scrub(fmt.Sprintf("users database %s: %s: %v", d.name, op, err), d.secrets)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "53", "57": // connection exception, insufficient resources, shutdown
		default:
			return &scrubbedError{msg: msg}
		}
	}
	if ctx.Err() == nil || errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		// Not the caller giving up (a client that went away): the database's fault.
		d.lastFail.Store(time.Now().UnixNano())
	}
	return &scrubbedError{msg: msg, wrap: []error{users.ErrUnavailable}}
}

// contact records a round trip that worked.
func (d *Directory) contact() { d.lastOK.Store(time.Now().UnixNano()) }

// trusted reports whether the cache may answer: the database answered
// within pgTrustCache.
func (d *Directory) trusted(now time.Time) bool {
	return now.UnixNano()-d.lastOK.Load() <= int64(pgTrustCache)
}

// failingFast reports whether the last round trip failed, after the last
// that worked, less than pgFailFast ago.
func (d *Directory) failingFast(now time.Time) bool {
	f := d.lastFail.Load()
	return f > d.lastOK.Load() && now.UnixNano()-f < int64(pgFailFast)
}

// unavailableNow is Lookup's answer while failing fast.
func unavailableNow() error {
	return fmt.Errorf("users database: %w", users.ErrUnavailable)
}

func (d *Directory) Len() int { return int(d.users.Load()) }

func (d *Directory) Slowest() *users.SlowestCheck { return d.slowest.Load() }

// refreshSlowest makes slowest a copy of the slowest usable hash in the
// database, or of the default policy's when there is none, keeping the one
// it has when the scheme and parameters are the same.
func (d *Directory) refreshSlowest(ctx context.Context) error {
	d.slowMu.Lock()
	defer d.slowMu.Unlock()
	var text string
	err := d.pool.QueryRow(ctx, `select password_hash from authsvc_users where hash_work > 0 order by hash_work desc limit 1`).Scan(&text)
	var slowest *password.Hash
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if slowest, err = password.DefaultHashPolicy().Dummy(); err != nil {
			return err
		}
	case err != nil:
		return d.fail(ctx, "find the slowest hash", err)
	default:
		if slowest, err = password.ParseHash(text); err != nil {
			return fmt.Errorf("slowest hash: %w", err)
		}
	}
	shape := slowest.Shape()
	if prev := d.slowest.Load(); prev != nil && prev.Shape == shape {
		return nil
	}
	start := time.Now()
	dummy, err := password.DummyLike(slowest)
	if err != nil {
		return err
	}
	c := &users.SlowestCheck{Hash: dummy, Shape: shape}
	c.Took.Store(int64(time.Since(start))) // making a hash costs what checking one does
	d.slowest.Store(c)
	return nil
}

// Ping reports whether the database answers, for /readyz.
func (d *Directory) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	if _, err := d.pool.Exec(ctx, `select 1`); err != nil {
		return d.fail(ctx, "ping", err)
	}
	d.contact()
	return nil
}

// Close stops Watch and closes the pool.
func (d *Directory) Close() error {
	d.closeMu.Lock()
	d.closed = true
	d.closeMu.Unlock()
	d.close()
	d.watchers.Wait()
	d.pool.Close()
	return nil
}
