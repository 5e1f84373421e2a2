package postgres

import (
	"context"
	"crypto/sha256"
	"os"
	"sync"
	"time"

	"authsvc/internal/lru"
	"authsvc/internal/users"

	"github.com/jackc/pgx/v5"
)

// The watcher: Reload, and Watch, which catches up with the change log
// on a NOTIFY (listen) or the poll, dropping the cache entries of the
// users changed and telling the caller whose tokens died.

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
	// After the cuts: a new slowest check may cost a hash (the default
	// policy's, once the last user is gone), and the tokens a change
	// killed must not wait for it. Should it fail, seen stays and the
	// next catch-up tries again; a cut told twice removes nothing twice.
	if err := d.refreshSlowest(ctx); err != nil {
		return false, err
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
