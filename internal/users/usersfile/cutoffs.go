package usersfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"authsvc/internal/users"
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
// Deletions and disables are kept there too (API.md, Tokens): such a copy
// must not bring back a deleted user, nor a disabled one's logins. A
// deletion's record ("event": "delete") hides every entry of its name
// whose own cut-off, as the file has it, is before the record's: the
// deleted user, from whatever older file. Delete records a time after the
// deleted entry's cut-off, and Add and AddAll write a user added under the
// name with a cut-off no earlier than any record of it, so the one added
// is never hidden, and no record of Add's is needed. A disable's record
// ("event": "disable") keeps the user disabled, whatever the file says,
// until a later enable's ("event": "enable"), which an edit that enables
// the user appends once the file is written: the records' order, which
// the lock makes the order of the edits, decides. A deletion ends a
// disable: a user added again starts enabled. An edit that removes live
// personal access tokens from a user who stays ("event": "revoke") lists
// their ids, and a token of those ids loads as absent from any file; its
// time is only when, and ends no session. An edit that removes or
// replaces a user's live password reset link ("event": "reset_link":
// spent, superseded by a newer one, or ended by a password change or a
// disable) lists the dead link's digest, and a link of that digest loads
// as absent from any file, so that a spent link in someone's mailbox
// does not work again once an older copy is back; its time too is only
// when. Records of earlier versions,
// without "event", carry cut-offs alone, and their files load as before.
//
// The file holds one JSON object per line, appended and synced under the
// users file's lock. A last line without its newline is an append that
// never finished, whose edit was never reported done: it is ignored, and
// the next append drops it. Any other line that does not parse refuses the
// load (fail closed: the previous users stay in force).
//
// An edit's records come in two steps around the users file it writes.
// Before the file: its records, marked pending ("pending": true) and
// synced, so that no crash loses a cut-off the new file holds. Once the
// file is renamed into place (or its write failed): the last of them
// again, unmarked (commitCutoffs). A line that is not pending ends every
// pending line before it, which then count as any other: each where it
// stands. Pending lines at the end of the file (the open edit's) are
// left out of a load while a writer holds the users file's lock, since
// the file beside them may still be the one from before the edit: a
// reader that applied them to it would publish the old password
// generation under the new cut-off, after the writer had published the
// new one, and end the sessions issued on the new generation. With the
// lock free, they are a killed writer's and count (fail closed: its new
// file may be in place), and the next writer commits them before its
// own. So a load never holds a record newer than the users file it read,
// but for an older file put back, which is what the records are for.
// Versions before this rule read a pending record as any other.

// CutoffsPath returns where the cut-offs of the users file at path are kept.
func CutoffsPath(path string) string { return path + ".cutoffs" }

// A cutoffRecord is one line of the cut-offs file: every token of username
// issued before TokensAfter is dead. Deleted marks a deletion's record
// (every version writes it); Event, what else the record decides.
type cutoffRecord struct {
	Username    string    `json:"username"`
	TokensAfter time.Time `json:"tokens_after"`
	Deleted     bool      `json:"deleted,omitempty"`
	Event       string    `json:"event,omitempty"`
	// AccessTokens are the ids of the personal access tokens an edit
	// ended while their user lived on (eventRevoke), whose TokensAfter is
	// only when: it ends no session.
	AccessTokens []string `json:"access_tokens,omitempty"`
	// ResetLinks are the digests of the password reset links an edit
	// removed or replaced while they were live (eventResetLink), whose
	// TokensAfter is only when: it ends no session.
	ResetLinks []string `json:"reset_links,omitempty"`
	// Pending marks the records an edit appends before it writes the
	// users file: until a later line, they may be of an edit under way.
	Pending bool `json:"pending,omitempty"`
}

// The events a record may carry (cutoffRecord.Event).
const (
	eventDelete  = "delete"  // entries of the name with an earlier cut-off are the deleted user: absent
	eventDisable = "disable" // the user is disabled until an eventEnable
	eventEnable  = "enable"  // ends an eventDisable
	eventRevoke  = "revoke"  // the personal access tokens of the record's ids are dead
	// the password reset links of the record's digests are dead
	eventResetLink = "reset_link"
)

// A cutoff is what the records say of one username.
type cutoff struct {
	after     time.Time       // the latest cut-off
	deleted   time.Time       // the last deletion's (eventDelete): an entry whose own cut-off is before it is the deleted user
	disabled  bool            // an eventDisable came after the last eventEnable and eventDelete
	revoked   map[string]bool // ids of the personal access tokens ended (eventRevoke); nil for none
	deadLinks map[string]bool // digests of the reset links ended (eventResetLink); nil for none
}

// cutoffs holds what the records say, per username.
type cutoffs map[string]cutoff

// readCutoffs reads the cut-offs file at path: nil when there is none.
func readCutoffs(path string) (cutoffs, error) {
	v, err := readCutoffsView(path)
	if err != nil {
		return nil, err
	}
	return v.now(strings.TrimSuffix(path, ".cutoffs")), nil
}

// A cutoffsView is the cut-offs file as read, with and without the
// pending records at its end.
type cutoffsView struct {
	all  cutoffs // every record
	done cutoffs // without the pending records at the end; all when there are none
	open bool    // there are pending records at the end
}

// readCutoffsView reads the cut-offs file at path: empty when there is
// none.
func readCutoffsView(path string) (cutoffsView, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return cutoffsView{}, nil
	}
	if err != nil {
		return cutoffsView{}, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return cutoffsView{}, err
	}
	// Both parses read up to the size the end was looked at with: an
	// edit's pending records appended meanwhile are the next read's.
	size := info.Size()
	start, last, err := pendingTail(f, size)
	if err != nil {
		return cutoffsView{}, fmt.Errorf("%s: %w", path, bare(err))
	}
	v := cutoffsView{open: last != nil}
	if v.all, err = parseCutoffs(io.NewSectionReader(f, 0, size), path); err != nil {
		return cutoffsView{}, err
	}
	v.done = v.all
	if v.open {
		if v.done, err = parseCutoffs(io.NewSectionReader(f, 0, start), path); err != nil {
			return cutoffsView{}, err
		}
	}
	return v, nil
}

// now returns the records a load of the users file at usersPath applies
// now: without the pending ones at the end while a writer holds the
// file's lock. The caller reads the users file after this returns: a
// writer that has let the lock go has put its file in place.
func (v cutoffsView) now(usersPath string) cutoffs {
	if v.open && writing(usersPath) {
		return v.done
	}
	return v.all
}

// pendingTail returns where the pending records at the end of the first
// size bytes of f begin, and the last of them; size (after the last
// complete line) and nil when the last record is not pending.
func pendingTail(f *os.File, size int64) (start int64, last *cutoffRecord, err error) {
	// buf holds f's bytes from pos on that are not yet looked at.
	var buf []byte
	pos := size
	more := func() error {
		n := min(pos, 4096)
		b := make([]byte, int(n)+len(buf))
		if _, err := f.ReadAt(b[:n], pos-n); err != nil {
			return err
		}
		copy(b[n:], buf)
		buf, pos = b, pos-n
		return nil
	}
	// A last line without its newline is an append that never finished.
	for bytes.LastIndexByte(buf, '\n') < 0 {
		if pos == 0 {
			return 0, nil, nil
		}
		if err := more(); err != nil {
			return 0, nil, err
		}
	}
	buf = buf[:bytes.LastIndexByte(buf, '\n')+1]
	start = pos + int64(len(buf))
	for len(buf) > 0 {
		i := bytes.LastIndexByte(buf[:len(buf)-1], '\n')
		if i < 0 && pos > 0 {
			if err := more(); err != nil {
				return 0, nil, err
			}
			continue
		}
		var rec cutoffRecord
		if json.Unmarshal(buf[i+1:], &rec) != nil || !rec.Pending {
			break // a line that does not parse is the parse's to refuse
		}
		start = pos + int64(i+1)
		if last == nil {
			last = &rec
		}
		buf = buf[:i+1]
	}
	return start, last, nil
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
		if err := json.Unmarshal(line, &rec); err != nil || rec.Username == "" || rec.TokensAfter.IsZero() ||
			(rec.Event == eventRevoke) != (len(rec.AccessTokens) > 0) || (rec.Event == eventResetLink) != (len(rec.ResetLinks) > 0) {
			return nil, fmt.Errorf("%s: line %d: not a cut-off record", name, n)
		}
		u := c[rec.Username]
		at := rec.TokensAfter.UTC()
		if rec.Event != eventRevoke && rec.Event != eventResetLink {
			u.after = users.Later(u.after, at)
		}
		switch rec.Event {
		case "":
		case eventRevoke:
			if u.revoked == nil {
				u.revoked = make(map[string]bool, len(rec.AccessTokens))
			}
			for _, id := range rec.AccessTokens {
				u.revoked[id] = true
			}
		case eventResetLink:
			if u.deadLinks == nil {
				u.deadLinks = make(map[string]bool, len(rec.ResetLinks))
			}
			for _, d := range rec.ResetLinks {
				u.deadLinks[d] = true
			}
		case eventDelete:
			u.deleted, u.disabled = users.Later(u.deleted, at), false
		case eventDisable:
			u.disabled = true
		case eventEnable:
			u.disabled = false
		default: // a newer version's: what it keeps cannot be told, so nothing loads
			return nil, fmt.Errorf("%s: line %d: unknown event %q", name, n, rec.Event)
		}
		c[rec.Username] = u
	}
}

// hides reports whether the entry of username whose own cut-off is
// tokensAfter is a deleted user's.
func (c cutoffs) hides(username string, tokensAfter time.Time) bool {
	d := c[username].deleted
	return !d.IsZero() && tokensAfter.Before(d)
}

// apply gives e what its records say: false when e is a deleted user's,
// who does not load; otherwise its cut-off raised to the records' and
// disabled if they keep it so.
func (c cutoffs) apply(e *rawEntry) bool {
	return c.applyTo(string(e.username), &e.tokensAfter, &e.disabled, &e.accessTokens, &e.resetLink)
}

// applyTo is apply for the fields the records bear on, wherever they are
// held: a raw entry's (apply) or a decoded user's (applyUser).
func (c cutoffs) applyTo(username string, tokensAfter *time.Time, disabled *bool, accessTokens *[]users.AccessToken, resetLink **users.ResetLink) bool {
	u, ok := c[username]
	if !ok {
		return true
	}
	if c.hides(username, *tokensAfter) {
		return false
	}
	*tokensAfter = users.Later(*tokensAfter, u.after)
	*disabled = *disabled || u.disabled
	*accessTokens = u.live(*accessTokens)
	*resetLink = u.liveLink(*resetLink)
	return true
}

// live returns list without the personal access tokens the records end:
// list itself when they end none of them.
func (u cutoff) live(list []users.AccessToken) []users.AccessToken {
	ended := func(t users.AccessToken) bool { return u.revoked[t.ID] }
	if len(u.revoked) == 0 || !slices.ContainsFunc(list, ended) {
		return list
	}
	list = slices.DeleteFunc(slices.Clone(list), ended)
	if len(list) == 0 {
		return nil
	}
	return list
}

// liveLink returns l, or nil when the records end it.
func (u cutoff) liveLink(l *users.ResetLink) *users.ResetLink {
	if l != nil && u.deadLinks[l.Digest] {
		return nil
	}
	return l
}

// endedResetLink returns the digest of was, a user's reset link before a
// change, when it was live at now and is not the link after the change:
// one the change spent, superseded or ended; "" otherwise. An expired
// link is left out: no copy of a file brings it back to life.
func endedResetLink(was, is *users.ResetLink, now time.Time) string {
	if was == nil || !now.Before(was.ExpiresAt) || (is != nil && is.Digest == was.Digest) {
		return ""
	}
	return was.Digest
}

// endedAccessTokens returns the ids of the tokens of was, live at now,
// that is does not hold: those a change ended. Expired ones are left
// out: no copy of a file brings them back to life.
func endedAccessTokens(was, is []users.AccessToken, now time.Time) []string {
	var ids []string
	for _, t := range was {
		if t.Live(now) && !slices.ContainsFunc(is, func(x users.AccessToken) bool { return x.ID == t.ID }) {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// applyUser is apply for a decoded entry.
func (c cutoffs) applyUser(x *users.User) bool {
	return c.applyTo(x.Username, &x.TokensAfter, &x.Disabled, &x.AccessTokens, &x.ResetLink)
}

// applyAll applies the records to list in place and returns the users
// that load, in order: list without the deleted users' entries.
func (c cutoffs) applyAll(list []users.User) []users.User {
	kept := list[:0]
	for _, u := range list {
		if c.applyUser(&u) {
			kept = append(kept, u)
		}
	}
	return kept
}

// added returns u, a user to add, with a cut-off no earlier than any
// record of its name: not hidden by a deletion, and no token of a
// deleted user of the name comes back.
func (c cutoffs) added(u users.User) users.User {
	u.TokensAfter = users.Later(u.TokensAfter, c[u.Username].after)
	return u
}

// appendPending appends recs, marked pending, as appendCutoffs does: the
// records of an edit whose users file is not yet in place.
func appendPending(usersPath string, recs ...cutoffRecord) error {
	marked := make([]cutoffRecord, len(recs))
	for i, r := range recs {
		r.Pending = true
		marked[i] = r
	}
	return appendCutoffs(usersPath, marked...)
}

// commitCutoffs ends the pending records at the end of the cut-offs file
// of the users file at usersPath, if there are any: it appends the last
// of them again, not pending, which changes nothing in what the records
// say, in this version or an earlier one. The caller holds the users
// file's lock, so they are its own edit's or a killed writer's.
func commitCutoffs(usersPath string) error {
	path := CutoffsPath(usersPath)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record the cut-off: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("record the cut-off in %s: %w", path, bare(err))
	}
	_, last, err := pendingTail(f, info.Size())
	if err != nil {
		return fmt.Errorf("record the cut-off in %s: %w", path, bare(err))
	}
	if last == nil {
		return nil
	}
	last.Pending = false
	return appendCutoffs(usersPath, *last)
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
	return appendRecords(usersPath, CutoffsPath(usersPath), "cut-offs file", "the cut-off", buf.Bytes())
}
