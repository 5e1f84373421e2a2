package usersfile

import (
	"slices"
	"strings"
	"sync"

	"authsvc/internal/users"
)

// LookupKey of an email address answers from the index Lookup answers
// from, never reading the file, as Page does: the index keeps its users
// with an address in the order of users.CompareEmails (emailOrder),
// sorted at the first look-up by email of that index. A server that
// never sends a reset mail pays neither the sort nor its slice, 8 bytes
// a user with an address.

// An emailOrder is an index's users with an email address, in the order
// of users.CompareEmails and then of their usernames, sorted once.
type emailOrder struct {
	once sync.Once
	list []*users.Account
}

// emails returns x's users with an email address, sorted at the first
// call; the slice is shared, never changed.
func (x *userIndex) emails() *emailOrder {
	x.byEmail.once.Do(func() {
		list := make([]*users.Account, 0, len(x.byName))
		for _, u := range x.byName {
			if u.Email() != "" {
				list = append(list, u)
			}
		}
		slices.SortFunc(list, func(a, b *users.Account) int {
			if c := users.CompareEmails(a.Email(), b.Email()); c != 0 {
				return c
			}
			return strings.Compare(a.Username(), b.Username())
		})
		x.byEmail.list = list
	})
	return &x.byEmail
}

// find returns the users whose address is email (users.SameEmail), in
// byte order of their usernames, with their tokens from tokens:
// ErrNotFound when none.
func (o *emailOrder) find(email string, tokens map[string][]users.AccessToken) ([]users.Match, error) {
	if email == "" {
		return nil, users.ErrNotFound // no address: not every user without one
	}
	i, _ := slices.BinarySearchFunc(o.list, email, func(u *users.Account, email string) int {
		return users.CompareEmails(u.Email(), email)
	})
	var found []users.Match
	for ; i < len(o.list) && users.SameEmail(o.list[i].Email(), email); i++ {
		u := o.list[i]
		found = append(found, users.Match{Account: u, AccessTokens: tokens[u.Username()]})
	}
	if len(found) == 0 {
		return nil, users.ErrNotFound
	}
	return found, nil
}
