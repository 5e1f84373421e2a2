package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
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

// ErrNoSchema: OpenExisting found a database no authsvc has set up (a
// command that writes, or serve, creates the schema).
var ErrNoSchema = errors.New("no authsvc schema yet (a command that writes, or serve, creates it)")

// pgMigrations are the schema's versions: pgMigrations[i] takes it from
// version i to i+1. Published ones never change; a new version appends.
var pgMigrations = []string{
	`create table authsvc_users (
		id            bigint generated always as identity,
		username      text primary key,
		password_hash text not null,
		hash_work     double precision not null, -- seconds a check takes (passwordHash.work); 0: unusable
		name          text not null default '',
		email         text not null default '',
		groups        text[] not null default '{}',
		admin         boolean not null default false,
		disabled      boolean not null default false,
		tokens_after  timestamptz,
		updated_at    timestamptz not null default now(),
		version       bigint not null -- the generation that wrote the row
	);
	create index authsvc_users_hash_work on authsvc_users (hash_work desc);
	create table authsvc_users_state (
		id         boolean primary key default true check (id),
		generation bigint not null,
		users      bigint not null
	);
	insert into authsvc_users_state (generation, users) values (0, 0);
	create table authsvc_user_changes (
		generation bigint not null,
		username   text not null,
		primary key (generation, username)
	);`,
	// users.User.PasswordGeneration: sessions die with the password they were issued on.
	`alter table authsvc_users add column password_generation bigint not null default 0;`,
	// A deleted user's cut-off, which a user added later under the name keeps.
	`create table authsvc_tombstones (
		username     text primary key,
		tokens_after timestamptz not null
	);`,
	// users.User.FailuresAfter: user unlock.
	`alter table authsvc_users add column failures_after timestamptz;`,
	// users.User.DjangoHash: user import --update.
	`alter table authsvc_users add column django_hash text not null default '';`,
	// users.User.MFA: second factors, NULL for none.
	`alter table authsvc_users add column mfa jsonb;`,
	pgAccessTokensSchema,
	// users.User.ResetLink: password reset links.
	pgResetLinkSchema,
	// Directory.Page: keyset pagination in byte order.
	pgUsernameIndex,
	// users.User.CodesAfter, the code lock's epoch apart from a reset's,
	// and users.User.ResetMails, counted apart from the link (resetlink.go).
	pgCodesAndMailsSchema,
	// Directory.LookupKey of an email address: an index, not a scan (keys.go).
	pgEmailIndex,
}

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

// migrate brings the schema to the last of pgMigrations, in one
// transaction under an advisory lock, so that instances starting at once
// migrate one after the other and the later ones find nothing to do.
func (d *Directory) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock($1)`, int64(pgMigrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `create table if not exists authsvc_schema (version integer not null)`); err != nil {
			return err
		}
		var version int
		err := tx.QueryRow(ctx, `select version from authsvc_schema`).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			_, err = tx.Exec(ctx, `insert into authsvc_schema (version) values (0)`)
		}
		if err != nil {
			return err
		}
		if version > len(pgMigrations) {
			// A newer authsvc migrated it: this one would misread the tables.
			return keep(fmt.Errorf("schema version %d is newer than this authsvc knows (%d)", version, len(pgMigrations)))
		}
		for v := version; v < len(pgMigrations); v++ {
			if _, err := tx.Exec(ctx, pgMigrations[v]); err != nil {
				return fmt.Errorf("schema version %d: %w", v+1, err)
			}
		}
		_, err = tx.Exec(ctx, `update authsvc_schema set version = $1`, len(pgMigrations))
		return err
	})
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

// Lookup answers from the cache while the database has answered within
// pgTrustCache, and from the database otherwise; a user the database does
// not have is cached as absent until a change names them. When the
// database cannot be reached the error wraps ErrUnavailable.
func (d *Directory) Lookup(ctx context.Context, username string) (*users.Account, error) {
	if users.CheckUsername(username) != nil {
		return nil, users.ErrNotFound // no write stores such a name: spare the database and the cache
	}
	now := time.Now()
	d.mu.Lock()
	r, cached := d.cache.Get(username)
	if cached && d.trusted(now) {
		d.cache.Put(username, r) // most recently used
		d.mu.Unlock()
		if r.user == nil {
			return nil, users.ErrNotFound
		}
		return r.user, nil
	}
	epoch := d.epoch
	d.mu.Unlock()
	return d.read(ctx, username, epoch, now)
}

// A row is a user as the cache holds them: the Account, nil for no such
// user, and the row's version (the generation that wrote it), which
// tells whether a personal access token found before was read from the
// same row.
type row struct {
	user    *users.Account
	version int64
}

// LookupConfirmed reads the user from the database, never from the cache,
// for a password check (users.LookupConfirmed): while the database cannot
// be reached a login must answer 503, not a verdict from the copy that
// token checks go on with for pgTrustCache, which would also tell who
// logged in recently. One round trip, beside the password's hash; it
// caches what it read, as Lookup does, and fails as Lookup's database
// path does.
func (d *Directory) LookupConfirmed(ctx context.Context, username string) (*users.Account, error) {
	if users.CheckUsername(username) != nil {
		return nil, users.ErrNotFound // no write stores such a name
	}
	d.mu.Lock()
	epoch := d.epoch
	d.mu.Unlock()
	return d.read(ctx, username, epoch, time.Now())
}

// read reads the user from the database and caches what it read, unless
// an invalidation came after epoch (read before it was taken).
func (d *Directory) read(ctx context.Context, username string, epoch uint64, now time.Time) (*users.Account, error) {
	u, _, err := d.readRow(ctx, "look up a user", epoch, now, `where username = $1`, username, func(r row, _ *users.User) {
		d.cache.Put(username, r)
	})
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, users.ErrNotFound
	}
	return u, nil
}

// readRow reads the user of the row that where (with arg) selects in
// authsvc_users, or finds none, and unless an invalidation came after
// epoch, calls keep under d.mu with what it read (a nil user for none) to
// cache it. It admits, times out and fails as every look-up does.
func (d *Directory) readRow(ctx context.Context, op string, epoch uint64, now time.Time, where string, arg any, keep func(row, *users.User)) (*users.Account, *users.User, error) {
	release, err := d.admit(now)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	qctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	var r row
	u, err := scanUser(d.pool.QueryRow(qctx, `select version, `+pgUserColumns+` from authsvc_users `+where, arg), &r.version)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no rows: no such user, r stays zero
		return nil, nil, d.fail(qctx, op, err)
	}
	d.contact()
	if err == nil {
		if r.user, err = users.NewAccount(&u); err != nil {
			return nil, nil, err // a row written around authsvc; List shows it
		}
	}
	d.mu.Lock()
	if d.epoch == epoch {
		keep(r, &u)
	}
	d.mu.Unlock()
	if r.user == nil {
		return nil, nil, nil
	}
	return r.user, &u, nil
}

// Recheck is LookupConfirmed: the row as the database has it now, cached.
// When that row is a change the change log has not been read for yet, the
// catch-up may then find nothing to tell the store; the token check that
// rechecked removes the token it found dead, and every instance judges
// the user's other tokens on a copy no older than the change log's
// (docs/design/tokens.md).
func (d *Directory) Recheck(ctx context.Context, username string) (*users.Account, error) {
	return d.LookupConfirmed(ctx, username)
}

// admit returns unavailableNow when a look-up must not try the database
// now, else a release to call once its round trip is done. While the
// database failed last, one look-up at a time finds out whether it is
// back, at most once per pgFailFast; the others do not queue behind a
// connection that may hang for its timeout.
func (d *Directory) admit(now time.Time) (release func(), err error) {
	if d.lastFail.Load() <= d.lastOK.Load() {
		return func() {}, nil
	}
	if d.failingFast(now) || !d.probing.CompareAndSwap(false, true) {
		return nil, unavailableNow()
	}
	return func() { d.probing.Store(false) }, nil
}

// Factors reads the user's row itself, never the cache: a cached Account
// may be up to pgTrustCache old, and a login must not be checked against
// factors another instance has just removed or replaced (a used recovery
// code, a new authenticator). It fails as Lookup's database path does.
func (d *Directory) Factors(ctx context.Context, username string) (*users.Factors, error) {
	var f *users.Factors
	if err := d.readColumn(ctx, "read a user's second factors", "mfa", username, &f); err != nil {
		return nil, err
	}
	if err := users.CheckFactors(f); err != nil {
		return nil, fmt.Errorf("user %q: mfa: %w", username, err) // a row written around authsvc
	}
	return f, nil
}

// readColumn scans column of the user named username into dst, from the
// database, never the cache: ErrNotFound for no such user. It fails as
// Lookup's database path does.
func (d *Directory) readColumn(ctx context.Context, op, column, username string, dst any) error {
	if users.CheckUsername(username) != nil {
		return users.ErrNotFound // no write stores such a name: spare the database
	}
	release, err := d.admit(time.Now())
	if err != nil {
		return err
	}
	defer release()
	qctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	err = d.pool.QueryRow(qctx, `select `+column+` from authsvc_users where username = $1`, username).Scan(dst)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		d.contact()
		return users.ErrNotFound
	case err != nil:
		return d.fail(qctx, op, err)
	}
	d.contact()
	return nil
}

// FactorKeys reads every row with second factors, within List's timeout.
func (d *Directory) FactorKeys(ctx context.Context) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, pgQueryTimeout+time.Duration(d.Len())*10*time.Microsecond)
	defer cancel()
	rows, err := d.pool.Query(ctx, `select mfa from authsvc_users where mfa is not null`)
	if err != nil {
		return nil, d.fail(ctx, "count the keys of second factors", err)
	}
	defer rows.Close()
	keys := make(map[string]int)
	for rows.Next() {
		var f *users.Factors
		if err := rows.Scan(&f); err != nil {
			return nil, d.fail(ctx, "count the keys of second factors", err)
		}
		users.TallyKeyIDs(keys, f)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(ctx, "count the keys of second factors", err)
	}
	d.contact()
	return keys, nil
}

// pgUserColumns are the columns a User is read from, in scanUser's order.
const pgUserColumns = `username, password_hash, name, email, groups, admin, disabled, tokens_after, password_generation, failures_after, django_hash, mfa, access_tokens, reset_link, codes_after, reset_mails`

// scanUser reads one row of pgUserColumns, after the columns into first
// (those the query selects before them).
func scanUser(row pgx.Row, first ...any) (users.User, error) {
	var u users.User
	var after, unlocked, codesUnlocked *time.Time
	var generation int64
	err := row.Scan(append(first, &u.Username, &u.PasswordHash, &u.Name, &u.Email, &u.Groups, &u.Admin, &u.Disabled, &after, &generation, &unlocked, &u.DjangoHash, &u.MFA, &u.AccessTokens, &u.ResetLink,
		&codesUnlocked, &u.ResetMails)...)
	u.PasswordGeneration = uint64(generation)
	if after != nil {
		u.TokensAfter = after.UTC()
	}
	if unlocked != nil {
		u.FailuresAfter = unlocked.UTC()
	}
	if codesUnlocked != nil {
		u.CodesAfter = codesUnlocked.UTC()
	}
	if u.Groups == nil {
		u.Groups = []string{}
	}
	return u, err
}

// fetch returns the users of names the database has.
func (d *Directory) fetch(ctx context.Context, names []string) (map[string]*users.User, error) {
	return fetchUsers(ctx, d.pool, names, "")
}

// A querier is a pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// fetchUsers returns the users of names that q has, the query ending with
// suffix (" for update" locks their rows).
func fetchUsers(ctx context.Context, q querier, names []string, suffix string) (map[string]*users.User, error) {
	rows, err := q.Query(ctx, `select `+pgUserColumns+` from authsvc_users where username = any($1)`+suffix, names)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := make(map[string]*users.User, len(names))
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		found[u.Username] = &u
	}
	return found, rows.Err()
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

// checkUser returns why u cannot be stored, or nil, and its hash's work.
func checkUser(u *users.User) (float64, error) {
	if err := users.CheckUsername(u.Username); err != nil {
		return 0, err
	}
	hash, err := password.ParseHash(u.PasswordHash)
	if err != nil {
		return 0, fmt.Errorf("user %q: password_hash: %w", u.Username, err)
	}
	if err := users.CheckDjangoHash(u.DjangoHash); err != nil {
		return 0, fmt.Errorf("user %q: django_hash: %w", u.Username, err)
	}
	if err := users.CheckFactors(u.MFA); err != nil {
		return 0, fmt.Errorf("user %q: mfa: %w", u.Username, err)
	}
	if err := users.CheckAccessTokens(u.AccessTokens); err != nil {
		return 0, fmt.Errorf("user %q: %w", u.Username, err)
	}
	if err := users.CheckResetLink(u.ResetLink); err != nil {
		return 0, fmt.Errorf("user %q: %w", u.Username, err)
	}
	if u.Groups == nil {
		u.Groups = []string{}
	}
	return hash.Work(), nil
}

// pgTime is t as stored: NULL for no cut-off, and rounded up to
// PostgreSQL's microseconds, so that a cut-off never moves earlier.
func pgTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	r := t.Truncate(time.Microsecond)
	if r.Before(t) {
		r = r.Add(time.Microsecond)
	}
	r = r.UTC()
	return &r
}

// write runs f in a transaction that first takes the generation row's lock
// (serializing writers across every instance, always in the same order:
// no deadlock) and bumps it; then logs and notifies the names f changed
// and adds delta to the count. Once committed the names' cache entries go,
// so that the write is visible to this Lookup when write returns.
func (d *Directory) write(ctx context.Context, op string, timeout time.Duration, f func(tx pgx.Tx, gen int64) (changed []string, delta int64, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var changed []string
	var count int64
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var gen int64
		if err := tx.QueryRow(ctx, `update authsvc_users_state set generation = generation + 1 returning generation`).Scan(&gen); err != nil {
			return err
		}
		var delta int64
		var err error
		if changed, delta, err = f(tx, gen); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `update authsvc_users_state set users = users + $1 returning users`, delta).Scan(&count); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `insert into authsvc_user_changes (generation, username) select $1, n from unnest($2::text[]) n on conflict do nothing`, gen, changed); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `delete from authsvc_user_changes where generation <= $1`, gen-pgChangesKept); err != nil {
			return err
		}
		// Delivered at commit, to every listener, this instance's too.
		_, err = tx.Exec(ctx, `select pg_notify($1, n) from unnest($2::text[]) n`, pgChannel, changed)
		return err
	})
	if err != nil {
		return d.fail(ctx, op, err)
	}
	d.contact()
	d.users.Store(count)
	d.invalidate(changed)
	if err := d.refreshSlowest(ctx); err != nil {
		d.log.Warn("users database: could not find the slowest hash after a write; the watch will", "err", err)
	}
	return nil
}

// invalidate drops the cache entries of names; "" drops every user known
// to be absent (a batch of additions). It returns the users dropped.
func (d *Directory) invalidate(names []string) map[string]*users.Account {
	was := make(map[string]*users.Account)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.epoch++
	for _, name := range names {
		if name == "" {
			for k, r := range d.cache.All() {
				if r.user == nil {
					d.cache.Remove(k)
				}
			}
			continue
		}
		if r, ok := d.cache.Get(name); ok && r.user != nil {
			was[name] = r.user
		}
		d.cache.Remove(name)
	}
	return was
}

// insertUser is the statement Add, AddAll and Bootstrap store a user with,
// its cut-off no earlier than the tombstone of a deleted user of that name.
const insertUser = `insert into authsvc_users (username, password_hash, hash_work, name, email, groups, admin, disabled, tokens_after, version, password_generation, failures_after, django_hash, mfa, access_tokens, reset_link,
		codes_after, reset_mails)
	values ($1, $2, $3, $4, $5, $6, $7, $8,
		greatest($9::timestamptz, (select tokens_after from authsvc_tombstones where username = $1)),
		$10, $11, $12, $13, $14, $15, $16, $17, $18) on conflict (username) do nothing`

// pgFactors is f as the mfa column's argument: NULL for none, else its
// JSON.
func pgFactors(f *users.Factors) any {
	if f == nil {
		return nil
	}
	return f
}

func insertArgs(u *users.User, work float64, gen int64) []any {
	return []any{u.Username, u.PasswordHash, work, u.Name, u.Email, u.Groups, u.Admin, u.Disabled, pgTime(u.TokensAfter), gen, int64(u.PasswordGeneration),
		pgTime(u.FailuresAfter), u.DjangoHash, pgFactors(u.MFA), pgAccessTokens(u.AccessTokens), pgResetLink(u.ResetLink),
		pgTime(u.CodesAfter), pgResetMails(u.ResetMails)}
}

func (d *Directory) Add(ctx context.Context, u users.User) error {
	work, err := checkUser(&u)
	if err != nil {
		return err
	}
	return d.write(ctx, "add a user", pgQueryTimeout, func(tx pgx.Tx, gen int64) ([]string, int64, error) {
		tag, err := tx.Exec(ctx, insertUser, insertArgs(&u, work, gen)...)
		if err != nil {
			return nil, 0, err
		}
		if tag.RowsAffected() == 0 {
			return nil, 0, keep(fmt.Errorf("user %q: %w", u.Username, users.ErrExists))
		}
		return []string{u.Username}, 1, nil
	})
}

func (d *Directory) AddAll(ctx context.Context, add []users.User) ([]string, error) {
	works := make([]float64, len(add))
	list := make([]users.User, len(add))
	for i, u := range add {
		work, err := checkUser(&u)
		if err != nil {
			return nil, err
		}
		list[i], works[i] = u, work
	}
	var existing []string
	// A batch of a round trip; the time allowed grows with it.
	timeout := pgQueryTimeout + time.Duration(len(add))*100*time.Microsecond
	err := d.write(ctx, "add users", timeout, func(tx pgx.Tx, gen int64) ([]string, int64, error) {
		existing = existing[:0]
		var batch pgx.Batch
		for i := range list {
			batch.Queue(insertUser, insertArgs(&list[i], works[i], gen)...)
		}
		results := tx.SendBatch(ctx, &batch)
		var added int64
		for i := range list {
			tag, err := results.Exec()
			if err != nil {
				results.Close()
				return nil, 0, err
			}
			if tag.RowsAffected() == 0 {
				existing = append(existing, list[i].Username)
			} else {
				added++
			}
		}
		if err := results.Close(); err != nil {
			return nil, 0, err
		}
		// One entry for the batch: additions kill no token, and drop
		// only cache entries of users known to be absent.
		return []string{""}, added, nil
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

// Update is users.Update of d, for a caller that holds a *Directory.
func (d *Directory) Update(ctx context.Context, username string, change func(*users.User) error, opts ...users.WriteOption) error {
	return users.Update(ctx, d, username, change, opts...)
}

// updateUser is the statement UpdateAll writes a changed user with.
const updateUser = `update authsvc_users set username = $2, password_hash = $3, hash_work = $4, name = $5, email = $6,
	groups = $7, admin = $8, disabled = $9, tokens_after = $10, version = $11, password_generation = $12,
	failures_after = $13, django_hash = $14, mfa = $15, access_tokens = $16, reset_link = $17, codes_after = $18, reset_mails = $19,
	updated_at = now() where username = $1`

// UpdateAll changes the users of changes in one transaction of three
// round trips however many they are: their rows read and locked at once,
// the changes applied here, the rows written in one batch. A change that
// renames its user is written alone, inside a savepoint, so that a name
// already taken (ErrExists) fails that change only. With KeepAnAdmin the
// other admins are counted in the write's transaction (otherAdmins); with
// ResetLinkOnly the change writes two columns alone (updateResetLink).
func (d *Directory) UpdateAll(ctx context.Context, changes map[string]func(*users.User) error, opts ...users.WriteOption) (map[string]error, error) {
	keepAdmin, linkOnly := users.HasOption(opts, users.KeepAnAdmin), users.HasOption(opts, users.ResetLinkOnly)
	if (keepAdmin || linkOnly) && len(changes) != 1 {
		return nil, users.ErrOneUser
	}
	if linkOnly {
		for name, change := range changes {
			changeErr, err := d.updateResetLink(ctx, name, change)
			if err != nil {
				return nil, err
			}
			if changeErr != nil {
				return map[string]error{name: changeErr}, nil
			}
		}
		return map[string]error{}, nil
	}
	return d.updateAll(ctx, changes, keepAdmin)
}

// otherAdmins returns how many enabled admins other than username tx
// finds. Every write's first statement updates the one state row (write),
// so the writes run one after another, and at READ COMMITTED this count
// reads every write committed before this one: of two writes taking away
// the last two admins, the second finds the first's.
func otherAdmins(ctx context.Context, tx pgx.Tx, username string) (int, error) {
	var n int
	err := tx.QueryRow(ctx, `select count(*) from authsvc_users where admin and not disabled and username <> $1`, username).Scan(&n)
	return n, err
}

// updateAll is UpdateAll; with keepAdmin, of one user, with KeepAnAdmin.
func (d *Directory) updateAll(ctx context.Context, changes map[string]func(*users.User) error, keepAdmin bool) (map[string]error, error) {
	names := slices.Sorted(maps.Keys(changes))
	var failed map[string]error
	timeout := pgQueryTimeout + time.Duration(len(changes))*100*time.Microsecond
	err := d.write(ctx, "update users", timeout, func(tx pgx.Tx, gen int64) ([]string, int64, error) {
		failed = make(map[string]error)
		found, err := fetchUsers(ctx, tx, names, " for update")
		if err != nil {
			return nil, 0, err
		}
		var batch pgx.Batch
		var changed []string
		for _, name := range names {
			u := found[name]
			if u == nil {
				failed[name] = fmt.Errorf("user %q: %w", name, users.ErrNotFound)
				continue
			}
			was := *u
			cutoff, link := u.TokensAfter, u.ResetLink
			if err := changes[name](u); err != nil {
				failed[name] = err
				continue
			}
			if u.ResetLink != nil && u.ResetLink == link && u.TokensAfter.After(cutoff) {
				// A pending reset link dies with the user's cut-off, as a
				// users file's does (USERS.resets binds it): a logout,
				// reset-mfa or a second factor's confirm ends it too.
				u.ResetLink = nil
			}
			work, err := checkUser(u)
			if err != nil {
				failed[name] = err
				continue
			}
			if keepAdmin {
				err := users.KeepsAnAdmin(&was, u, func() (int, error) { return otherAdmins(ctx, tx, name) })
				switch {
				case errors.Is(err, users.ErrLastAdmin):
					failed[name] = err
					continue
				case err != nil:
					return nil, 0, err
				}
			}
			args := []any{name, u.Username, u.PasswordHash, work, u.Name, u.Email, u.Groups, u.Admin, u.Disabled, pgTime(u.TokensAfter), gen,
				int64(u.PasswordGeneration), pgTime(u.FailuresAfter), u.DjangoHash, pgFactors(u.MFA), pgAccessTokens(u.AccessTokens),
				pgResetLink(u.ResetLink), pgTime(u.CodesAfter), pgResetMails(u.ResetMails)}
			if u.Username == name {
				batch.Queue(updateUser, args...)
				changed = append(changed, name)
				continue
			}
			switch err := renameUser(ctx, tx, args); {
			case err == errTaken:
				failed[name] = fmt.Errorf("user %q: %w", u.Username, users.ErrExists)
			case err != nil:
				return nil, 0, err
			default:
				changed = append(changed, name, u.Username)
			}
		}
		if batch.Len() > 0 {
			if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
				return nil, 0, err
			}
		}
		if len(changed) == 0 {
			return nil, 0, keep(errNoChange) // nothing to commit: the generation stays
		}
		return changed, 0, nil
	})
	if errors.Is(err, errNoChange) {
		return failed, nil
	}
	if err != nil {
		return nil, err
	}
	return failed, nil
}

// errNoChange: an UpdateAll whose every change failed, rolled back.
var errNoChange = errors.New("nothing changed")

// errTaken: a rename onto a name another user has.
var errTaken = errors.New("name taken")

// renameUser writes a user whose change renamed it (updateUser's args)
// inside a savepoint: errTaken, with the transaction still usable, when
// the new name is another user's.
func renameUser(ctx context.Context, tx pgx.Tx, args []any) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	_, err = sp.Exec(ctx, updateUser, args...)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "authsvc_users_pkey" { // the name, not a token's digest
		if err := sp.Rollback(ctx); err != nil {
			return err
		}
		return errTaken
	}
	if err != nil {
		return err
	}
	return sp.Commit(ctx)
}

// Delete deletes the user's row and keeps its tombstone. With
// KeepAnAdmin the other admins are counted in the write's transaction
// (otherAdmins).
func (d *Directory) Delete(ctx context.Context, username string, opts ...users.WriteOption) error {
	return d.delete(ctx, username, users.HasOption(opts, users.KeepAnAdmin))
}

// delete is Delete; with keepAdmin, with KeepAnAdmin.
func (d *Directory) delete(ctx context.Context, username string, keepAdmin bool) error {
	return d.write(ctx, "delete a user", pgQueryTimeout, func(tx pgx.Tx, gen int64) ([]string, int64, error) {
		var was users.User
		err := tx.QueryRow(ctx, `delete from authsvc_users where username = $1 returning username, admin, disabled`, username).Scan(&was.Username, &was.Admin, &was.Disabled)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, 0, keep(fmt.Errorf("user %q: %w", username, users.ErrNotFound))
		}
		if err != nil {
			return nil, 0, err
		}
		if keepAdmin {
			err := users.KeepsAnAdmin(&was, nil, func() (int, error) { return otherAdmins(ctx, tx, username) })
			switch {
			case errors.Is(err, users.ErrLastAdmin):
				return nil, 0, keep(err) // rolled back: the user stays
			case err != nil:
				return nil, 0, err
			}
		}
		_, err = tx.Exec(ctx, `insert into authsvc_tombstones (username, tokens_after) values ($1, $2)
			on conflict (username) do update set tokens_after = greatest(authsvc_tombstones.tokens_after, excluded.tokens_after)`,
			username, time.Now().UTC())
		if err != nil {
			return nil, 0, err
		}
		return []string{username}, -1, nil
	})
}

// List returns every user in the order they were added.
func (d *Directory) List(ctx context.Context) ([]users.User, error) {
	ctx, cancel := context.WithTimeout(ctx, pgQueryTimeout+time.Duration(d.Len())*10*time.Microsecond)
	defer cancel()
	rows, err := d.pool.Query(ctx, `select `+pgUserColumns+` from authsvc_users order by id`)
	if err != nil {
		return nil, d.fail(ctx, "list users", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (users.User, error) { return scanUser(row) })
	if err != nil {
		return nil, d.fail(ctx, "list users", err)
	}
	d.contact()
	return list, nil
}

// Reload reads the count and the slowest hash and drops the cache, so that
// every look-up from now on reads the database. When the database cannot
// be read the cache stays. The changes it skips stay for Watch to apply
// (and to tell hooks.cut of): their entries are gone already.
func (d *Directory) Reload(ctx context.Context) error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	var count int64
	if err := d.pool.QueryRow(ctx, `select users from authsvc_users_state`).Scan(&count); err != nil {
		return d.fail(ctx, "reload", err)
	}
	d.contact()
	if err := d.refreshSlowest(ctx); err != nil {
		return err
	}
	d.users.Store(count)
	d.dropAll()
	return nil
}

// dropAll empties the cache and returns the users it held.
func (d *Directory) dropAll() map[string]*users.Account {
	d.mu.Lock()
	defer d.mu.Unlock()
	was := make(map[string]*users.Account, d.cache.Len())
	for k, r := range d.cache.All() {
		if r.user != nil {
			was[k] = r.user
		}
	}
	d.cache = lru.New[string, row](d.cache.Cap())
	// A row edited by hand keeps its version: the tokens found in it go
	// with the users.
	d.tokens = lru.New[[sha256.Size]byte, tokenEntry](d.tokens.Cap())
	d.epoch++
	return was
}

// catchUp applies every change committed since the generation last seen:
// it drops the changed users' cache entries and tells cut whose tokens
// died. It reports whether there was any. An instance that fell behind the
// change log drops its whole cache. A failure leaves seen where it was, so
// the next call applies the same changes again.
func (d *Directory) catchUp(ctx context.Context, cut func(users.Cut)) (bool, error) {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	now := time.Now() // what a deletion or disable found here is dated by: the read's start
	var gen, count int64
	if err := d.pool.QueryRow(ctx, `select generation, users from authsvc_users_state`).Scan(&gen, &count); err != nil {
		return false, d.fail(ctx, "read state", err)
	}
	d.contact()
	d.users.Store(count)
	if gen == d.seen {
		return false, nil
	}
	rows, err := d.pool.Query(ctx, `select generation, username from authsvc_user_changes where generation > $1 and generation <= $2 order by generation`, d.seen, gen)
	if err != nil {
		return false, d.fail(ctx, "read changes", err)
	}
	var names []string
	first := int64(-1)
	var g int64
	var name string
	_, err = pgx.ForEachRow(rows, []any{&g, &name}, func() error {
		if first < 0 {
			first = g
		}
		names = append(names, name)
		return nil
	})
	if err != nil {
		return false, d.fail(ctx, "read changes", err)
	}
	var was map[string]*users.Account
	if first != d.seen+1 { // the log no longer reaches back to seen, or the database was replaced
		d.log.Warn("users database: fell behind its change log; dropping every cached user", "seen", d.seen, "generation", gen)
		was = d.dropAll()
		names = names[:0]
		for name := range was {
			names = append(names, name)
		}
	} else {
		was = d.invalidate(names)
	}
	if err := d.refreshSlowest(ctx); err != nil {
		return false, err
	}
	if cut != nil {
		names = slicesCompactNames(names)
		is, err := d.fetch(ctx, names)
		if err != nil {
			return false, d.fail(ctx, "read changed users", err)
		}
		for _, name := range names {
			cutChange(name, was[name], is[name], now, cut)
		}
	}
	d.seen = gen
	return true, nil
}

// slicesCompactNames returns names without "" and without repeats.
func slicesCompactNames(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0]
	for _, n := range names {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// cutChange calls cut if the change of the user named name killed tokens,
// by users.CutOf's rules: was is the user as cached before (nil: not
// known), is as the database has them now (nil: deleted), read from
// readAt on.
func cutChange(name string, was *users.Account, is *users.User, readAt time.Time, cut func(users.Cut)) {
	var now *users.Account
	if is != nil {
		var err error
		if now, err = users.NewAccount(is); err != nil {
			// A row written around authsvc, which Lookup refuses too: its
			// tokens are judged dead, as a disabled user's.
			cut(users.Cut{Username: name, Before: readAt, Stamp: users.SessionGeneration(is.PasswordGeneration)})
			return
		}
	}
	if c, ok := users.CutOf(name, was, now, readAt); ok {
		cut(c)
	}
}

// Watch applies changes as they are committed, woken by a notification on
// pgChannel and polling every interval anyway (a notification sent while
// the LISTEN connection was down is lost; the change log is not); on each
// value from hup it drops the whole cache too. A database out of reach is
// logged once per outage, and Lookup stops trusting the cache after
// pgTrustCache. It returns when ctx is done or the directory is closed.
func (d *Directory) Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal, hooks users.WatchHooks) {
	d.closeMu.Lock()
	if d.closed {
		d.closeMu.Unlock()
		return
	}
	d.watchers.Add(1)
	d.closeMu.Unlock()
	defer d.watchers.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(d.done, cancel)()

	wake := make(chan struct{}, 1)
	var listener sync.WaitGroup
	if !d.noListen {
		listener.Go(func() { d.listen(ctx, wake) })
	}
	defer listener.Wait()
	defer cancel() // before the Wait: defers run last first
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			d.step(ctx, hooks, true)
		case <-wake:
			d.step(ctx, hooks, false)
		case <-tick.C:
			d.step(ctx, hooks, false)
		}
	}
}

// step catches up (and, for a SIGHUP, also drops every cached user,
// telling cut of the changes found), and tells hooks and the log.
func (d *Directory) step(ctx context.Context, hooks users.WatchHooks, all bool) {
	changed, err := d.catchUp(ctx, hooks.Cut)
	if err == nil && all {
		err = d.refetchAll(ctx, hooks.Cut)
		changed = true
	}
	if ctx.Err() != nil {
		return
	}
	d.syncMu.Lock()
	was := d.failing
	d.failing = err != nil
	d.syncMu.Unlock()
	switch {
	case err != nil && !was:
		d.log.Error("users database unreachable; logins answer 503, token checks go on from cached users for 5 s more", "users", d.name, "err", err)
	case err == nil && was:
		d.log.Info("users database reachable again", "users", d.name)
		changed = true
	}
	if hooks.Reloaded != nil && (err != nil || changed) {
		hooks.Reloaded(err)
	}
}

// refetchAll drops every cached user and tells cut of those whose tokens
// died in a change the change log does not show (a hand edit).
func (d *Directory) refetchAll(ctx context.Context, cut func(users.Cut)) error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	now := time.Now()
	was := d.dropAll()
	if cut == nil || len(was) == 0 {
		return nil
	}
	names := make([]string, 0, len(was))
	for name := range was {
		names = append(names, name)
	}
	is, err := d.fetch(ctx, names)
	if err != nil {
		return d.fail(ctx, "read users", err)
	}
	for _, name := range names {
		cutChange(name, was[name], is[name], now, cut)
	}
	return nil
}

// listen keeps a connection listening on pgChannel and wakes the watch at
// each notification, and each time it (re)connects, for what it missed.
func (d *Directory) listen(ctx context.Context, wake chan<- struct{}) {
	for {
		err := d.listenOnce(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		d.log.Debug("users database: LISTEN connection lost; polling until it is back", "err", scrub(err.Error(), d.secrets))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pgListenRetry):
		}
	}
}

func (d *Directory) listenOnce(ctx context.Context, wake chan<- struct{}) error {
	cctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, d.listenc.Copy())
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(ctx)
	}()
	if _, err := conn.Exec(cctx, "listen "+pgChannel); err != nil {
		return err
	}
	for {
		select {
		case wake <- struct{}{}:
		default: // a wake is pending already
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
	}
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

// Bootstrap adds admin when the database has no user; of several
// instances starting at once only one does (the writers' lock).
func (d *Directory) Bootstrap(ctx context.Context, admin users.User) (bool, error) {
	if d.Len() > 0 {
		return false, nil
	}
	work, err := checkUser(&admin)
	if err != nil {
		return false, err
	}
	errNotEmpty := errors.New("not empty")
	var count int64
	err = d.write(ctx, "bootstrap", pgQueryTimeout, func(tx pgx.Tx, gen int64) ([]string, int64, error) {
		if err := tx.QueryRow(ctx, `select users from authsvc_users_state`).Scan(&count); err != nil {
			return nil, 0, err
		}
		if count > 0 {
			return nil, 0, keep(errNotEmpty) // another instance bootstrapped meanwhile
		}
		if _, err := tx.Exec(ctx, insertUser, insertArgs(&admin, work, gen)...); err != nil {
			return nil, 0, err
		}
		return []string{admin.Username}, 1, nil
	})
	if errors.Is(err, errNotEmpty) {
		d.users.Store(count) // as the winner left it
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bootstrap the users database: %w", err)
	}
	return true, nil
}
