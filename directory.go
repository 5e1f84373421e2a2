package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// defaultCost is the bcrypt cost of new hashes, and of the dummy hash when
// the directory has none to copy.
const defaultCost = 12

// Sentinel errors of the Directory contract; callers test them with errors.Is.
var (
	// errUserNotFound: no user of that name.
	errUserNotFound = errors.New("no such user")
	// errUserExists: Add of a name that is taken.
	errUserExists = errors.New("user already exists")
)

// A Directory is where users live: the users file (fileDirectory), or any
// other backing that keeps the same promises.
//
// The contract every implementation meets, checked by testDirectoryConformance:
//   - Lookup returns the user named username as the server uses it, or
//     errUserNotFound. It answers from what was last loaded, so the token
//     check on the hot path never waits for the backing.
//   - Len reports how many users Lookup knows; Slowest is the check every
//     failed login is made to cost: against a hash at the slowest
//     parameters in the directory, so that unknown, disabled and wrong
//     look alike in time whatever mix of costs the users have.
//   - Add, Update and Delete write one user through to the backing under
//     the backing's own lock (concurrent writers, in this process or
//     another, never lose an entry) and are visible to this Directory's
//     Lookup when they return. Add of a taken name is errUserExists;
//     Update and Delete of a missing one, errUserNotFound. When change or
//     the backing fails, nothing is written.
//   - List returns every user from the backing, in its stored order.
//   - Reload loads the backing's current state now. A backing that cannot
//     be read or does not validate is an error, and the previous users stay
//     in force (fail closed: nothing is half-loaded).
//   - Watch reloads when the backing changes, within interval (and on
//     every value from hup), until ctx is done: writes from other
//     processes reach Lookup within 5 s. It tells hooks.reloaded of each
//     attempt, and hooks.cut of every user whose tokens the change killed
//     (deleted, disabled, password changed, a new cut-off), so that the
//     caller can remove them from the token store for good.
//   - All methods are safe for concurrent use. No method logs or returns
//     a password or a hash outside the dirUser and User values it is asked for.
type Directory interface {
	userReader
	Len() int
	Add(ctx context.Context, u User) error
	Update(ctx context.Context, username string, change func(*User) error) error
	Delete(ctx context.Context, username string) error
	List(ctx context.Context) ([]User, error)
	Reload(ctx context.Context) error
	Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal, hooks watchHooks)
}

// watchHooks tell Watch's caller what a reload did; either may be nil.
type watchHooks struct {
	reloaded func(err error)                         // each reload attempt; nil on success
	cut      func(username string, before time.Time) // the user's tokens issued before before died in the change
}

// cutsBetween calls cut for every user of old whose tokens died in new:
// deleted, newly disabled or with another password (every token issued
// before now), or with a later cut-off (every token issued before it).
func cutsBetween(old, new *userIndex, now time.Time, cut func(username string, before time.Time)) {
	if old == nil || cut == nil {
		return
	}
	for name, was := range old.byName {
		is := new.byName[name]
		switch {
		case is == nil, is.disabled && !was.disabled:
			cut(name, now)
		case is.tokensAfter.After(was.tokensAfter):
			cut(name, is.tokensAfter)
		case is.stamp != was.stamp:
			cut(name, now)
		}
	}
}

// A userIndex is an immutable snapshot of a directory's users as the server
// uses them; a reload builds a new one and swaps it in whole.
type userIndex struct {
	byName  map[string]*dirUser
	slowest *slowestCheck
}

// A slowestCheck is what every failed login is made to cost: a check
// against a hash at the slowest parameters in the directory. Unknown and
// disabled users are checked against its hash; a wrong password against a
// faster hash is held until the check would have taken as long (a sleep,
// no CPU), so that mixed costs do not tell which users exist.
type slowestCheck struct {
	hash []byte
	cost int
	took atomic.Int64 // nanoseconds a check against hash takes: measured when it is made, then a moving average of the dummy checks
}

// observe folds the duration of a check against the slowest hash into the average.
func (c *slowestCheck) observe(d time.Duration) {
	old := c.took.Load()
	c.took.Store(old + (int64(d)-old)/8) // a lost update between racing logins only delays the average
}

// pad sleeps until a check that took d has taken as long as a slowest one.
func (c *slowestCheck) pad(d time.Duration) {
	if rest := time.Duration(c.took.Load()) - d; rest > 0 {
		time.Sleep(rest)
	}
}

// dirUser is a user as the handlers need it.
type dirUser struct {
	hash        []byte
	stamp       uint64
	tokensAfter time.Time // tokens issued before it are dead
	admin       bool
	disabled    bool
	info        userInfo
	infoJSON    []byte   // the info reply, encoded once per reload
	infoLength  []string // its Content-Length header value
}

// newUserIndex builds an index of validated users, reusing prev's dummy
// hash when its cost still matches.
func newUserIndex(users []User, prev *userIndex) (*userIndex, error) {
	d := &userIndex{byName: make(map[string]*dirUser, len(users))}
	costs := make(map[int]int)
	for i := range users {
		u := &users[i]
		cost, err := hashCost(u.PasswordHash)
		if err != nil {
			return nil, err
		}
		costs[cost]++
		info := u.info()
		infoJSON, err := json.Marshal(info)
		if err != nil {
			return nil, err
		}
		d.byName[u.Username] = &dirUser{
			hash:        []byte(u.PasswordHash),
			stamp:       passwordStamp(u.PasswordHash),
			tokensAfter: u.TokensAfter,
			admin:       u.Admin,
			disabled:    u.Disabled,
			info:        info,
			infoJSON:    append(infoJSON, '\n'),
			infoLength:  []string{strconv.Itoa(len(infoJSON) + 1)},
		}
	}
	cost := defaultCost
	if len(costs) > 0 {
		cost = slices.Max(slices.Collect(maps.Keys(costs)))
	}
	if prev != nil && prev.slowest.cost == cost {
		d.slowest = prev.slowest
		return d, nil
	}
	var secret [16]byte
	rand.Read(secret[:])
	start := time.Now()
	hash, err := bcrypt.GenerateFromPassword(secret[:], cost)
	if err != nil {
		return nil, err
	}
	d.slowest = &slowestCheck{hash: hash, cost: cost}
	d.slowest.took.Store(int64(time.Since(start))) // hashing costs what checking does
	return d, nil
}

// A userReader answers the questions a login and a token check ask: a
// Directory, or one index of one.
type userReader interface {
	Lookup(ctx context.Context, username string) (*dirUser, error)
	Slowest() *slowestCheck
}

// authenticate returns the user if password is theirs, checked with compare
// (bcrypt.CompareHashAndPassword or a hasherPool's). Unknown and disabled
// users, and passwords bcrypt would truncate, cost one dummy compare so that
// every failure takes the same time.
//
// Every failure takes as long as a check against the slowest hash in the
// directory: unknown and disabled users are checked against it, and a wrong
// password against a faster hash is padded to its time.
func authenticate(ctx context.Context, d userReader, username, password string, compare func(hash, password []byte) error) (*dirUser, bool) {
	u, _ := d.Lookup(ctx, username)
	usable := u != nil && !u.disabled && len(password) <= bcryptMaxLen
	slowest := d.Slowest()
	hash := slowest.hash
	if usable {
		hash = u.hash
	}
	start := time.Now()
	err := compare(hash, []byte(password))
	took := time.Since(start)
	switch {
	case usable && err == nil:
		return u, true
	case usable:
		slowest.pad(took)
	default:
		slowest.observe(took)
	}
	return nil, false
}

// sessionUser returns the user a session belongs to, or nil when the token
// has died with its user: deleted, disabled, password changed, or issued
// before the user's cut-off (TokensAfter).
func sessionUser(ctx context.Context, d userReader, s Session) *dirUser {
	u, err := d.Lookup(ctx, s.Username)
	if err != nil || u.disabled || u.stamp != s.Stamp || s.IssuedAt.Before(u.tokensAfter) {
		return nil
	}
	return u
}

// Lookup returns the user named username, or errUserNotFound.
func (x *userIndex) Lookup(_ context.Context, username string) (*dirUser, error) {
	if u := x.byName[username]; u != nil {
		return u, nil
	}
	return nil, errUserNotFound
}

// Slowest returns what a failed login against this index costs.
func (x *userIndex) Slowest() *slowestCheck { return x.slowest }
