package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"authsvc/internal/users"

	"github.com/jackc/pgx/v5"
)

// Reads: Lookup from the cache or a row, the reads past the cache
// (LookupConfirmed, Recheck, Factors), and the scans of rows into users.

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

// List returns every user in the order they were added.
func (d *Directory) List(ctx context.Context) ([]users.User, error) {
	return d.scanUsers(ctx, "list users", `select `+pgUserColumns+` from authsvc_users order by id`)
}
