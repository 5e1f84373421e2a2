package password

// The policy for every password that is set (API.md "Passwords"): length,
// not the username, not a common password, and no composition rules, as
// NIST SP 800-63B advises.
//
// commonpasswords.txt is the whole "passwords" list of the npm package
// @zxcvbn-ts/language-common 4.1.3 (file src/passwords.json, 49,233
// entries, ranked by frequency, lowercase ASCII, no duplicates), licensed
// MIT: "Copyright (c) 2012-2016 Dan Wheeler and Dropbox, Inc. Copyright
// (c) 2021 @zxcvbn-ts" (the package's LICENSE.txt). It was extracted with
//
//	npm pack @zxcvbn-ts/language-common@4.1.3   # sha256 bf3027c16c069d7877e25dc8751bc819e10e479afcc5ee1a323eb2ab73129ca9
//	tar xzf zxcvbn-ts-language-common-4.1.3.tgz
//	node -e 'for (const p of require("./package/src/passwords.json")) console.log(p.toLowerCase())' |
//		awk '!seen[$0]++' > commonpasswords.txt   # sha256 861b4d0bacb7ff670bd98e8f92260694f7d75e2267239ebd92c007357d1cfe2b
//
// (the lowercasing and deduplication change nothing in this version). The
// list of the original zxcvbn (npm zxcvbn 4.4.2) was passed over: it drops
// every password that ranks higher in its name and word lists, so
// "michael", "jennifer" and "thomas", all in the top 50, are missing there.

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxLen is API.md's longest password, in bytes: longer ones are
// refused before any hash sees them.
const MaxLen = 1024

// DefaultMinLength is --password-min-length's default, in code
// points.
const DefaultMinLength = 12

// A Policy decides whether a password may be set.
type Policy struct {
	MinLength int // code points; below 1 counts as 1, so "" is never allowed
}

// A WeakError is a password the policy refused: a one-line reason
// naming the rule, for the CLI's message and the weak_password reply. It
// never quotes the password.
type WeakError struct{ Reason string }

func (e *WeakError) Error() string { return e.Reason }

func weakPassword(format string, args ...any) error {
	return &WeakError{Reason: fmt.Sprintf(format, args...)}
}

// Check returns nil if password may be set for username, or a
// *WeakError naming the first rule it breaks.
func (p Policy) Check(username, password string) error {
	// Validity first: a code point count of bytes that are not UTF-8 means
	// nothing, and such bytes could not round-trip through the JSON API.
	if !utf8.ValidString(password) {
		return weakPassword("password is not valid UTF-8")
	}
	if len(password) > MaxLen {
		return weakPassword("password is longer than %d bytes", MaxLen)
	}
	minLength := max(p.MinLength, 1)
	if utf8.RuneCountInString(password) < minLength {
		return weakPassword("password is shorter than %d characters", minLength)
	}
	// NFKC on both sides, so a fullwidth or ligature spelling of the
	// username or of a listed password is caught like the plain one.
	folded := norm.NFKC.String(password)
	if strings.EqualFold(folded, norm.NFKC.String(username)) {
		return weakPassword("password is the same as the username")
	}
	if isCommonPassword(folded) {
		return weakPassword("password is in the list of common passwords")
	}
	return nil
}

//go:embed commonpasswords.txt
var commonPasswordsFile string

// commonPasswords is the embedded list sorted for binary search: a slice of
// substrings of the embedded file costs 16 bytes an entry, about a third of
// a map's.
var commonPasswords = sync.OnceValue(func() []string {
	list := strings.Fields(commonPasswordsFile)
	slices.Sort(list)
	return slices.Compact(list)
})

// isCommonPassword reports whether password, in any case, is on the
// embedded list, which is all lowercase.
func isCommonPassword(password string) bool {
	_, found := slices.BinarySearch(commonPasswords(), strings.ToLower(password))
	return found
}
