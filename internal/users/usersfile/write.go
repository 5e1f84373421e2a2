package usersfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"authsvc/internal/users"
)

// Write replaces the users file at path atomically: a temporary
// file in the same directory, fsync, mode 0600, rename, fsync of the directory.
// The new file keeps the owner and group of the one it replaces: root's CLI
// must not take the server's users file away from it. When that cannot be
// done nothing is written. The file is json.MarshalIndent's of the whole
// document, with a newline, byte for byte, but streamed entry by entry: a
// million users' file is never a second copy in memory.
func Write(path string, list []users.User) (err error) {
	defer func() { err = namedForUsers(path, err) }()
	tmp, err := createUsersTemp(path)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	w := newUsersWriter(tmp)
	defer w.stop()
	for i := range list {
		if err := w.encode(&list[i]); err != nil {
			tmp.Close()
			return err
		}
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
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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
	// Not followed: a link planted there would have root create or open
	// any file it names.
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("lock file %s is a symbolic link; refused", path+".lock")
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	unlock = func() {
		syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		lock.Close()
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
