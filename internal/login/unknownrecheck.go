package login

import (
	"context"
	"errors"
	"sync"
	"time"

	"authsvc/internal/lru"
	"authsvc/internal/users"
)

// A login that names a user the loaded copy of a users file does not hold,
// or holds disabled, may name one added or enabled a moment ago (user add,
// then a login within the reload interval): such a login first checks
// whether the file changed, a stat, as Recheck does. A flood of unknown names must not cost a stat a
// request, so a client gets one such check per unknownRecheckEvery at
// most; the others are answered from the copy, in the same time as ever.
const (
	unknownRecheckEvery   = 100 * time.Millisecond
	unknownRecheckClients = 10_000 // clients remembered; the oldest are forgotten first
)

// A rechecker is a directory that can look a user up again in its backing
// as it is now (users.Directory's Recheck).
type rechecker interface {
	Recheck(ctx context.Context, username string) (*users.Account, error)
}

// unknownRechecks decides which logins of unknown users may recheck the
// directory: at most one per client per unknownRecheckEvery.
type unknownRechecks struct {
	mu   sync.Mutex                    // guards last
	last *lru.Cache[string, time.Time] // client → when it last rechecked; nil until the first
}

// allow reports whether client may recheck the directory at now, and if
// so counts it.
func (u *unknownRechecks) allow(client string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last == nil {
		u.last = lru.New[string, time.Time](unknownRecheckClients)
	}
	if at, ok := u.last.Get(client); ok && now.Sub(at) < unknownRecheckEvery && now.Sub(at) >= 0 {
		return false
	}
	u.last.Put(client, now)
	return true
}

// lookupAnew looks username up in r: from its loaded copy, and when that
// does not hold the user, or holds them disabled, and the client may,
// again in the backing. A disabled user may have been enabled a moment
// ago: user enable, then a login before the next reload, or a reload
// that ran while the enable held the file's lock and so left its
// pending cut-off record out (usersfile). Either answer is the one a
// wrong password gets, so the recheck tells no one which it was.
func (g *Guard) lookupAnew(ctx context.Context, r users.Reader, username, client string) (*users.Account, error) {
	u, err := r.Lookup(ctx, username)
	if u != nil && !u.Disabled() || err != nil && !errors.Is(err, users.ErrNotFound) {
		return u, err
	}
	rc, ok := r.(rechecker)
	if !ok || !g.unknown.allow(client, g.Now()) {
		return u, err
	}
	return rc.Recheck(ctx, username)
}
