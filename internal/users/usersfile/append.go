package usersfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"authsvc/internal/secret"
)

// appendRecords appends data, whole lines, to the side file at path of the
// users file at usersPath (the cut-offs or the resets file), after the
// last complete line, and syncs it: a torn last line of an append that
// never finished is overwritten, and a write that fails is cut off again,
// so no half record is left to refuse the next read. A file it creates
// gets the users file's owner, and its folder is synced. file and record
// name the file's kind and what a line records, for errors.
func appendRecords(usersPath, path, file, record string, data []byte) error {
	_, statErr := os.Lstat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%s %s is a symbolic link; refused", file, path)
	}
	if err != nil {
		return fmt.Errorf("record %s: %w", record, err)
	}
	defer f.Close()
	if created {
		if err := keepOwner(f, usersPath); err != nil {
			return err
		}
	}
	end, err := completeLines(f)
	if err != nil {
		return fmt.Errorf("record %s in %s: %w", record, path, bare(err))
	}
	if _, err := f.WriteAt(data, end); err != nil {
		f.Truncate(end)
		return fmt.Errorf("record %s in %s: %w", record, path, bare(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("record %s in %s: %w", record, path, bare(err))
	}
	if created {
		return secret.SyncDir(filepath.Dir(path))
	}
	return nil
}

// bare returns the error inside a *fs.PathError, whose path the caller
// names already.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// completeLines drops a last line that has no newline (an append that
// never finished) and returns the file's length after its last newline.
func completeLines(f *os.File) (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := info.Size()
	end := size
	var b [4096]byte
	for end > 0 {
		n := int64(len(b))
		if end < n {
			n = end
		}
		if _, err := f.ReadAt(b[:n], end-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(b[:n], '\n'); i >= 0 {
			end = end - n + int64(i) + 1
			break
		}
		end -= n
	}
	if end < size {
		if err := f.Truncate(end); err != nil {
			return 0, err
		}
	}
	return end, nil
}
