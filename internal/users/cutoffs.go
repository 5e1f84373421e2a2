package users

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// The cut-offs file. A users file can be replaced whole: an operator
// copies back last week's file, a backup is restored, a configuration
// tool writes its own copy. Were a user's cut-off kept only in the file,
// such a copy would bring back every token that died since: a deleted user
// would be back with her old sessions. So every write of the users file
// that kills tokens (delete, disable, a password change, logout) first
// appends a record to USERS.cutoffs, beside the lock, and every load applies
// the later of the file's cut-off and the records'. The records are never
// removed: a deleted user's record (its tombstone) is kept when a user of
// the same name is added again.
//
// The file holds one JSON object per line, appended and synced under the
// users file's lock. A last line without its newline is an append that
// never finished, whose edit was never reported done: it is ignored, and
// the next append drops it. Any other line that does not parse refuses the
// load (fail closed: the previous users stay in force).

// CutoffsPath returns where the cut-offs of the users file at path are kept.
func CutoffsPath(path string) string { return path + ".cutoffs" }

// A cutoffRecord is one line of the cut-offs file: every token of username
// issued before TokensAfter is dead. Deleted marks a deletion's record.
type cutoffRecord struct {
	Username    string    `json:"username"`
	TokensAfter time.Time `json:"tokens_after"`
	Deleted     bool      `json:"deleted,omitempty"`
}

// cutoffs holds the latest record per username.
type cutoffs map[string]time.Time

// readCutoffs reads the cut-offs file at path: nil when there is none.
func readCutoffs(path string) (cutoffs, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseCutoffs(f, path)
}

// parseCutoffs reads records from r, named name in errors.
func parseCutoffs(r io.Reader, name string) (cutoffs, error) {
	c := cutoffs{}
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return c, nil // a last line without its newline never finished
		}
		if err != nil {
			return nil, err
		}
		var rec cutoffRecord
		if err := json.Unmarshal(line, &rec); err != nil || rec.Username == "" || rec.TokensAfter.IsZero() {
			return nil, fmt.Errorf("%s: line %d: not a cut-off record", name, n)
		}
		if rec.TokensAfter.After(c[rec.Username]) {
			c[rec.Username] = rec.TokensAfter.UTC()
		}
	}
}

// apply raises e's cut-off to its record's, if that is later.
func (c cutoffs) apply(e *rawEntry) {
	if t, ok := c[string(e.username)]; ok && t.After(e.tokensAfter) {
		e.tokensAfter = t
	}
}

// applyAll raises each user's cut-off to its record's, if that is later.
func (c cutoffs) applyAll(list []User) {
	for i := range list {
		if t, ok := c[list[i].Username]; ok && t.After(list[i].TokensAfter) {
			list[i].TokensAfter = t
		}
	}
}

// appendCutoffs appends recs to the cut-offs file of the users file at
// usersPath, synced before it returns. The caller holds the users file's
// lock.
func appendCutoffs(usersPath string, recs ...cutoffRecord) error {
	if len(recs) == 0 {
		return nil
	}
	var buf bytes.Buffer
	for _, r := range recs {
		r.TokensAfter = r.TokensAfter.UTC()
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	path := CutoffsPath(usersPath)
	_, statErr := os.Lstat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("cut-offs file %s is a symbolic link; refused", path)
	}
	if err != nil {
		return fmt.Errorf("record the cut-off: %w", err)
	}
	defer f.Close()
	if created {
		if err := keepOwner(f, usersPath); err != nil {
			return err
		}
	}
	end, err := completeLines(f)
	if err != nil {
		return fmt.Errorf("record the cut-off in %s: %w", path, bare(err))
	}
	if _, err := f.WriteAt(buf.Bytes(), end); err != nil {
		f.Truncate(end) // no half record stays behind to refuse the next load
		return fmt.Errorf("record the cut-off in %s: %w", path, bare(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("record the cut-off in %s: %w", path, bare(err))
	}
	if created {
		return syncDir(filepath.Dir(path))
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

// syncDir syncs the directory dir, so that a file created in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
