package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"strconv"
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
//   - Len reports how many users Lookup knows; DummyHash is a hash to
//     compare against for unknown and disabled users, as slow as a typical
//     user's, so that they take as long as a wrong password.
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
//     every value from hup), telling reloaded of each attempt, until ctx
//     is done: writes from other processes reach Lookup within 5 s.
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
	Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal, reloaded func(error))
}

// A userIndex is an immutable snapshot of a directory's users as the server
// uses them; a reload builds a new one and swaps it in whole.
type userIndex struct {
	byName map[string]*dirUser
	// dummyHash is compared against for unknown and disabled users, at the
	// users file's most common cost, so they take as long as a wrong password.
	dummyHash []byte
	dummyCost int
}

// dirUser is a user as the handlers need it.
type dirUser struct {
	hash       []byte
	stamp      uint64
	admin      bool
	disabled   bool
	info       userInfo
	infoJSON   []byte   // the info reply, encoded once per reload
	infoLength []string // its Content-Length header value
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
			hash:       []byte(u.PasswordHash),
			stamp:      passwordStamp(u.PasswordHash),
			admin:      u.Admin,
			disabled:   u.Disabled,
			info:       info,
			infoJSON:   append(infoJSON, '\n'),
			infoLength: []string{strconv.Itoa(len(infoJSON) + 1)},
		}
	}
	d.dummyCost = mostCommonCost(costs)
	if prev != nil && prev.dummyCost == d.dummyCost {
		d.dummyHash = prev.dummyHash
		return d, nil
	}
	var secret [16]byte
	rand.Read(secret[:])
	hash, err := bcrypt.GenerateFromPassword(secret[:], d.dummyCost)
	if err != nil {
		return nil, err
	}
	d.dummyHash = hash
	return d, nil
}

// mostCommonCost returns the cost with the highest count, the lower on a tie,
// or defaultCost when there is none.
func mostCommonCost(counts map[int]int) int {
	best, bestN := defaultCost, 0
	for cost, n := range counts {
		if n > bestN || (n == bestN && cost < best) {
			best, bestN = cost, n
		}
	}
	return best
}

// A userReader answers the questions a login and a token check ask: a
// Directory, or one index of one.
type userReader interface {
	Lookup(ctx context.Context, username string) (*dirUser, error)
	DummyHash() []byte
}

// authenticate returns the user if password is theirs, checked with compare
// (bcrypt.CompareHashAndPassword or a hasherPool's). Unknown and disabled
// users, and passwords bcrypt would truncate, cost one dummy compare so that
// every failure takes the same time.
func authenticate(ctx context.Context, d userReader, username, password string, compare func(hash, password []byte) error) (*dirUser, bool) {
	u, _ := d.Lookup(ctx, username)
	usable := u != nil && !u.disabled && len(password) <= bcryptMaxLen
	hash := d.DummyHash()
	if usable {
		hash = u.hash
	}
	if err := compare(hash, []byte(password)); err != nil || !usable {
		return nil, false
	}
	return u, true
}

// sessionUser returns the user a session belongs to, or nil when the token
// has died with its user: deleted, disabled, or password changed.
func sessionUser(ctx context.Context, d userReader, s Session) *dirUser {
	u, err := d.Lookup(ctx, s.Username)
	if err != nil || u.disabled || u.stamp != s.Stamp {
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

// DummyHash returns the hash unknown and disabled users are checked against.
func (x *userIndex) DummyHash() []byte { return x.dummyHash }
