package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// defaultCost is the bcrypt cost of new hashes, and of the dummy hash when
// the users file has none to copy.
const defaultCost = 12

// A directory is an immutable snapshot of the users file as the server uses
// it; a reload builds a new one and swaps it in whole.
type directory struct {
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

// newDirectory builds a directory from validated users, reusing prev's dummy
// hash when its cost still matches.
func newDirectory(users []User, prev *directory) (*directory, error) {
	d := &directory{byName: make(map[string]*dirUser, len(users))}
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

// authenticate returns the user if password is theirs, checked with compare
// (bcrypt.CompareHashAndPassword or a hasherPool's). Unknown and disabled
// users, and passwords bcrypt would truncate, cost one dummy compare so that
// every failure takes the same time.
func (d *directory) authenticate(username, password string, compare func(hash, password []byte) error) (*dirUser, bool) {
	u := d.byName[username]
	usable := u != nil && !u.disabled && len(password) <= bcryptMaxLen
	hash := d.dummyHash
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
func (d *directory) sessionUser(s Session) *dirUser {
	u := d.byName[s.Username]
	if u == nil || u.disabled || u.stamp != s.Stamp {
		return nil
	}
	return u
}

// userSource holds the current directory and reloads it from the users file.
type userSource struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[directory]

	mu   sync.Mutex  // serializes reloads; guards seen
	seen os.FileInfo // the file as last loaded, to notice changes

	onReload func(error) // if set, told of every reload after the first; set before watch
}

// loadUserSource loads the users file at path; an error stops start-up.
func loadUserSource(path string, log *slog.Logger) (*userSource, error) {
	s := &userSource{path: path, log: log}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// dir returns the current snapshot.
func (s *userSource) dir() *directory { return s.cur.Load() }

// reload replaces the directory with the file's current content. On any
// error the previous users stay in force.
func (s *userSource) reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, err := os.Stat(s.path)
	if err != nil {
		return err
	}
	users, err := readUsersFile(s.path)
	if err != nil {
		return err
	}
	d, err := newDirectory(users, s.cur.Load())
	if err != nil {
		return err
	}
	s.cur.Store(d)
	s.seen = info
	return nil
}

// changed reports whether the file differs from the one last loaded.
func (s *userSource) changed() bool {
	info, err := os.Stat(s.path)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		return s.seen != nil // vanished: try, fail and log once per change
	}
	return s.seen == nil || !os.SameFile(info, s.seen) ||
		!info.ModTime().Equal(s.seen.ModTime()) || info.Size() != s.seen.Size()
}

// watch reloads on every value from hup and whenever the file changes,
// checking every interval, until ctx is done.
func (s *userSource) watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			s.logReload("SIGHUP")
		case <-tick.C:
			if s.changed() {
				s.logReload("file changed")
			}
		}
	}
}

func (s *userSource) logReload(why string) {
	err := s.reload()
	if s.onReload != nil {
		s.onReload(err)
	}
	if err != nil {
		s.log.Error("users file refused; previous users stay in force", "reason", why, "err", err)
		s.markSeen()
		return
	}
	s.log.Info("users file reloaded", "reason", why, "users", len(s.dir().byName))
}

// markSeen records the file's current state after a refused reload, so a
// broken file is reported once rather than every interval.
func (s *userSource) markSeen() {
	info, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		info = nil
	} else if err != nil {
		return
	}
	s.mu.Lock()
	s.seen = info
	s.mu.Unlock()
}
