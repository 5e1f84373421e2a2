package usersfile

import (
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"slices"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/users"
)

// Streaming edits of the users file. An edit must replace the file
// atomically (a temporary file, fsync, rename), so it writes the whole file
// whatever it changes; what it need not do is decode and re-encode every
// entry. editUsersStream copies each entry it does not touch as it reads
// it, byte for byte, and decodes and re-encodes only the entries an edit
// is about.

// A streamEdit is an edit of some entries of the users file.
type streamEdit struct {
	// touches reports whether the entry of username is the edit's business.
	touches func(username string) bool
	// entry is called with each such entry; it changes u in place, or
	// returns keep false to delete it, or errAsRead to leave the entry
	// as it was read, byte for byte, whatever it did to u. Any other
	// error cancels the edit (errNoChange: one that will write nothing).
	entry func(u *users.User) (keep bool, err error)
	// end returns the entries to append once all have been read, or
	// errNoChange when the edit changed nothing: then nothing is written.
	// The records that must be durable before the file is in place it
	// appends with appendPending; editUsersStream commits them once the
	// file is written.
	end func() ([]users.User, error)
	// after, if not nil, runs once the file is written, still under its
	// lock: an edit's records that must not come before it (an enable's).
	after func() error
	// cutoffs, if not nil, reads the cut-offs file under the lock;
	// otherwise it is read afresh. Its records are applied to each entry
	// before entry sees it: an entry of a deleted user (from an older
	// file put back) is not given to entry and is left out of the copy,
	// as a user who is not there; the others have the cut-off and the
	// disable the records keep. Each user end adds gets a cut-off no
	// earlier than its name's records (cutoffs.added).
	cutoffs func() (cutoffs, error)
	cuts    cutoffs // as read under the lock, by editUsersStream
	// loaded, if not nil, is the file as a directory loaded it: an entry
	// whose hash is, as text, the one loaded for its user is not parsed
	// again (a load refuses a file with a bad hash), and the copy's table
	// of names is sized to it. On a server's large file that spares each
	// edit parsing, and allocating for, every hash in the file.
	loaded *userIndex
	// admin, if not nil, is called with the name of each entry the edit
	// does not touch whose user is an enabled admin as the records have
	// them: the count the last-admin rule needs, taken under the file's
	// lock. A name may come twice (an edit that falls back to the
	// reference reads the file again): count the names, not the calls.
	admin func(username string)
}

// untouched tells ed.admin of the entry of username, which the edit
// leaves alone, if the entry (admin, disabled, its cut-off) and the
// records make its user an enabled admin.
func (ed streamEdit) untouched(username string, admin, disabled bool, tokensAfter time.Time) {
	if ed.admin == nil || !admin || disabled {
		return
	}
	u := users.User{Username: username, Admin: admin, TokensAfter: tokensAfter}
	if ed.cuts.applyUser(&u) && !u.Disabled {
		ed.admin(username)
	}
}

// errAsRead is what streamEdit.entry returns to leave its entry as read:
// a change of several users that fails for one goes on with the others.
var errAsRead = errors.New("entry left as read")

// errNoChange is what streamEdit.end returns when there is nothing to
// write; editUsersStream passes it on, and its caller takes it for success
// with nothing to reload.
var errNoChange = errors.New("nothing changed")

// editUsersStream makes the edit ed in the users file at path with
// Edit's guarantees: under the file's lock, nothing written unless the
// whole file is valid and the edit succeeds, the file replaced atomically
// and kept its owner's. A missing file counts as empty when create is set.
func editUsersStream(path string, create bool, ed streamEdit) (err error) {
	defer func() { err = namedForUsers(path, err) }()
	unlock, err := lockUsersFile(path)
	if err != nil {
		return err
	}
	defer unlock()
	// A writer killed between its records and their commit left them
	// pending: committed before this edit's, so that they stay in their
	// order and this edit's own are the only ones pending at the end.
	if err := commitCutoffs(path); err != nil {
		return err
	}
	read := ed.cutoffs
	if read == nil {
		read = func() (cutoffs, error) { return readCutoffs(CutoffsPath(path)) }
	}
	if ed.cuts, err = read(); err != nil {
		return err
	}
	err = copyUsersFile(path, ed)
	switch {
	case err == errStrict: // a file the fast parser leaves to the reference: edit it whole
		err = editUsersLocked(path, create, ed.apply)
	case errors.Is(err, os.ErrNotExist):
		if !create {
			return fmt.Errorf("%s: %w", path, errNoUsersFile)
		}
		var added []users.User
		if added, err = ed.ended(); err != nil {
			return err
		}
		err = Write(path, added)
	}
	// The file is in place, or its write failed: the records before it
	// (end's, appendPending) count from now on, for every load. When it
	// failed they still end what they end, as a killed writer's would:
	// a rename may have been made whose error came later. A commit that
	// fails leaves them pending, which every load applies once this lock
	// is let go, and the next edit commits: the edit is done all the same.
	if cerr := commitCutoffs(path); cerr != nil && err != nil {
		err = errors.Join(err, cerr)
	}
	if err == nil && ed.after != nil {
		err = ed.after()
	}
	return err
}

// ended is end with each user added given a cut-off no earlier than its
// name's records (cutoffs.added).
func (ed streamEdit) ended() ([]users.User, error) {
	added, err := ed.end()
	for i := range added {
		added[i] = ed.cuts.added(added[i])
	}
	return added, err
}

// apply makes the edit ed in users, decoded whole.
func (ed streamEdit) apply(list []users.User) ([]users.User, error) {
	kept := list[:0]
	for _, u := range list {
		if ed.touches(u.Username) {
			if !ed.cuts.applyUser(&u) {
				continue // a deleted user's entry: no one to edit
			}
			was := u
			was.Groups = slices.Clone(u.Groups) // entry may change them in place
			keep, err := ed.entry(&u)
			switch {
			case err == errAsRead:
				u = was
			case err != nil:
				return nil, err
			case !keep:
				continue
			}
		} else {
			ed.untouched(u.Username, u.Admin, u.Disabled, u.TokensAfter)
		}
		kept = append(kept, u)
	}
	added, err := ed.ended()
	if err != nil {
		return nil, err
	}
	return append(kept, added...), nil
}

// copyUsersFile writes the file at path, edited, to a temporary file and
// renames it over path. Its errors are those of Read and the edit,
// or errStrict.
func copyUsersFile(path string, ed streamEdit) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return rewrite(path, func(w *usersWriter) error {
		if err := copyEntries(f, path, w, ed); err != nil {
			return err
		}
		added, err := ed.ended()
		if err != nil {
			return err
		}
		for i := range added {
			if err := w.checkedUser(&added[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// A copier copies the entries of a users file to a usersWriter as the
// scanner reads them, making an edit on the way, with Read's checks of
// every entry: its username, unique, its hash.
type copier struct {
	w      *usersWriter
	ed     streamEdit
	hashes *hashChecker
	// Names are told apart by a 64-bit hash: no string a user; two names
	// that collide (collision) send the edit to the reference, which says
	// exactly (or finds no duplicate).
	seen      map[uint64]bool
	seed      maphash.Seed
	collision bool
	// Once the edit fails the rest is validated, not written: a bad
	// file's error comes first, as in editUsers.
	editErr error
}

// copyEntries copies the entries of f, the users file at path, to w,
// edited by ed.
func copyEntries(f *os.File, path string, w *usersWriter, ed streamEdit) error {
	c := &copier{w: w, ed: ed, hashes: newHashChecker(), seed: maphash.MakeSeed()}
	if ed.loaded != nil {
		c.seen = make(map[uint64]bool, len(ed.loaded.byName)+len(ed.loaded.byName)/64)
	} else {
		c.seen = make(map[uint64]bool)
	}
	err := scanUsersKeep(f, true, c.entry)
	// A hash is queued only from an entry that passed every other check,
	// and the scan stops checking at the first entry that does not: a
	// refused hash is in an earlier entry than any other entry's error.
	hashErr := c.hashes.wait()
	var readErr *os.PathError
	switch {
	case c.collision || err == errStrict:
		return errStrict
	case hashErr != nil && !errors.As(err, &readErr):
		return fmt.Errorf("%s: %w", path, hashErr)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	}
	return c.editErr
}

// entry is the scan's entrySink: entry i, whose bytes in the file are
// orig, checked as Read checks it, then copied or edited.
func (c *copier) entry(i int, e *rawEntry, orig []byte) error {
	if err := users.CheckUsername(string(e.username)); err != nil {
		return fmt.Errorf("users[%d]: %w", i, err)
	}
	h := maphash.Bytes(c.seed, e.username)
	if c.seen[h] {
		c.collision = true
		return errStrict
	}
	c.seen[h] = true
	if !c.ed.loaded.checked(e) {
		c.hashes.check(i, e)
	}
	switch {
	case c.editErr != nil:
	case !c.ed.touches(string(e.username)):
		if c.ed.admin != nil && e.admin && !e.disabled { // the name copied only for the few admins
			c.ed.untouched(string(e.username), e.admin, e.disabled, e.tokensAfter)
		}
		c.w.entry(orig)
	default:
		c.editErr = c.edit(e, orig)
	}
	return nil
}

// edit makes the edit of entry e, whose bytes in the file are orig, and
// writes what it leaves of it.
func (c *copier) edit(e *rawEntry, orig []byte) error {
	u := e.user()
	if !c.ed.cuts.applyUser(&u) {
		return nil // a deleted user's entry, from an older file put back: no one to edit
	}
	keep, err := c.ed.entry(&u)
	switch {
	case err == errAsRead:
		c.w.entry(orig)
		return nil
	case err == nil && keep:
		return c.w.checkedUser(&u)
	}
	return err
}

// A hashChecker checks the password hashes of a users file in a goroutine
// of its own, beside the reading: a third of an edit's time at a million
// users. It reports the error of the first entry whose hash is refused.
type hashChecker struct {
	batch   []hashToCheck
	batches chan []hashToCheck
	done    chan struct{}
	err     error // the first refused hash's error; written by the goroutine, read after done
}

// hashToCheck is entry i's username and hash.
type hashToCheck struct {
	i              int
	username, hash string
}

// newHashChecker starts a checker; its caller calls wait.
func newHashChecker() *hashChecker {
	c := &hashChecker{batches: make(chan []hashToCheck, 4), done: make(chan struct{})}
	batches := c.batches
	go func() {
		defer close(c.done)
		for batch := range batches {
			for _, h := range batch {
				if c.err != nil {
					break
				}
				if _, err := password.ParseHash(h.hash); err != nil {
					c.err = fmt.Errorf("%s: password_hash: %v", entryAt(h.i, h.username), err)
				}
			}
		}
	}()
	return c
}

// check queues entry i's hash.
func (c *hashChecker) check(i int, e *rawEntry) {
	c.batch = append(c.batch, hashToCheck{i, string(e.username), string(e.hash)})
	if len(c.batch) == 1024 {
		c.batches <- c.batch
		c.batch = make([]hashToCheck, 0, 1024)
	}
}

// wait checks what is queued and returns the first refused hash's error,
// or nil.
func (c *hashChecker) wait() error {
	c.batches <- c.batch
	close(c.batches)
	<-c.done
	return c.err
}

// user returns e as a User, its strings its own.
func (e *rawEntry) user() users.User {
	u := users.User{Username: string(e.username), PasswordHash: string(e.hash), Name: string(e.name), Email: string(e.email),
		Groups: make([]string, len(e.groups)), Admin: e.admin, Disabled: e.disabled, TokensAfter: e.tokensAfter,
		PasswordGeneration: e.generation, FailuresAfter: e.failuresAfter, CodesAfter: e.codesAfter, DjangoHash: string(e.djangoHash),
		MFA: e.factors.Clone(), AccessTokens: cloneAccessTokens(e.accessTokens), ResetLink: cloneResetLink(e.resetLink)}
	for k, g := range e.groups {
		u.Groups[k] = string(g)
	}
	return u
}

// checked reports whether e's hash is, as text, the one x holds for its
// user, and so was parsed when x was loaded. A nil x holds none.
func (x *userIndex) checked(e *rawEntry) bool {
	if x == nil {
		return false
	}
	u := x.byName[string(e.username)]
	return u != nil && u.StoredHash() == string(e.hash)
}
