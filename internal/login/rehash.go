package login

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/users"
)

// Rehashes on login are written in batches. A switch-over is a wave of
// first logins, each a rehash: written one by one, each rewrote the whole
// users file (issue 20, point 3). A login hashes its password under the
// policy, as before (only it has the password), and queues the new hash;
// one Directory.UpdateAll writes every queued hash, once defaultRehashBatch
// are queued or defaultRehashDelay after the first, whichever comes first.
const (
	defaultRehashDelay = time.Second
	defaultRehashBatch = 256
	// maxQueuedRehashes, in batches, bounds the hashes waiting while a
	// write is slow (a million-user file takes seconds; PostgreSQL may be
	// away): a few hundred bytes each.
	maxQueuedRehashes = 4
)

// A rehashQueue holds the rehashes waiting to be written. Its zero value
// is ready; a Guard has one.
type rehashQueue struct {
	mu      sync.Mutex              // guards pending, writing, timer, dropped and closed
	pending map[string]queuedRehash // by username: waiting for the next write
	writing map[string]queuedRehash // by username: in the write under way
	timer   *time.Timer             // writes the pending ones at the delay; nil when none are pending
	dropped int                     // rehashes not queued, the queue full, since the last write
	closed  bool                    // CloseRehashes was called: nothing more is queued

	writeMu sync.Mutex // serializes writes: one batch at a time, in order
}

// A queuedRehash is one user's new hash, to be written over stored only.
type queuedRehash struct {
	dir    users.Directory
	stored string // the hash the login verified
	hash   string // the new hash, under the policy
	from   string // stored's scheme, for the log line
}

// rehashDelay and rehashBatch are g's settings or their defaults.
func (g *Guard) rehashDelay() time.Duration {
	if g.RehashDelay > 0 {
		return g.RehashDelay
	}
	return defaultRehashDelay
}

func (g *Guard) rehashBatch() int {
	if g.RehashBatch > 0 {
		return g.RehashBatch
	}
	return defaultRehashBatch
}

// queued reports whether a rehash of username over stored waits or is
// being written: another login of the user need not hash again.
func (q *rehashQueue) queued(username, stored string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok := q.pending[username]; ok && r.stored == stored {
		return true
	}
	r, ok := q.writing[username]
	return ok && r.stored == stored
}

// queueRehash queues r for username, and starts a write when the batch is
// full or the delay's timer when it is the first waiting. A full queue
// drops r rather than write at once: a write on the login path would hold
// this reply, and every login queued behind it, for a whole rewrite of the
// users file (seconds at a million users) just when the writes cannot keep
// up, whereas a dropped rehash costs nothing: the old hash stays valid and
// the user's next login rehashes it.
func (g *Guard) queueRehash(username string, r queuedRehash) {
	q := &g.rehashes
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.pending) >= maxQueuedRehashes*g.rehashBatch() {
		q.dropped++
		g.metrics().Rehashed("skipped")
		return
	}
	if q.pending == nil {
		q.pending = make(map[string]queuedRehash)
	}
	if _, ok := q.pending[username]; ok {
		g.metrics().Rehashed("skipped") // over another hash, changed meanwhile: this one wins
	}
	q.pending[username] = r
	switch {
	case q.timer == nil:
		delay := g.rehashDelay()
		if len(q.pending) >= g.rehashBatch() {
			delay = 0
		}
		q.timer = time.AfterFunc(delay, func() { g.writeRehashes(context.Background()) })
	case len(q.pending) == g.rehashBatch():
		q.timer.Reset(0)
	}
}

// FlushRehashes writes the rehashes waiting now, in one UpdateAll per
// directory, after the write under way if there is one; it returns when
// they are written or ctx is done, whichever comes first (the write then
// goes on).
func (g *Guard) FlushRehashes(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.writeRehashes(ctx)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// CloseRehashes writes the rehashes waiting, within ctx (at shutdown, the
// grace left), and queues no more: a later rehash is skipped.
func (g *Guard) CloseRehashes(ctx context.Context) {
	q := &g.rehashes
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	g.FlushRehashes(ctx)
	q.mu.Lock()
	left := len(q.pending) + len(q.writing)
	q.mu.Unlock()
	if left > 0 && g.Log != nil {
		g.Log.LogAttrs(ctx, slog.LevelWarn, "rehashes on login not written before shutdown; those users are rehashed at their next login", slog.Int("rehashes", left))
	}
}

// writeRehashes takes the rehashes waiting and writes them.
func (g *Guard) writeRehashes(ctx context.Context) {
	q := &g.rehashes
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	q.mu.Lock()
	batch, dropped := q.pending, q.dropped
	q.pending, q.writing, q.dropped = nil, batch, 0
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.writing = nil
		q.mu.Unlock()
	}()
	if dropped > 0 && g.Log != nil {
		g.Log.LogAttrs(ctx, slog.LevelWarn, "rehashes on login dropped: their writes could not keep up; those users are rehashed at a later login", slog.Int("dropped", dropped))
	}
	// One directory in practice (the server's); grouped all the same.
	var dirs []users.Directory
	byDir := make(map[int]map[string]func(*users.User) error)
	for name, r := range batch {
		i := 0
		for i < len(dirs) && dirs[i] != r.dir {
			i++
		}
		if i == len(dirs) {
			dirs = append(dirs, r.dir)
			byDir[i] = make(map[string]func(*users.User) error)
		}
		byDir[i][name] = func(x *users.User) error {
			if x.PasswordHash != r.stored {
				return errHashChanged
			}
			x.PasswordHash = r.hash
			return nil
		}
	}
	for i, dir := range dirs {
		failed, err := dir.UpdateAll(ctx, byDir[i])
		for name := range byDir[i] {
			if err == nil {
				g.rehashWritten(ctx, name, batch[name].from, failed[name])
			} else {
				g.rehashWritten(ctx, name, batch[name].from, err)
			}
		}
	}
}

// rehashWritten counts and logs the write of username's rehash from the
// scheme from: err is its own failure, or the whole write's.
func (g *Guard) rehashWritten(ctx context.Context, username, from string, err error) {
	switch {
	case errors.Is(err, errHashChanged):
		g.metrics().Rehashed("skipped")
	case err != nil:
		g.metrics().Rehashed("error")
		g.Log.LogAttrs(ctx, slog.LevelWarn, "rehash on login failed; the old hash stays", slog.String("username", username), slog.Any("err", err))
	default:
		g.metrics().Rehashed("ok")
		g.Log.LogAttrs(ctx, slog.LevelInfo, "rehashed on login", slog.String("username", username),
			slog.String("from", from), slog.String("to", g.Policy.Scheme))
	}
}

// errHashChanged: the stored hash changed between the check and the rehash
// (a concurrent user passwd, which wins).
var errHashChanged = errors.New("password hash changed meanwhile")

// Rehash queues password's hash under the policy, to be written with the
// next batch, if u's stored hash is outside it (another scheme, other
// parameters, a Django form), as Django's must_update does. It never ends
// a session (a token's life does not hang on the hash), writes only if the
// stored hash is still the one just verified, never writes a bcrypt hash
// of a password bcrypt would cut, and when the write fails the login has
// succeeded all the same: the failure is logged.
func (g *Guard) Rehash(ctx context.Context, dir users.Directory, u *users.Account, pw string) {
	if !g.Policy.NeedsRehash(u.Hash()) {
		return
	}
	if g.Policy.Scheme == password.SchemeBcrypt && len(pw) > password.BcryptKeyBytes {
		g.metrics().Rehashed("skipped")
		return
	}
	if g.rehashes.queued(u.Username(), u.StoredHash()) {
		return // one rehash of this hash is counted when written
	}
	hash, err := g.Policy.Hash([]byte(pw))
	if err != nil {
		g.rehashWritten(ctx, u.Username(), "", err)
		return
	}
	g.queueRehash(u.Username(), queuedRehash{dir: dir, stored: u.StoredHash(), hash: hash, from: u.Hash().Scheme()})
}
