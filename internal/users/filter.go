package users

import (
	"fmt"
	"slices"
	"strings"
)

// A Want is what a Filter asks of one of a user's yes-or-no fields.
type Want uint8

const (
	Either Want = iota // no condition
	Yes                // the field must be true
	No                 // the field must be false
)

// matches reports whether b is what w asks for.
func (w Want) matches(b bool) bool {
	return w == Either || (w == Yes) == b
}

// ParseWant returns the Want of "true" or "false", as the admin API's
// query parameters spell them.
func ParseWant(s string) (Want, error) {
	switch s {
	case "true":
		return Yes, nil
	case "false":
		return No, nil
	}
	return Either, fmt.Errorf("%q: want true or false", s)
}

// A Filter selects users: Directory.Page and Directory.Count return only
// the users it matches. The zero Filter matches every user.
type Filter struct {
	// Prefix: usernames that start with it, byte for byte.
	Prefix string
	// Groups: members of at least one of them; nil or empty, any user.
	Groups []string
	// Admin, Disabled and MFA ask for the user's admin flag, disabled
	// flag and HasSecondFactor.
	Admin, Disabled, MFA Want
	// Email: users whose email address is it, ASCII letters matched in
	// either case (Django's password reset ignores the address's case;
	// other letters are compared as they are, so that every backend
	// agrees, whatever its collation); "", any user.
	Email string
}

// Match reports whether u is one of the users f selects: the reference
// every backend's Page and Count agree with.
func (f *Filter) Match(u *User) bool {
	return strings.HasPrefix(u.Username, f.Prefix) && (f.Email == "" || SameEmail(u.Email, f.Email)) &&
		(len(f.Groups) == 0 || slices.ContainsFunc(u.Groups, func(g string) bool { return slices.Contains(f.Groups, g) })) &&
		f.Admin.matches(u.Admin) && f.Disabled.matches(u.Disabled) && f.MFA.matches(u.HasSecondFactor())
}

// SameEmail reports whether a and b are the same email address as
// Filter.Email compares them: equal once their ASCII letters are lower
// case.
func SameEmail(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

// lowerASCII returns c in lower case if it is an ASCII letter.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// LowerASCII returns s with its ASCII letters in lower case, and every
// other byte as it is.
func LowerASCII(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return 'A' <= r && r <= 'Z' }) {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		b[i] = lowerASCII(c)
	}
	return string(b)
}

// MaxPage is the most users Directory.Page returns at once: the admin
// API's largest limit.
const MaxPage = 500

// Page returns, of list, the users f matches whose usernames sort after
// after in byte order, in that order, at most limit of them: what every
// Directory's Page returns, for a backend that holds its users as a list.
// list is sorted in place.
func Page(list []User, after string, limit int, f Filter) []User {
	slices.SortFunc(list, func(a, b User) int { return strings.Compare(a.Username, b.Username) })
	i, _ := slices.BinarySearchFunc(list, after, func(u User, name string) int { return strings.Compare(u.Username, name) })
	var page []User
	for ; i < len(list) && len(page) < limit; i++ {
		if list[i].Username > after && f.Match(&list[i]) {
			page = append(page, list[i])
		}
	}
	return page
}

// Count returns how many users of list f matches.
func Count(list []User, f Filter) int {
	n := 0
	for i := range list {
		if f.Match(&list[i]) {
			n++
		}
	}
	return n
}

// An MFAPolicy says which users must have a second factor (API.md,
// Required second factor; --require-mfa): none, admins, all, or the
// members of some groups. The zero MFAPolicy requires it of no one.
type MFAPolicy struct {
	all, admins bool
	groups      []string // sorted; nil unless the policy names groups
}

// ParseMFAPolicy returns the policy --require-mfa spells s: "none",
// "admins", "all", or a comma list of "group:NAME".
func ParseMFAPolicy(s string) (MFAPolicy, error) {
	switch s {
	case "none", "":
		return MFAPolicy{}, nil
	case "admins":
		return MFAPolicy{admins: true}, nil
	case "all":
		return MFAPolicy{all: true}, nil
	}
	var p MFAPolicy
	for part := range strings.SplitSeq(s, ",") {
		name, ok := strings.CutPrefix(part, "group:")
		if !ok || name == "" {
			return MFAPolicy{}, fmt.Errorf("%q: want none, admins, all or a comma list of group:NAME", s)
		}
		if err := checkText(name, maxGroupLen, false); err != nil {
			return MFAPolicy{}, fmt.Errorf("group %q: %v", name, err)
		}
		p.groups = append(p.groups, name)
	}
	slices.Sort(p.groups)
	p.groups = slices.Compact(p.groups)
	return p, nil
}

// String returns p as --require-mfa spells it.
func (p MFAPolicy) String() string {
	switch {
	case p.all:
		return "all"
	case p.admins:
		return "admins"
	case len(p.groups) > 0:
		return "group:" + strings.Join(p.groups, ",group:")
	}
	return "none"
}

// None reports whether p requires a second factor of no one.
func (p MFAPolicy) None() bool { return !p.all && !p.admins && len(p.groups) == 0 }

// covers reports whether p requires a second factor of a user who is an
// admin or not, and in groups.
func (p MFAPolicy) covers(admin bool, groups []string) bool {
	switch {
	case p.all:
		return true
	case p.admins:
		return admin
	}
	for _, g := range groups {
		if _, ok := slices.BinarySearch(p.groups, g); ok {
			return true
		}
	}
	return false
}

// Covers reports whether p requires a second factor of u.
func (p MFAPolicy) Covers(u *Account) bool { return p.covers(u.isAdmin(), u.groups) }

// CoversUser reports whether p requires a second factor of u.
func (p MFAPolicy) CoversUser(u *User) bool { return p.covers(u.Admin, u.Groups) }

// PendingUser reports whether u is covered by p and not enrolled: an
// enabled user whom p requires a second factor of and who has none, and
// who therefore logs in to enrolment only.
func (p MFAPolicy) PendingUser(u *User) bool {
	return !u.Disabled && !u.HasSecondFactor() && p.CoversUser(u)
}

// Pending returns the Filter of the users PendingUser reports, and false
// when p covers no one (then no user is pending).
func (p MFAPolicy) Pending() (Filter, bool) {
	f := Filter{Disabled: No, MFA: No}
	switch {
	case p.all:
	case p.admins:
		f.Admin = Yes
	case len(p.groups) > 0:
		f.Groups = p.groups
	default:
		return Filter{}, false
	}
	return f, true
}
