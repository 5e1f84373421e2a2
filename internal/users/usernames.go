package users

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Usernames as Django makes them (API.md "Usernames"): NFKC first, as
// AbstractBaseUser.normalize_username does on create and UsernameField does
// on every form, then the rule on the normalized form, so that what is
// checked is what is stored and compared.

// NormalizeUsername returns s in NFKC form. Every username a request or
// the CLI carries passes through it before any lookup or throttle key, so
// "zoë" typed precomposed or decomposed, or "ｚｏｅ" typed fullwidth, is one
// user and one throttle bucket, not two.
func NormalizeUsername(s string) string {
	return norm.NFKC.String(s)
}

// isNFKC reports whether s is already in NFKC form. The users file must
// hold usernames in that form: an entry that is not could never be logged
// into, since every request's username is normalized before the lookup.
func isNFKC(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return norm.NFKC.IsNormalString(s)
		}
	}
	return true // ASCII is in every normal form; the check allocates
}

// validUnicodeUsername reports whether s, already normalized, is 1 to
// MaxUsernameLen code points, each a Unicode letter or number (general
// categories L and N) or one of @ . + - _.
//
// This is API.md's statement of Django's UnicodeUsernameValidator,
// r'^[\w.@+-]+\Z'. Checked code point by code point against Python 3.11:
// its \w admits exactly categories L and N and "_", no marks (M), so a name
// whose NFKC form keeps a combining mark, as Devanagari does, is refused by
// Django too. The one difference is the Unicode edition: Go's tables are
// 15.0, Python 3.11's are 14.0, so the 4,388 letters and numbers new in 15.0
// are accepted here and refused by that Django; a newer Python closes it.
func validUnicodeUsername(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	n := 0
	for _, r := range s {
		n++
		if n > MaxUsernameLen {
			return false
		}
		if !usernameRune(r) {
			return false
		}
	}
	return true
}

// usernameRune reports whether r may appear in a username.
func usernameRune(r rune) bool {
	switch r {
	case '@', '.', '+', '-', '_':
		return true
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}
