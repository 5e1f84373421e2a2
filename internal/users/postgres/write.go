package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/users"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Writes: every one in a transaction that takes the generation row
// first (write), so that writers across the fleet run one after another
// and each logs and notifies the names it changed.

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
	keepAdmin, linkOnly, err := users.UpdateOptions(opts, len(changes))
	if err != nil {
		return nil, err
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
