package usersfile

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/users"
)

// An indexBuilder builds a userIndex entry by entry, as the users file is
// read. A user whose entry is the same as in the index it replaces keeps
// its Account, its name already checked and its hash already parsed: a
// reload of a large file allocates little beyond its new map.
type indexBuilder struct {
	x          *userIndex
	prev       map[string]*users.Account // the index replaced; nil on a first load
	prevGroups map[string][]string
	key        []byte         // scratch: an interning key
	slowest    *users.Account // the first user with the most work
	prevIndex  *userIndex
	cuts       cutoffs         // the cut-offs file's records, applied to each entry
	deleted    map[string]bool // names of the deleted users' entries left out, for duplicates
}

// newIndexBuilder returns a builder of an index of about n users, replacing prev (may be nil).
func newIndexBuilder(prev *userIndex, n int) *indexBuilder {
	b := &indexBuilder{
		x:         &userIndex{byName: make(map[string]*users.Account, n), groups: make(map[string][]string)},
		prevIndex: prev,
	}
	if prev != nil {
		b.prev, b.prevGroups = prev.byName, prev.groups
	}
	return b
}

// add is the entrySink of scanUsers: entry i with parseUsersStrict's checks
// of a decoded entry, in its order: username valid, unique, hash valid.
// What was checked when the replaced index was loaded is not checked again.
func (b *indexBuilder) add(i int, e *rawEntry, _ []byte) error {
	if !b.cuts.apply(e) {
		return b.leaveOut(i, e)
	}
	old := b.prev[string(e.username)]
	var u *users.Account
	var hashErr error
	if old == nil {
		// Made first, so that its name is checked in the Account's own
		// copy; its hash's error waits for the checks before it.
		p := e.parts(b.intern(e.groups))
		u, hashErr = users.MakeAccount(&p, nil)
		if err := users.CheckUsername(u.Username()); err != nil {
			return fmt.Errorf("users[%d]: %w", i, err)
		}
	}
	if _, dup := b.x.byName[string(e.username)]; dup || b.deleted[string(e.username)] {
		return errDuplicate
	}
	return b.put(i, e, old, u, hashErr)
}

// leaveOut checks entry i, a deleted user's that the records leave out
// of the index (cutoffs.apply), as add and put check the others: a file
// loads or is refused whole, whoever is in it.
func (b *indexBuilder) leaveOut(i int, e *rawEntry) error {
	name := string(e.username)
	if err := users.CheckUsername(name); err != nil {
		return fmt.Errorf("users[%d]: %w", i, err)
	}
	if _, dup := b.x.byName[name]; dup || b.deleted[name] {
		return errDuplicate
	}
	if b.deleted == nil {
		b.deleted = make(map[string]bool)
	}
	b.deleted[name] = true
	if err := users.CheckDjangoHash(e.djangoHash); err != nil {
		return fmt.Errorf("%s: django_hash: %v", entryAt(i, name), err)
	}
	if err := users.CheckFactors(e.factors); err != nil {
		return fmt.Errorf("%s: mfa: %v", entryAt(i, name), err)
	}
	if _, err := password.ParseHash(string(e.hash)); err != nil {
		return fmt.Errorf("%s: password_hash: %v", entryAt(i, name), err)
	}
	return nil
}

// put adds entry i, a later entry of the same name replacing an earlier.
// old is the replaced index's user of that name, if any; u, if not nil, is
// the user e makes, and hashErr its hash's error (MakeAccount). The index
// keeps e.factors and e.accessTokens themselves (every decoder makes them
// afresh).
func (b *indexBuilder) put(i int, e *rawEntry, old, u *users.Account, hashErr error) error {
	if err := users.CheckDjangoHash(e.djangoHash); err != nil {
		return fmt.Errorf("%s: django_hash: %v", entryAt(i, string(e.username)), err)
	}
	if err := users.CheckFactors(e.factors); err != nil {
		return fmt.Errorf("%s: mfa: %v", entryAt(i, string(e.username)), err)
	}
	if err := users.CheckAccessTokens(e.accessTokens); err != nil {
		return fmt.Errorf("%s: %v", entryAt(i, string(e.username)), err)
	}
	if u == nil {
		p := e.parts(b.intern(e.groups))
		u, hashErr = users.MakeAccount(&p, old)
	}
	if hashErr != nil {
		return fmt.Errorf("%s: password_hash: %v", entryAt(i, u.Username()), hashErr)
	}
	b.x.byName[u.Username()] = u
	// Filled from the entry, not the Account: a reused Account carries
	// only whether there are factors, and an edit of them alone reuses it.
	switch {
	case e.factors != nil:
		if b.x.factors == nil {
			b.x.factors = make(map[string]*users.Factors)
		}
		b.x.factors[u.Username()] = e.factors
	case b.x.factors != nil:
		delete(b.x.factors, u.Username()) // an earlier entry of the name had some
	}
	// A reset link in the file is an older version's (resets.go): kept
	// so that the first link made beside the file can record it dead.
	switch {
	case e.resetLink != nil:
		if b.x.resetLinks == nil {
			b.x.resetLinks = make(map[string]*users.ResetLink)
		}
		b.x.resetLinks[u.Username()] = e.resetLink
	case b.x.resetLinks != nil:
		delete(b.x.resetLinks, u.Username())
	}
	// From the entry too: a reused Account says nothing of tokens.
	if err := b.x.putAccessTokens(i, u, e.accessTokens); err != nil {
		return err
	}
	if w := u.Work(); w > 0 && (b.slowest == nil || w > b.slowest.Work()) {
		b.slowest = u
	}
	return nil
}

// finish returns the index, its slowest check reused from the index it
// replaces when the slowest hash's scheme and parameters have not changed.
func (b *indexBuilder) finish() (*userIndex, error) {
	var slowest *password.Hash
	if b.slowest != nil {
		slowest = b.slowest.Hash()
	}
	var prev *users.SlowestCheck
	if b.prevIndex != nil {
		prev = b.prevIndex.slowest
	}
	c, err := users.NewSlowestCheck(slowest, prev)
	if err != nil {
		return nil, err
	}
	b.x.slowest = c
	return b.x, nil
}

// intern returns groups as strings, the same slice for every user with the
// same groups, [] for none.
func (b *indexBuilder) intern(groups [][]byte) []string {
	b.key = b.key[:0]
	for _, g := range groups { // length-prefixed: no two lists share a key
		b.key = strconv.AppendInt(b.key, int64(len(g)), 10)
		b.key = append(b.key, ':')
		b.key = append(b.key, g...)
	}
	if s, ok := b.x.groups[string(b.key)]; ok {
		return s
	}
	s, ok := b.prevGroups[string(b.key)]
	if !ok {
		s = make([]string, len(groups))
		for k, g := range groups {
			s[k] = string(g)
		}
	}
	b.x.groups[string(b.key)] = s
	return s
}

// parts returns what e makes an Account of, with its groups interned.
func (e *rawEntry) parts(groups []string) users.AccountParts {
	return users.AccountParts{Username: e.username, PasswordHash: e.hash, Name: e.name, Email: e.email, Groups: groups,
		Admin: e.admin, Disabled: e.disabled, TokensAfter: e.tokensAfter, FailuresAfter: e.failuresAfter,
		CodesAfter: e.codesAfter, PasswordGeneration: e.generation, MFA: e.factors}
}

// rawUser returns u as an entry of the users file.
func rawUser(u *users.User) *rawEntry {
	e := &rawEntry{username: []byte(u.Username), hash: []byte(u.PasswordHash), name: []byte(u.Name), email: []byte(u.Email),
		admin: u.Admin, disabled: u.Disabled, tokensAfter: u.TokensAfter, failuresAfter: u.FailuresAfter, codesAfter: u.CodesAfter, generation: u.PasswordGeneration}
	if u.DjangoHash != "" {
		e.djangoHash = []byte(u.DjangoHash)
	}
	e.factors, e.accessTokens, e.resetLink = u.MFA, u.AccessTokens, u.ResetLink
	for _, g := range u.Groups {
		e.groups = append(e.groups, []byte(g))
	}
	return e
}

// cutsBetween calls cut for every user of old whose tokens died in new
// (CutOf), new read at readAt. Users added are not told: a name used again
// after a deletion was told as deleted.
func cutsBetween(old, new *userIndex, readAt time.Time, cut func(users.Cut)) {
	if old == nil || cut == nil {
		return
	}
	for name, was := range old.byName {
		if c, ok := users.CutOf(name, was, new.byName[name], readAt); ok {
			cut(c)
		}
	}
}

// A userIndex is an immutable snapshot of a directory's users as the server
// uses them; a reload builds a new one and swaps it in whole.
type userIndex struct {
	byName  map[string]*users.Account
	slowest *users.SlowestCheck
	groups  map[string][]string // interned group lists, by indexBuilder.intern's key
	// factors are the second factors of the users that have an mfa entry,
	// apart from their Accounts, which stay small: nil while no one has
	// any, so a large file without them costs nothing more.
	factors map[string]*users.Factors
	// accessTokens are the personal access tokens of the users that have
	// any, and byDigest finds each of them by its digest; both nil while
	// no one has any (accesstokens.go).
	accessTokens map[string][]users.AccessToken
	byDigest     tokenDigests
	// resetLinks are the reset links the users file holds, an older
	// version's (resets.go); nil while it holds none.
	resetLinks map[string]*users.ResetLink
	// order is the users in byte order of username, for Page and Count
	// (page.go): sorted at the first of them, not at every load.
	order userOrder
	// byEmail is the users with an email address in the order of
	// users.CompareEmails, for LookupKey (emails.go): sorted at the first
	// look-up by email, not at every load.
	byEmail emailOrder
	// counts are Count's answers, by filter (countKey): an index never
	// changes once built, so a filter is counted once per load, however
	// often it is asked (the --require-mfa gauge asks every interval).
	counts sync.Map
}

// newUserIndex builds an index of validated users, reusing prev's slowest
// check when the slowest hash's scheme and parameters have not changed.
// The index keeps users' MFA values, not copies: they must be its own.
func newUserIndex(list []users.User, prev *userIndex) (*userIndex, error) {
	b := newIndexBuilder(prev, len(list))
	for i := range list {
		e := rawUser(&list[i])
		if err := b.put(i, e, b.prev[list[i].Username], nil, nil); err != nil {
			return nil, err
		}
	}
	return b.finish()
}

// Lookup returns the user named username, or ErrNotFound.
func (x *userIndex) Lookup(_ context.Context, username string) (*users.Account, error) {
	if u := x.byName[username]; u != nil {
		return u, nil
	}
	return nil, users.ErrNotFound
}

// Slowest returns what a failed login against this index costs.
func (x *userIndex) Slowest() *users.SlowestCheck { return x.slowest }
