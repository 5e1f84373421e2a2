package usersfile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"authsvc/internal/users"
)

// The resets file. A reset request is anyone's to send: were its link kept
// in the users file, each request would rewrite the file, and every
// instance reading it would reload all its users (issue 37: 300 requests
// halved another instance's /info). So links and reset mails are kept
// beside the file, in USERS.resets, one JSON record a line, appended and
// synced under the users file's lock: the users file is not rewritten, and
// no instance reloads it (Watch looks at the users and cut-offs files
// only). Whoever confirms a link reads this file under the same lock
// (UpdateAll), so a link made on one instance works on every other at once.
//
// Apart from the cut-offs file: that file is never compacted (its
// tombstones must outlive any copy of the users file), while this one is,
// and an older version refuses a cut-offs record of an event it does not
// know, which would have an older instance of a fleet refuse every load.
//
// A record is a link made for a user ("digest", "expires_at"), bound to
// the user's cut-off when it was made ("tokens_after"), and, when it was
// mailed, when ("mailed"). A user's live link is their last record's, while
// their cut-off is still that one: every password change, a disable,
// reset-mfa and logout move the cut-off, and the cut-offs file keeps it
// from going back with an older users file, so none of them needs a
// record here. A link a change ends while it is live (spent by a confirm,
// say) is also recorded dead in the cut-offs file (eventResetLink). The
// mails of the last hour are the records' "mailed" times, whatever became
// of their links: neither a confirm nor a newer link resets the count.
//
// A link an older version wrote in the users file ("reset_link") is live
// while the user has no record here; the first link made here records it
// dead in the cut-offs file, so that compacting this file never brings it
// back. As the cut-offs file, a last line without its newline is an
// append that never finished, ignored and dropped by the next append; any
// other line that does not parse refuses the operation that reads it
// (fail closed: no link is confirmed, none is made).
//
// Compaction: when at least half of the records, and at least
// resetsCompactAt, are of no use any more (neither a mail of the last
// hour nor a user's last link before its expiry), an append rewrites the
// file without them (a temporary file, fsync, rename), under the lock.

// ResetsPath returns where the reset links and mails of the users file at
// path are kept.
func ResetsPath(path string) string { return path + ".resets" }

// resetsCompactAt is the fewest useless records a compaction drops: below
// it, a rewrite costs more than the lines it saves.
const resetsCompactAt = 64

// A resetRecord is one line of the resets file.
type resetRecord struct {
	Username string `json:"username"`
	// Digest and ExpiresAt are the link's (users.ResetLink); "" for a
	// record a compaction kept for its mail alone.
	Digest    string    `json:"digest,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// TokensAfter is the user's cut-off when the link was made: the link
	// dies when it moves.
	TokensAfter time.Time `json:"tokens_after,omitzero"`
	Mailed      time.Time `json:"mailed,omitzero"` // when it was mailed; zero: handed over otherwise
}

// resets are the resets file's records, by username, in the file's order.
type resets map[string][]resetRecord

// readResets reads the resets file of the users file at usersPath: empty
// when there is none. The caller holds the users file's lock.
func readResets(usersPath string) (resets, int, error) {
	f, err := os.Open(ResetsPath(usersPath))
	if errors.Is(err, os.ErrNotExist) {
		return resets{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	r := resets{}
	br := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return r, n - 1, nil // a last line without its newline never finished
		}
		if err != nil {
			return nil, 0, err
		}
		var rec resetRecord
		if err := json.Unmarshal(line, &rec); err != nil || rec.Username == "" ||
			(rec.Digest == "") == !rec.ExpiresAt.IsZero() || rec.Digest == "" && rec.Mailed.IsZero() {
			return nil, 0, fmt.Errorf("%s: line %d: not a reset record", ResetsPath(usersPath), n)
		}
		if rec.Digest != "" {
			if err := users.CheckResetLink(&users.ResetLink{Digest: rec.Digest, ExpiresAt: rec.ExpiresAt}); err != nil {
				return nil, 0, fmt.Errorf("%s: line %d: %v", ResetsPath(usersPath), n, err)
			}
		}
		r[rec.Username] = append(r[rec.Username], rec)
	}
}

// has reports whether the records hold anything of username: then a link
// in the users file (an older version's) is not theirs any more.
func (r resets) has(username string) bool { return len(r[username]) > 0 }

// link returns the live link of u, a user as the users file and the
// cut-offs file have them (cutoffs.applyUser): their last record's while
// it is bound to their cut-off and the cut-offs file does not end it, or,
// with no record, the link the users file holds (fileLink); nil for none.
// Expiry is the confirm's to judge.
func (r resets) link(u *users.User, fileLink *users.ResetLink, cuts cutoffs) *users.ResetLink {
	recs := r[u.Username]
	if len(recs) == 0 {
		return fileLink
	}
	last := recs[len(recs)-1]
	if last.Digest == "" || !last.TokensAfter.Equal(u.TokensAfter) || cuts[u.Username].deadLinks[last.Digest] {
		return nil
	}
	return &users.ResetLink{Digest: last.Digest, ExpiresAt: last.ExpiresAt}
}

// mails returns when links were mailed to username, as recorded.
func (r resets) mails(username string) []time.Time {
	var at []time.Time
	for _, rec := range r[username] {
		if !rec.Mailed.IsZero() {
			at = append(at, rec.Mailed)
		}
	}
	return at
}

// compacted returns the records still of use at now, in their order: the
// mails of the last hour (a superseded link's kept as a mail alone), and
// each user's last link until it expires. It reports whether at least
// half of n, and at least resetsCompactAt, were not.
func (r resets) compacted(n int, now time.Time) ([]resetRecord, bool) {
	var kept []resetRecord
	for _, recs := range r {
		for i, rec := range recs {
			last := i == len(recs)-1
			switch {
			case last && now.Before(rec.ExpiresAt):
				kept = append(kept, rec)
			case now.Sub(rec.Mailed) < time.Hour:
				kept = append(kept, resetRecord{Username: rec.Username, Mailed: rec.Mailed})
			}
		}
	}
	dropped := n - len(kept)
	return kept, dropped >= resetsCompactAt && 2*dropped >= n
}

// appendResets appends recs to the resets file of the users file at
// usersPath, synced before it returns; or, with compact, writes kept and
// recs as the whole file. The caller holds the users file's lock.
func appendResets(usersPath string, kept []resetRecord, compact bool, recs ...resetRecord) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	lines := recs
	if compact {
		lines = append(kept, recs...)
	}
	for _, r := range lines {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	path := ResetsPath(usersPath)
	if compact {
		return replaceResets(usersPath, path, buf.Bytes())
	}
	return appendRecords(usersPath, path, "resets file", "the reset link", buf.Bytes())
}

// replaceResets replaces the resets file at path by data, atomically, its
// owner the users file's.
func replaceResets(usersPath, path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("compact %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if err := keepOwner(tmp, usersPath); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("compact %s: %w", path, bare(err))
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("compact %s: %w", path, bare(err))
	}
	return replaceUsersFile(tmp, path)
}

// updateResetLink is UpdateAll's with users.ResetLinkOnly: change sees the user as the
// users file, the cut-offs file and the resets file have them now, under
// the users file's lock, and a new link it makes is appended to the resets
// file, the users file left as it is. A link of the users file's own (an
// older version's) that the new one supersedes is recorded dead in the
// cut-offs file, so that no compaction of the resets file revives it.
func (s *Directory) updateResetLink(username string, change func(u *users.User) error) error {
	unlock, err := lockUsersFile(s.path)
	if err != nil {
		return namedForUsers(s.path, err)
	}
	defer unlock()
	u, fileLink, err := s.lockedUser(username)
	if err != nil {
		return err
	}
	rs, n, err := readResets(s.path)
	if err != nil {
		return err
	}
	cuts, err := readCutoffs(CutoffsPath(s.path))
	if err != nil {
		return err
	}
	u.ResetLink, u.ResetMails = rs.link(u, fileLink, cuts), rs.mails(username)
	was := u.ResetLink
	if err := change(u); err != nil {
		return err
	}
	if u.ResetLink == nil || was != nil && u.ResetLink.Digest == was.Digest {
		return nil // nothing new to keep: ending a link is a password change's, which rewrites the file
	}
	if err := users.CheckResetLink(u.ResetLink); err != nil {
		return fmt.Errorf("user %q: %w", username, err)
	}
	if fileLink != nil && !rs.has(username) {
		rec := cutoffRecord{Username: username, TokensAfter: time.Now(), Event: eventResetLink, ResetLinks: []string{fileLink.Digest}}
		if err := appendCutoffs(s.path, rec); err != nil {
			return err
		}
	}
	rec := resetRecord{Username: username, Digest: u.ResetLink.Digest, ExpiresAt: u.ResetLink.ExpiresAt.UTC(), TokensAfter: u.TokensAfter.UTC()}
	if l := len(u.ResetMails); l > 0 && !u.ResetMails[l-1].Equal(lastOr(rs.mails(username))) {
		rec.Mailed = u.ResetMails[l-1].UTC()
	}
	kept, compact := rs.compacted(n, time.Now())
	return appendResets(s.path, kept, compact, rec)
}

// lastOr returns the last of at; zero for none.
func lastOr(at []time.Time) time.Time {
	if len(at) == 0 {
		return time.Time{}
	}
	return at[len(at)-1]
}

// lockedUser returns the user named username as the users file holds them
// now, the cut-offs file's records applied, and the reset link the users
// file holds for them (an older version's). The caller holds the users
// file's lock, so no writer changes the file meanwhile: a loaded directory
// answers from its index, loaded again first if the file has changed
// since; one never loaded (the CLI's) reads the file.
func (s *Directory) lockedUser(username string) (*users.User, *users.ResetLink, error) {
	if s.cur.Load() == nil {
		list, err := s.List(context.Background())
		if err != nil {
			return nil, nil, err
		}
		for i := range list {
			if list[i].Username == username {
				u := list[i]
				return &u, u.ResetLink, nil
			}
		}
		return nil, nil, fmt.Errorf("user %q: %w", username, users.ErrNotFound)
	}
	if s.changed() {
		s.mu.Lock()
		hooks := s.hooks
		s.mu.Unlock()
		if _, err := s.load(hooks.Cut); err != nil {
			return nil, nil, fmt.Errorf("%w: %s was changed and does not load", users.ErrUnavailable, s.path)
		}
	}
	x := s.index()
	a := x.byName[username]
	if a == nil {
		return nil, nil, fmt.Errorf("user %q: %w", username, users.ErrNotFound)
	}
	info := a.Info()
	u := &users.User{Username: info.Username, Name: info.Name, Email: info.Email, Groups: info.Groups, Admin: info.Admin,
		Disabled: a.Disabled(), TokensAfter: a.TokensAfter(), FailuresAfter: a.FailuresAfter(), CodesAfter: a.CodesAfter()}
	return u, x.resetLinks[username], nil
}

// A resetView shows the entries an edit of the users file is about with
// their reset links and mails as the resets file keeps them (UpdateAll),
// and keeps a link an edit makes there, not in the users file. It reads
// the resets file once, under the users file's lock, when first asked.
type resetView struct {
	s    *Directory
	rs   resets
	n    int // lines read
	cuts cutoffs
	read bool
}

// show gives u, an entry as the users file and the cut-offs file have it,
// its live reset link and its mails, and returns the link the users file
// holds (an older version's), which keep writes back when the edit leaves
// the link alone.
func (v *resetView) show(u *users.User) (*users.ResetLink, error) {
	if !v.read {
		var err error
		if v.rs, v.n, err = readResets(v.s.path); err != nil {
			return nil, err
		}
		v.s.mu.Lock()
		v.cuts, err = v.s.readCutoffs()
		v.s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		v.read = true
	}
	fileLink := u.ResetLink
	u.ResetLink, u.ResetMails = v.rs.link(u, fileLink, v.cuts), v.rs.mails(u.Username)
	return fileLink, nil
}

// keep makes u, changed from was (as show gave it), what the users file
// is to hold: no mails, and the file's own link while the edit left the
// live link alone, else none; a new link is appended to the resets file.
// The cut-off records of the change were taken first (changeRecords), so
// a link the edit ended is recorded dead there.
func (v *resetView) keep(was, u *users.User, fileLink *users.ResetLink) error {
	l := u.ResetLink
	u.ResetMails = nil
	switch {
	case l == nil:
		u.ResetLink = nil
		return nil
	case was.ResetLink != nil && l.Digest == was.ResetLink.Digest:
		u.ResetLink = fileLink
		return nil
	}
	u.ResetLink = nil
	rec := resetRecord{Username: u.Username, Digest: l.Digest, ExpiresAt: l.ExpiresAt.UTC(), TokensAfter: u.TokensAfter.UTC()}
	if err := appendResets(v.s.path, nil, false, rec); err != nil {
		return err
	}
	v.rs[u.Username] = append(v.rs[u.Username], rec)
	return nil
}
