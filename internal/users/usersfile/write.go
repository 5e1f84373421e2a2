package usersfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// Write replaces the users file at path atomically: a temporary
// file in the same directory, fsync, mode 0600, rename, fsync of the directory.
// The new file keeps the owner and group of the one it replaces: root's CLI
// must not take the server's users file away from it. When that cannot be
// done nothing is written. The file is json.MarshalIndent's of the whole
// document, with a newline, byte for byte, but streamed entry by entry: a
// million users' file is never a second copy in memory.
func Write(path string, list []users.User) error {
	return namedForUsers(path, rewrite(path, func(w *usersWriter) error {
		for i := range list {
			if err := w.encode(&list[i]); err != nil {
				return err
			}
		}
		return nil
	}))
}

// rewrite replaces the users file at path, as Write says, by the file
// write writes to w: every writer of the users file goes through it. When
// write fails nothing is replaced.
func rewrite(path string, write func(w *usersWriter) error) error {
	tmp, err := createUsersTemp(path)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	w := newUsersWriter(tmp)
	defer w.stop()
	if err := write(w); err != nil {
		tmp.Close()
		return err
	}
	if err := w.close(); err != nil {
		tmp.Close()
		return err
	}
	return replaceUsersFile(tmp, path)
}

// createUsersTemp creates the temporary file that will replace the users
// file at path: in the same directory, mode 0600, owned as the file is.
// The caller removes it when it is not renamed.
func createUsersTemp(path string) (*os.File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	if err := keepOwner(tmp, path); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return tmp, nil
}

// replaceUsersFile syncs and closes tmp, written in full, renames it to
// path and syncs the directory.
func replaceUsersFile(tmp *os.File, path string) error {
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return secret.SyncDir(filepath.Dir(path))
}

// keepOwner gives f the owner and group of the file at path, if there is one.
func keepOwner(f *os.File, path string) error {
	info, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a new file is its creator's
	}
	if err != nil {
		return err
	}
	want, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	// Skipped when already right: only root may chown a file it does not
	// own, even to the owner it has (the lock file, say).
	if mine, err := f.Stat(); err == nil {
		if st, ok := mine.Sys().(*syscall.Stat_t); ok && st.Uid == want.Uid && st.Gid == want.Gid {
			return nil
		}
	}
	if err := f.Chown(int(want.Uid), int(want.Gid)); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot give %s the owner %d:%d of %s: %w", filepath.Base(f.Name()), want.Uid, want.Gid, path, err)
	}
	return nil
}

// errNoUsersFile: an edit of a users file that does not exist.
var errNoUsersFile = errors.New("users file does not exist")

// Edit runs edit on the users in the file at path and writes the result
// back, holding an exclusive lock on path+".lock" throughout, so concurrent
// edits by several processes never lose an entry. A missing file counts as
// empty when create is set, and is errNoUsersFile otherwise. When edit
// returns an error nothing is written.
func Edit(path string, create bool, edit func(list []users.User) ([]users.User, error)) error {
	unlock, err := lockUsersFile(path)
	if err != nil {
		return err
	}
	defer unlock()
	return editUsersLocked(path, create, edit)
}

// editUsersLocked is Edit with the lock held.
func editUsersLocked(path string, create bool, edit func(list []users.User) ([]users.User, error)) error {
	list, err := Read(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && create:
		list = nil
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: %w", path, errNoUsersFile)
	case err != nil:
		return err
	}
	list, err = edit(list)
	if err != nil {
		return err
	}
	return Write(path, list)
}

// lockUsersFile takes the exclusive lock on path+".lock" that every writer
// of the users file at path holds, and removes the temporary files a killed
// writer left. It returns the function that releases the lock.
func lockUsersFile(path string) (unlock func(), err error) {
	// Counted before the lock is asked for, and until it is let go:
	// writing answers for this process without a probe of its own.
	locking.Lock()
	locking.held[path]++
	locking.Unlock()
	done := func() {
		locking.Lock()
		if locking.held[path]--; locking.held[path] == 0 {
			delete(locking.held, path)
		}
		locking.Unlock()
	}
	// Not followed: a link planted there would have root create or open
	// any file it names.
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		done()
		return nil, fmt.Errorf("lock file %s is a symbolic link; refused", path+".lock")
	}
	if err != nil {
		done()
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		done()
		return nil, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	unlock = func() {
		syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
		done()
	}
	// The server takes this lock too when it writes, so the lock file must
	// be the users file's owner's even when root created it.
	if err := keepOwner(lock, path); err != nil {
		unlock()
		return nil, err
	}
	removeStaleTemps(path)
	return unlock, nil
}

// locking counts, per users file, the writers of this process that hold
// or wait for its lock.
var locking = struct {
	sync.Mutex // guards held
	held       map[string]int
}{held: map[string]int{}}

// writing reports whether a writer holds, or may hold, the lock of the
// users file at path: then the pending records at the end of its
// cut-offs file may be of an edit under way (cutoffs.go). A lock file
// that cannot be opened or probed says no writer: the records count
// (fail closed).
func writing(path string) bool {
	// This process's own writers are known without a probe, which must
	// not open the lock file while one of them holds it either: where
	// flock is made of POSIX locks (NFS), closing any descriptor of the
	// file lets go the process's lock.
	locking.Lock()
	defer locking.Unlock()
	if locking.held[path] > 0 {
		return true
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer lock.Close()
	switch err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return true
	case err == nil:
		syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	}
	return false
}

// removeStaleTemps removes the temporary files Write left beside
// the users file at path when it was killed. Its caller holds the lock, so
// no writer of this file is making one; other files' are left alone.
func removeStaleTemps(path string) {
	dir, prefix := filepath.Dir(path), "."+filepath.Base(path)+"."
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // writeUsersFile will report the directory's trouble
	}
	for _, e := range entries {
		// os.CreateTemp puts digits where the pattern has its *; anything
		// else there may be a temporary file of users.json.x, say.
		mid, ok := strings.CutPrefix(e.Name(), prefix)
		mid, ok2 := strings.CutSuffix(mid, ".tmp")
		if ok && ok2 && mid != "" && strings.Trim(mid, "0123456789") == "" && e.Type().IsRegular() {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// findUser returns the index of username in users, or -1.
func findUser(list []users.User, username string) int {
	for i := range list {
		if list[i].Username == username {
			return i
		}
	}
	return -1
}

// namedForUsers returns err, if it is about the temporary file that was to
// replace the users file at path (a full disk, say), as an error about
// path: the operator knows that file, not the temporary one.
func namedForUsers(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && isUsersTemp(path, pe.Path) {
		return fmt.Errorf("write %s: %w", path, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) && isUsersTemp(path, le.Old) {
		return fmt.Errorf("replace %s: %w", path, le.Err)
	}
	return err
}

// isUsersTemp reports whether name is one of createUsersTemp's files for
// the users file at path.
func isUsersTemp(path, name string) bool {
	return filepath.Dir(name) == filepath.Dir(path) && strings.HasPrefix(filepath.Base(name), "."+filepath.Base(path)+".") && strings.HasSuffix(name, ".tmp")
}

// A usersWriter writes a users file entry by entry as Write lays
// it out (json.MarshalIndent, two spaces). Its writes to the file run in a
// goroutine of their own, beside the reading: the copy of a large file
// spends as long in write(2) as in parsing.
type usersWriter struct {
	buf  []byte      // filled; handed to the writer at writeChunk bytes
	full chan []byte // chunks to write
	free chan []byte // chunks written, for reuse
	done chan error  // the writer's first error, once full is closed
	n    int         // entries written
}

// writeChunk is the size of the writes to the temporary file.
const writeChunk = 1 << 20

// newUsersWriter returns a writer to f; its caller calls close or stop.
func newUsersWriter(f io.Writer) *usersWriter {
	w := &usersWriter{full: make(chan []byte, 2), free: make(chan []byte, 3), done: make(chan error, 1)}
	for range 3 {
		w.free <- make([]byte, 0, writeChunk+64<<10)
	}
	w.buf = <-w.free
	full, free, done := w.full, w.free, w.done // stop clears w.full
	go func() {
		var err error
		for b := range full {
			if err == nil {
				_, err = f.Write(b)
			}
			free <- b[:0]
		}
		done <- err
	}()
	return w
}

// entry writes the entry whose JSON, as it is in the file, is orig.
func (w *usersWriter) entry(orig []byte) {
	w.buf = append(w.start(), orig...)
	w.flush(writeChunk)
}

// user writes u, its nil groups made [].
func (w *usersWriter) user(u *users.User) error {
	if u.Groups == nil {
		u.Groups = []string{}
	}
	return w.encode(u)
}

// checkedUser writes u, an entry an edit made, once it passes what a
// load checks of its Django fingerprint, second factors and personal
// access tokens.
func (w *usersWriter) checkedUser(u *users.User) error {
	if err := users.CheckDjangoHash(u.DjangoHash); err != nil {
		return fmt.Errorf("user %q: django_hash: %w", u.Username, err)
	}
	if err := users.CheckFactors(u.MFA); err != nil {
		return fmt.Errorf("user %q: mfa: %w", u.Username, err)
	}
	if err := users.CheckAccessTokens(u.AccessTokens); err != nil {
		return fmt.Errorf("user %q: %w", u.Username, err)
	}
	return w.user(u)
}

// encode writes u as it is (nil groups as null, as json.MarshalIndent of
// the whole file writes them).
func (w *usersWriter) encode(u *users.User) error {
	data, err := json.MarshalIndent(u, "    ", "  ")
	if err != nil {
		return err
	}
	w.buf = append(w.start(), data...)
	w.flush(writeChunk)
	return nil
}

// start appends what comes before an entry and returns the buffer.
func (w *usersWriter) start() []byte {
	if w.n == 0 {
		w.buf = append(w.buf, "{\n  \"users\": ["...)
	} else {
		w.buf = append(w.buf, ',')
	}
	w.n++
	return append(w.buf, "\n    "...)
}

// flush hands the buffer to the writer once it holds at least size bytes.
func (w *usersWriter) flush(size int) {
	if len(w.buf) >= size && len(w.buf) > 0 {
		w.full <- w.buf
		w.buf = <-w.free
	}
}

// close writes the end of the file and waits for every write.
func (w *usersWriter) close() error {
	if w.n == 0 {
		w.buf = append(w.buf, "{\n  \"users\": []\n}\n"...)
	} else {
		w.buf = append(w.buf, "\n  ]\n}\n"...)
	}
	w.flush(0)
	return w.stop()
}

// stop ends the writer goroutine and returns its error; later calls, none.
func (w *usersWriter) stop() error {
	if w.full == nil {
		return nil
	}
	close(w.full)
	w.full = nil
	return <-w.done
}
