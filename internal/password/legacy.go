package password

import (
	"errors"
	"fmt"
	"strings"
)

// A DjangoLegacy is one of Django's legacy fast hashes, as a dump holds it:
// sha1$<salt>$<hex>, md5$<salt>$<hex>, sha1$$<hex> (unsalted_sha1), or
// <32 hex> and md5$$<hex> (unsalted_md5). It is never stored as it is
// (API.md, Moving from Django): Wrap puts its digest inside a policy hash.
type DjangoLegacy struct {
	kind string // the wrapped scheme it becomes: SchemeWrapped…
	salt string // "" for the unsalted forms
	hex  string // Django's digest: lower-case hex
}

// ParseDjangoLegacy reports whether s is one of Django's legacy fast forms,
// as Django 4.2's identify_hasher tells them apart, and parses it. A legacy
// form that Django would never match (an empty salt, a digest that is not
// the lower-case hex Django compares against) is an error that names the
// form and never the hash. Anything else is not legacy: ok false, no error.
func ParseDjangoLegacy(s string) (l *DjangoLegacy, ok bool, err error) {
	var kind, name, salt, digest string
	var size int
	switch {
	case len(s) == 32 && !strings.Contains(s, "$"), len(s) == 37 && strings.HasPrefix(s, "md5$$"):
		kind, name, digest, size = SchemeWrappedUnsaltedMD5, "Django unsalted_md5 hash", strings.TrimPrefix(s, "md5$$"), 32
	case len(s) == 46 && strings.HasPrefix(s, "sha1$$"):
		kind, name, digest, size = SchemeWrappedUnsaltedSHA1, "Django unsalted_sha1 hash", s[len("sha1$$"):], 40
	case strings.HasPrefix(s, "sha1$"):
		kind, name, size = SchemeWrappedSHA1, "Django sha1 hash", 40
		salt, digest, _ = strings.Cut(s[len("sha1$"):], "$")
	case strings.HasPrefix(s, "md5$"):
		kind, name, size = SchemeWrappedMD5, "Django md5 hash", 32
		salt, digest, _ = strings.Cut(s[len("md5$"):], "$")
	default:
		return nil, false, nil
	}
	salted, _ := wrappedSalted(kind)
	switch {
	case salted && salt == "":
		// Django's SHA1 and MD5 hashers raise on an empty salt; the
		// unsalted forms are exactly 46 (sha1$$) and 37 (md5$$) long.
		return nil, true, fmt.Errorf("%s: malformed (an empty salt, which Django never matches: want %d hex digits after the second $)", name, size)
	case len(salt) > maxDjangoSaltLen:
		return nil, true, fmt.Errorf("%s: salt is %d bytes, want 1 to %d", name, len(salt), maxDjangoSaltLen)
	case len(digest) != size || !isLowerHex(digest):
		return nil, true, fmt.Errorf("%s: the digest is not %d lower-case hex digits, which Django never matches", name, size)
	}
	return &DjangoLegacy{kind: kind, salt: salt, hex: digest}, true, nil
}

// Scheme returns the scheme l becomes once wrapped: one of the
// SchemeWrapped… constants.
func (l *DjangoLegacy) Scheme() string { return l.kind }

// Wrap returns l wrapped under policy p: <scheme>$<salt>$<p's hash of the
// hex digest>, the salt empty for the unsalted forms. It costs one hash
// under the policy.
func (l *DjangoLegacy) Wrap(p HashPolicy) (string, error) {
	inner, err := p.Hash([]byte(l.hex))
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(inner, "$") {
		return "", errors.New("hash policy: not a bcrypt or argon2id hash")
	}
	return l.kind + "$" + l.salt + "$" + inner, nil
}
