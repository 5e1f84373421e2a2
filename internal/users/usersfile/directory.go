package usersfile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/tick"
	"authsvc/internal/users"
)

// A Directory is the users.Directory kept in a JSON users file (the format is
// in doc.go): Lookup answers from an index of the file as last loaded, and
// writes go through the streaming editor (edit.go), under the file's lock.
type Directory struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[userIndex] // nil until the first load

	mu       sync.Mutex       // serializes loads; guards seen, refused, hooks, cuts and cutsSeen
	seen     os.FileInfo      // the file as last loaded or refused, to notice changes
	refused  bool             // the last load failed: the users in force are older than the file
	hooks    users.WatchHooks // Watch's, told of the loads Recheck makes too
	cuts     cutoffsView      // the cut-offs file as last read
	cutsSeen os.FileInfo      // the cut-offs file as last read; nil when there was none

	writes atomic.Int64 // replacements of the file by this directory (Writes)

	recheckMu sync.Mutex // serializes Recheck's checks, so that a burst of them loads a changed file once

	afterRead func() // a test's hook between reading the file and parsing it
}

var _ users.Directory = (*Directory)(nil)

// New returns the directory in the users file at path, not
// yet loaded: the CLI writes through it without reading every user first.
func New(path string, log *slog.Logger) *Directory {
	return &Directory{path: path, log: log}
}

// Open loads the users file at path; an error stops start-up.
func Open(path string, log *slog.Logger) (*Directory, error) {
	s := New(path, log)
	if err := s.Reload(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

// index returns the current snapshot, empty before the first load.
func (s *Directory) index() *userIndex {
	if x := s.cur.Load(); x != nil {
		return x
	}
	return emptyIndex
}

// emptyIndex is the index of a directory not yet loaded.
var emptyIndex = &userIndex{byName: map[string]*users.Account{}}

func (s *Directory) Lookup(_ context.Context, username string) (*users.Account, error) {
	return s.index().Lookup(context.Background(), username)
}

// Recheck loads the file again when it has changed since it was last
// loaded or refused (a stat, as Watch's check), then answers as Lookup.
// While the file as it is now does not load it answers ErrUnavailable: the
// users in force are older than the file, and may be older than the token
// the caller is judging. A directory never loaded (the CLI's) reads
// nothing.
func (s *Directory) Recheck(ctx context.Context, username string) (*users.Account, error) {
	if err := s.recheck(); err != nil {
		return nil, err
	}
	return s.Lookup(ctx, username)
}

// recheck loads the file again when it has changed since it was last
// loaded or refused, and returns an error wrapping ErrUnavailable while
// the file as it is now does not load (Recheck).
func (s *Directory) recheck() error {
	if s.cur.Load() == nil {
		return nil
	}
	s.recheckMu.Lock()
	if s.changed() {
		s.mu.Lock()
		hooks := s.hooks
		s.mu.Unlock()
		s.logReload("recheck", hooks)
	}
	s.recheckMu.Unlock()
	s.mu.Lock()
	refused := s.refused
	s.mu.Unlock()
	if refused {
		return fmt.Errorf("%w: %s was changed and does not load", users.ErrUnavailable, s.path)
	}
	return nil
}

// Factors answers from the file as last loaded, as Lookup does: the
// directory's own writes reload it before they return.
func (s *Directory) Factors(_ context.Context, username string) (*users.Factors, error) {
	x := s.index()
	if x.byName[username] == nil {
		return nil, users.ErrNotFound
	}
	return x.factors[username].Clone(), nil
}

// FactorKeys counts the keys of the file as last loaded.
func (s *Directory) FactorKeys(context.Context) (map[string]int, error) {
	keys := make(map[string]int)
	for _, f := range s.index().factors {
		users.TallyKeyIDs(keys, f)
	}
	return keys, nil
}

// String names the directory for messages: the file's path.
func (s *Directory) String() string { return s.path }

// Ping answers nil: the users in force are in memory. A reload that fails
// keeps them (see Reload), so a broken file never makes Lookup fail.
func (s *Directory) Ping(context.Context) error { return nil }

func (s *Directory) Len() int { return len(s.index().byName) }

func (s *Directory) Slowest() *users.SlowestCheck {
	x := s.index()
	if x.slowest == nil {
		x, _ = newUserIndex(nil, nil) // an unloaded directory still costs a compare
	}
	return x.slowest
}

func (s *Directory) Add(ctx context.Context, u users.User) error {
	if u.Groups == nil {
		u.Groups = []string{}
	}
	return s.edit(true, streamEdit{
		touches: func(name string) bool { return name == u.Username },
		entry: func(*users.User) (bool, error) {
			return false, fmt.Errorf("user %q: %w", u.Username, users.ErrExists)
		},
		end: func() ([]users.User, error) { return []users.User{u}, nil },
	})
}

// Bootstrap creates the missing users file holding admin alone. An existing
// file, even an empty or unreadable one, is left to the load to judge.
func (s *Directory) Bootstrap(ctx context.Context, admin users.User) (bool, error) {
	if _, err := os.Stat(s.path); !errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	added := false
	err := Edit(s.path, true, func(list []users.User) ([]users.User, error) {
		if len(list) > 0 {
			return list, nil // another process created it meanwhile
		}
		added = true
		return []users.User{admin}, nil
	})
	if err != nil {
		return false, fmt.Errorf("create users file: %w", err)
	}
	s.writes.Add(1) // Edit writes even when another process created it meanwhile
	return added, nil
}

func (s *Directory) AddAll(ctx context.Context, add []users.User) ([]string, error) {
	var existing []string
	names, taken := make(map[string]bool, len(add)), make(map[string]bool)
	for _, u := range add {
		names[u.Username] = true
	}
	err := s.edit(true, streamEdit{
		touches: func(name string) bool { return names[name] },
		entry: func(u *users.User) (bool, error) {
			taken[u.Username] = true
			return true, nil
		},
		end: func() ([]users.User, error) {
			existing = existing[:0]
			var list []users.User
			for _, u := range add {
				if taken[u.Username] {
					existing = append(existing, u.Username)
					continue
				}
				if u.Groups == nil {
					u.Groups = []string{}
				}
				list = append(list, u)
				taken[u.Username] = true
			}
			return list, nil
		},
	})
	return existing, err
}

// Update is users.Update of s, for a caller that holds a *Directory.
func (s *Directory) Update(ctx context.Context, username string, change func(*users.User) error, opts ...users.WriteOption) error {
	return users.Update(ctx, s, username, change, opts...)
}

// UpdateAll changes every user of changes in one rewrite of the file, and
// records the cut-offs of those whose tokens the changes kill (a later
// TokensAfter, newly disabled) in one synced append before the rename,
// pending until the file is in place (cutoffs.go). A
// change that fails, or makes an entry that could not be loaded (its name,
// its hash), leaves its entry byte for byte as it was; when every change
// fails nothing is written. With KeepAnAdmin the other admins are
// counted in the same pass, under the same lock, as the write; with
// ResetLinkOnly the change goes to the resets file (updateResetLink),
// the users file left as it is.
func (s *Directory) UpdateAll(ctx context.Context, changes map[string]func(*users.User) error, opts ...users.WriteOption) (map[string]error, error) {
	keepAdmin, linkOnly, err := users.UpdateOptions(opts, len(changes))
	if err != nil {
		return nil, err
	}
	if linkOnly {
		for name, change := range changes {
			if err := s.updateResetLink(name, change); err != nil {
				return map[string]error{name: err}, nil
			}
		}
		return map[string]error{}, nil
	}
	return s.updateAll(changes, keepAdmin)
}

// updateAll is UpdateAll; with keepAdmin, of one user, with KeepAnAdmin.
func (s *Directory) updateAll(changes map[string]func(*users.User) error, keepAdmin bool) (map[string]error, error) {
	failed := make(map[string]error)
	var adminWas, adminIs *users.User // keepAdmin's user, before and after its change
	others := make(map[string]bool)   // keepAdmin: the enabled admins the change leaves alone

	var cuts []cutoffRecord    // the tokens the changes kill: each user's issued before its record
	var enabled []cutoffRecord // the users the changes enable, recorded once the file is written
	seen := make(map[string]bool, len(changes))
	links := &resetView{s: s}
	ed := streamEdit{
		touches: func(name string) bool { _, ok := changes[name]; return ok },
		entry: func(u *users.User) (bool, error) {
			name := u.Username
			seen[name] = true
			fail := func(err error) (bool, error) {
				failed[name] = err
				if len(failed) == len(changes) {
					// Every change failed: nothing to write; the rest of
					// the file is only checked, as an Update's always was.
					return true, errNoChange
				}
				return true, errAsRead
			}
			fileLink, err := links.show(u) // the link and mails the resets file keeps
			if err != nil {
				return true, err
			}
			was := *u                                       // as the records keep it: disabled by one, say, whatever the file says
			was.AccessTokens = slices.Clone(u.AccessTokens) // change may change them in place
			if err := changes[name](u); err != nil {
				return fail(err)
			}
			if err := checkEntry(u); err != nil {
				return fail(err)
			}
			if keepAdmin {
				adminWas, adminIs = &was, u
			}
			before, after := changeRecords(&was, u)
			if err := links.keep(&was, u, fileLink); err != nil {
				return true, err
			}
			cuts = append(cuts, before...)
			enabled = append(enabled, after...)
			return true, nil
		},
		end: func() ([]users.User, error) {
			for name := range changes {
				if !seen[name] {
					failed[name] = fmt.Errorf("user %q: %w", name, users.ErrNotFound)
				}
			}
			if len(failed) == len(changes) {
				return nil, errNoChange
			}
			return nil, appendPending(s.path, cuts...)
		},
		after: func() error {
			// The file says enabled, the records not yet: the users stay
			// disabled, and their changes are reported failed.
			if err := appendCutoffs(s.path, enabled...); err != nil {
				for _, r := range enabled {
					failed[r.Username] = fmt.Errorf("user %q: written, but still disabled: %w", r.Username, err)
				}
			}
			return nil
		},
	}
	if keepAdmin {
		ed.admin = func(name string) { others[name] = true }
		end := ed.end
		ed.end = func() ([]users.User, error) {
			// Every entry read: others is the file's, under its lock.
			err := users.KeepsAnAdmin(adminWas, adminIs, func() (int, error) { return len(others), nil })
			if err != nil {
				return nil, err
			}
			return end()
		}
	}
	if err := s.edit(false, ed); err != nil {
		return nil, err
	}
	return failed, nil
}

// changeRecords returns the cut-off records of the change of one user
// from was to u: those to append before the file is written (a later
// cut-off, a disable, personal access tokens or a reset link ended) and
// after (an enable: until both are done the user stays disabled).
func changeRecords(was, u *users.User) (before, after []cutoffRecord) {
	now := time.Now()
	var cut time.Time
	if u.TokensAfter.After(was.TokensAfter) {
		cut = u.TokensAfter
	}
	event := ""
	if u.Disabled && !was.Disabled {
		cut, event = users.Later(cut, now), eventDisable
	}
	if !cut.IsZero() {
		before = append(before, cutoffRecord{Username: u.Username, TokensAfter: cut, Event: event})
	}
	if ids := endedAccessTokens(was.AccessTokens, u.AccessTokens, now); len(ids) > 0 {
		before = append(before, cutoffRecord{Username: u.Username, TokensAfter: now, Event: eventRevoke, AccessTokens: ids})
	}
	if d := endedResetLink(was.ResetLink, u.ResetLink, now); d != "" {
		before = append(before, cutoffRecord{Username: u.Username, TokensAfter: now, Event: eventResetLink, ResetLinks: []string{d}})
	}
	// A user with no cut-off has no disable's record to end (every
	// record has one).
	if !u.Disabled && was.Disabled && !u.TokensAfter.IsZero() {
		after = append(after, cutoffRecord{Username: u.Username, TokensAfter: u.TokensAfter, Event: eventEnable})
	}
	return before, after
}

// checkEntry returns why a changed entry could not be loaded, or nil: its
// name, its hash and its personal access tokens, as a load checks them.
func checkEntry(u *users.User) error {
	if err := users.CheckUsername(u.Username); err != nil {
		return err
	}
	if err := users.CheckAccessTokens(u.AccessTokens); err != nil {
		return fmt.Errorf("user %q: %w", u.Username, err)
	}
	if err := users.CheckResetLink(u.ResetLink); err != nil {
		return fmt.Errorf("user %q: %w", u.Username, err)
	}
	if _, err := password.ParseHash(u.PasswordHash); err != nil {
		return fmt.Errorf("user %q: password_hash: %w", u.Username, err)
	}
	return nil
}

// Delete drops the user's entry and records its tombstone. With
// KeepAnAdmin the other admins are counted in the same pass, under the
// same lock, as the write.
func (s *Directory) Delete(ctx context.Context, username string, opts ...users.WriteOption) error {
	return s.delete(username, users.HasOption(opts, users.KeepAnAdmin))
}

// delete is Delete; with keepAdmin, with KeepAnAdmin.
func (s *Directory) delete(username string, keepAdmin bool) error {
	var found *users.User
	others := make(map[string]bool) // keepAdmin: the enabled admins besides the user
	ed := streamEdit{
		touches: func(name string) bool { return name == username },
		entry: func(u *users.User) (bool, error) {
			found = u
			return false, nil
		},
		end: func() ([]users.User, error) {
			if found == nil {
				return nil, fmt.Errorf("user %q: %w", username, users.ErrNotFound)
			}
			if keepAdmin {
				// Every entry read: others is the file's, under its lock.
				if err := users.KeepsAnAdmin(found, nil, func() (int, error) { return len(others), nil }); err != nil {
					return nil, err
				}
			}
			// The tombstone: a copy of an older file, or a later user of
			// the same name, never brings the deleted user's tokens back;
			// and an older file's entry of the deleted user, whose
			// cut-off is before it, whatever the clocks, loads as absent.
			at := users.Later(time.Now(), found.TokensAfter.Add(time.Nanosecond))
			return nil, appendPending(s.path, cutoffRecord{Username: username, TokensAfter: at, Deleted: true, Event: eventDelete})
		},
	}
	if keepAdmin {
		ed.admin = func(name string) { others[name] = true }
	}
	return s.edit(false, ed)
}

// edit runs editUsersStream and, when this directory has been loaded,
// reloads it, so that its own writes are visible to Lookup when they return.
// An edit that changed nothing wrote nothing, and reloads nothing. Its
// error is the write's: a reload that fails once the file is replaced (by
// another writer's broken file, say) is logged, and the previous users
// stay in force until Watch loads a file that validates, as after any
// refused reload; the edit itself is made, and reported so.
func (s *Directory) edit(create bool, ed streamEdit) error {
	ed.loaded = s.cur.Load()
	ed.cutoffs = func() (cutoffs, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.readCutoffs()
	}
	err := editUsersStream(s.path, create, ed)
	switch {
	case err == errNoChange:
		return nil
	case err != nil:
		return err
	}
	s.writes.Add(1)
	if s.cur.Load() == nil {
		return nil
	}
	// Watch's hooks are told this load's cuts as any other's: it may bring
	// in other processes' changes too (a user passwd the watcher had not
	// seen yet), and once it is loaded no later check finds the file
	// changed. Untold, such a change never reached the token store, which
	// went on refusing the new password's logins on the older stamp.
	s.mu.Lock()
	hooks := s.hooks
	s.mu.Unlock()
	if _, err := s.load(hooks.Cut); err != nil && s.log != nil {
		s.log.Error("users file written but refused at its reload; previous users stay in force", "err", err)
	}
	return nil
}

// Writes reports how many times this directory has replaced the users
// file: what a batch of changes saves, for tests and measurements.
func (s *Directory) Writes() int64 { return s.writes.Load() }

// List returns the file's users as a load has them: each with the later
// of its cut-off and the cut-offs file's, disabled when a record keeps
// it so, and without the entries of deleted users (cutoffs.apply).
func (s *Directory) List(context.Context) ([]users.User, error) {
	list, err := Read(s.path)
	if err != nil {
		return nil, err
	}
	cuts, err := readCutoffs(CutoffsPath(s.path))
	if err != nil {
		return nil, err
	}
	return cuts.applyAll(list), nil
}

// Reload replaces the index with the file's current content. On any error
// the previous users stay in force.
func (s *Directory) Reload(context.Context) error {
	_, err := s.load(nil)
	return err
}

// load reads, validates and swaps in the file, tells cut (if not nil) whose
// tokens the change killed, and returns the file's state as it was just
// before the read: what was parsed, even when it was refused.
func (s *Directory) load(cut func(users.Cut)) (os.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = true // until this load succeeds
	// A deletion or a disable found in this read is dated by when the read
	// began, not by when the parse ended, which on a big file is seconds
	// later: a token issued meanwhile, after the user came back, lives.
	began := time.Now()
	info, err := os.Stat(s.path)
	if err != nil {
		return nil, err
	}
	old := s.cur.Load()
	cuts, err := s.readCutoffs()
	if err != nil {
		return info, err
	}
	x, err := s.read(old, cuts)
	if err != nil {
		return info, err
	}
	s.cur.Store(x)
	s.seen, s.refused = info, false
	cutsBetween(old, x, began, cut)
	if len(x.byName) >= bigUsersFile {
		// Return the parse's garbage and the replaced index now, not over
		// minutes: without this a large file's RSS stays at up to twice its
		// live heap (GOGC) after each load. In the background: the full
		// collection takes a few hundred ms at a million users, which
		// neither start-up nor the file's lock should wait for.
		go debug.FreeOSMemory()
	}
	return info, nil
}

// readCutoffs returns the cut-offs file's records that a load applies
// now (cutoffsView.now), the file read again only when it has changed
// since the last read. The caller holds s.mu, and reads the users file
// after this returns.
func (s *Directory) readCutoffs() (cutoffs, error) {
	path := CutoffsPath(s.path)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		s.cuts, s.cutsSeen = cutoffsView{}, nil
		return nil, nil
	case err != nil:
		return nil, err
	case s.cutsSeen != nil && sameState(info, s.cutsSeen):
		return s.cuts.now(s.path), nil
	}
	v, err := readCutoffsView(path)
	if err != nil {
		return nil, err
	}
	s.cuts, s.cutsSeen = v, info
	return v.now(s.path), nil
}

// read reads and validates the file in one streaming pass, building its
// index as it goes, reusing the users of old that did not change, each
// user's cut-off raised to its record in cuts.
func (s *Directory) read(old *userIndex, cuts cutoffs) (*userIndex, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n := 0
	if old != nil {
		n = len(old.byName)
	}
	b := newIndexBuilder(old, n)
	b.cuts = cuts
	err = scanUsers(f, b.add)
	if s.afterRead != nil {
		s.afterRead()
	}
	if err == errStrict { // the reference parser says what is wrong, or builds the index from what it read
		var list []users.User
		if list, err = decodeUsersStrict(f); err == nil {
			return newUserIndex(cuts.applyAll(list), old)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.path, err)
	}
	return b.finish()
}

// bigUsersFile is the number of users from which a load hands its garbage
// back to the OS at once: about 3 MB of heap; below it the forced
// collection is not worth its time.
const bigUsersFile = 10_000

// changed reports whether the file, or its cut-offs file, differs from
// the one last loaded.
func (s *Directory) changed() bool {
	info, err := os.Stat(s.path)
	cutsInfo, cutsErr := os.Stat(CutoffsPath(s.path))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		return s.seen != nil // vanished: try, fail and log once per change
	}
	if s.seen == nil || !sameState(info, s.seen) {
		return true
	}
	// The cut-offs file changes alone too: an enable appends its record
	// after writing the users file, and a load between the two keeps the
	// user disabled until the record is read.
	if cutsErr != nil {
		return s.cutsSeen != nil
	}
	return s.cutsSeen == nil || !sameState(cutsInfo, s.cutsSeen)
}

// sameState reports whether a and b are the same file, unchanged: the same
// inode, size and modification time.
func sameState(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// Watch reloads on every value from hup and whenever the file changes,
// checking every interval, until ctx is done, telling hooks what happened.
func (s *Directory) Watch(ctx context.Context, interval time.Duration, hup <-chan os.Signal, hooks users.WatchHooks) {
	s.mu.Lock()
	s.hooks = hooks
	s.mu.Unlock()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				s.logReload("SIGHUP", hooks)
			}
		}
	}()
	tick.Every(ctx, interval, func(time.Time) {
		if s.changed() {
			s.logReload("file changed", hooks)
		}
	})
}

func (s *Directory) logReload(why string, hooks users.WatchHooks) {
	info, err := s.load(hooks.Cut)
	if hooks.Reloaded != nil {
		hooks.Reloaded(err)
	}
	if err != nil {
		// Remember the refused state, not the file's state now: a file
		// rewritten in place while it was read differs from what was
		// parsed, and is loaded at the next check.
		s.mu.Lock()
		s.seen = info
		s.mu.Unlock()
	}
	switch {
	case s.log == nil:
	case err != nil:
		s.log.Error("users file refused; previous users stay in force", "reason", why, "err", err)
	default:
		s.log.Info("users file reloaded", "reason", why, "users", s.Len())
	}
}

// Page answers from the file as last loaded, as Lookup does (page.go): a
// write through the directory reloads it before it returns. A directory
// never loaded (the CLI's New) has no index to answer from and reads the
// file: loading it would make every later write of the CLI's reload the
// whole file, and leave behind a copy no Watch keeps up to date.
func (s *Directory) Page(ctx context.Context, after string, limit int, f users.Filter) ([]users.User, error) {
	if x := s.cur.Load(); x != nil {
		return x.page(after, limit, f), nil
	}
	list, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	return users.Page(list, after, limit, f), nil
}

// Count answers as Page does, from the file as last loaded or, in a
// directory never loaded, from the file.
func (s *Directory) Count(ctx context.Context, f users.Filter) (int, error) {
	if x := s.cur.Load(); x != nil {
		return x.count(f), nil
	}
	list, err := s.List(ctx)
	if err != nil {
		return 0, err
	}
	return users.Count(list, f), nil
}
