package usersfile

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"authsvc/internal/users"
)

// Page and Count answer from the index Lookup answers from, never reading
// the file: a page costs a binary search and the users it returns. The
// index keeps its users in byte order of username (userOrder), sorted at
// the first Page or Count of that index: a server that never lists its
// users pays neither the sort nor its slice, 8 bytes a user.

// A userOrder is an index's users in byte order of username, sorted once.
type userOrder struct {
	once sync.Once
	list []*users.Account
}

// sorted returns x's users in byte order of username, sorted at the
// first call; the slice is shared, never changed.
func (x *userIndex) sorted() []*users.Account {
	x.order.once.Do(func() {
		list := make([]*users.Account, 0, len(x.byName))
		for _, u := range x.byName {
			list = append(list, u)
		}
		slices.SortFunc(list, compareAccounts)
		x.order.list = list
	})
	return x.order.list
}

// compareAccounts orders users by username, byte for byte.
func compareAccounts(a, b *users.Account) int { return strings.Compare(a.Username(), b.Username()) }

// search returns the position in list, sorted, of the first user whose
// username is name or sorts after it.
func search(list []*users.Account, name string) int {
	i, _ := slices.BinarySearchFunc(list, name, func(u *users.Account, name string) int {
		return strings.Compare(u.Username(), name)
	})
	return i
}

// from returns x's users, in order, from the first whose username sorts
// after after and is no less than prefix: a prefix's users are next to
// each other in byte order, so those of f.Prefix start there and end at
// the first user without it.
func (x *userIndex) from(after, prefix string) []*users.Account {
	list := x.sorted()
	i := search(list, max(after, prefix))
	if i < len(list) && list[i].Username() == after {
		i++ // after is exclusive
	}
	return list[i:]
}

// page returns the users f matches whose usernames sort after after, in
// byte order, at most limit of them (Directory.Page).
func (x *userIndex) page(after string, limit int, f users.Filter) []users.User {
	span := x.from(after, f.Prefix)
	page := make([]users.User, 0, max(0, min(limit, len(span)))) // at most this, and often this
	m := newMatcher(f)
	for _, u := range span {
		if len(page) >= limit || !strings.HasPrefix(u.Username(), f.Prefix) {
			break
		}
		if m.match(u) {
			page = append(page, x.user(u))
		}
	}
	return page
}

// count returns how many users f matches (Directory.Count), counted at
// the first call with f's conditions and remembered with the index.
func (x *userIndex) count(f users.Filter) int {
	if f.Prefix == "" && len(f.Groups) == 0 && f.Admin == users.Either && f.Disabled == users.Either && f.MFA == users.Either && f.Email == "" {
		return len(x.byName)
	}
	key := countKey(f)
	if n, ok := x.counts.Load(key); ok {
		return n.(int)
	}
	n := x.countAll(f)
	x.counts.Store(key, n)
	return n
}

// countKey is f as a key of userIndex.counts: equal for filters with the
// same conditions.
func countKey(f users.Filter) string {
	return fmt.Sprintf("%q %q %d %d %d %q", f.Prefix, f.Groups, f.Admin, f.Disabled, f.MFA, f.Email)
}

// countAll counts the users f matches, one by one.
func (x *userIndex) countAll(f users.Filter) int {
	n := 0
	m := newMatcher(f)
	for _, u := range x.from("", f.Prefix) {
		if !strings.HasPrefix(u.Username(), f.Prefix) {
			break
		}
		if m.match(u) {
			n++
		}
	}
	return n
}

// A matcher is Filter.Match asked of Accounts.
type matcher struct {
	f users.Filter
	// some stands for a user's second factors: Match asks only whether
	// there are any, which the Account knows without the factors.
	some *users.Factors
}

// newMatcher returns the matcher of f.
func newMatcher(f users.Filter) *matcher {
	return &matcher{f: f, some: &users.Factors{TOTP: &users.TOTPFactor{}}}
}

// match reports whether m's filter selects u.
func (m *matcher) match(u *users.Account) bool {
	info := u.Info()
	v := users.User{Username: info.Username, Email: info.Email, Groups: info.Groups, Admin: info.Admin, Disabled: u.Disabled()}
	if u.HasSecondFactor() {
		v.MFA = m.some
	}
	return m.f.Match(&v)
}

// user returns u as a page gives it, the caller's own copy: its profile,
// groups, flags, cut-offs, second factors and personal access tokens.
// Not its password hash or generation, its Django fingerprint or its
// reset link: a list of users has no use for them.
func (x *userIndex) user(u *users.Account) users.User {
	info := u.Info()
	v := users.User{Username: info.Username, Name: info.Name, Email: info.Email, Groups: slices.Clone(info.Groups),
		Admin: info.Admin, Disabled: u.Disabled(), TokensAfter: u.TokensAfter(), FailuresAfter: u.FailuresAfter(),
		CodesAfter: u.CodesAfter(),
		// From the factors themselves, not the Account's flag: a pending
		// authenticator alone is factors, and no second factor.
		MFA: x.factors[info.Username].Clone(), AccessTokens: cloneAccessTokens(x.accessTokens[info.Username])}
	return v
}
