package usersfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"authsvc/internal/users"
)

// The users file's fast parser: one streaming pass over the file that
// validates it exactly as parseUsersStrict does (read.go), decoding the
// common shape of an entry itself and leaving everything else to the
// reference. Errors are the reference's own: an entry the fast decoder
// does not take is decoded by the reference code, and a file that is not
// well-formed JSON, or whose top level is anything but {"users": [...]},
// is handed to parseUsersStrict whole (errStrict). FuzzParseUsers checks
// that both parsers agree on every input.

// errStrict: the scanner met something only the reference parser reports
// exactly; the caller parses the whole file with parseUsersStrict.
var errStrict = errors.New("users file: left to the strict parser")

// maxScanDepth bounds the nesting the scanner follows; deeper is left to
// the reference parser (encoding/json refuses beyond 10,000).
const maxScanDepth = 64

// A rawEntry is one users file entry as decoded, its byte slices pointing
// into the scanner's buffer: valid until the next entry.
type rawEntry struct {
	username, hash, name, email []byte
	groups                      [][]byte
	admin, disabled             bool
	tokensAfter, failuresAfter  time.Time
	codesAfter                  time.Time
	generation                  uint64
	djangoHash                  []byte
	factors                     *users.Factors // nil: none; the fast decoder leaves "mfa" to the reference
	// accessTokens are the user's personal access tokens, nil for none:
	// the fast decoder leaves "access_tokens" to the reference too, so
	// that only the users who have some pay for decoding them.
	accessTokens []users.AccessToken
	// resetLink is the user's live password reset link, nil for none; left
	// to the reference decoder too (few users have one).
	resetLink *users.ResetLink
}

// A usersScanner reads a users file from r through its own buffer.
type usersScanner struct {
	r        io.Reader
	buf      []byte
	pos, end int
	err      error // the first read error other than io.EOF
	raw      []byte
	e        rawEntry

	// With keep, each entry's bytes as they are in the file, white space
	// and all, are kept in orig (from buf[capStart:] on), for a copy.
	keep     bool
	capStart int
	orig     []byte
}

// entrySink takes each entry of a users file in order; i is its index, raw
// its compact JSON (valid until the next entry). It returns the entry's
// error, already naming it, or errDuplicate.
type entrySink func(i int, e *rawEntry, raw []byte) error

// errDuplicate is a sink's report that an entry's username came before;
// the scanner finds where, for the reference's message.
var errDuplicate = errors.New("duplicate username")

// scanUsers reads the users file from r in one pass and gives every entry
// to add. It returns the first entry's error, as parseUsersStrict would, or
// errStrict, or a read error. Once an entry fails, add sees no more.
func scanUsers(r io.ReadSeeker, add entrySink) error {
	return scanUsersKeep(r, false, add)
}

// scanUsersKeep is scanUsers; with keep, the raw given to add is the
// entry's bytes as they are in the file rather than compacted.
func scanUsersKeep(r io.ReadSeeker, keep bool, add entrySink) error {
	s := &usersScanner{r: r, buf: make([]byte, 256<<10), keep: keep}
	var firstErr error
	var dupName []byte
	dupAt := -1
	err := s.entries(func(i int, raw []byte) error {
		if firstErr != nil {
			return nil // syntax only: a later syntax error takes precedence
		}
		e, err := s.decode(i, raw)
		if err == nil && s.keep {
			err = add(i, e, s.orig)
		} else if err == nil {
			err = add(i, e, raw)
		}
		if err == errDuplicate {
			dupName, dupAt = append([]byte(nil), e.username...), i
		}
		firstErr = err
		return nil
	})
	switch {
	case err != nil:
		return err
	case dupAt >= 0:
		return s.duplicate(r, dupAt, dupName)
	}
	return firstErr
}

// duplicate returns the reference's error for entry i, whose name came
// first in an earlier entry: a second pass finds which.
func (s *usersScanner) duplicate(r io.ReadSeeker, i int, name []byte) error {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return err
	}
	*s = usersScanner{r: r, buf: s.buf}
	first := -1
	err := s.entries(func(j int, raw []byte) error {
		if first >= 0 || j >= i {
			return nil
		}
		if e, err := s.decode(j, raw); err == nil && string(e.username) == string(name) && users.CheckUsername(string(name)) == nil {
			first = j
		}
		return nil
	})
	if err != nil {
		return err
	}
	if first < 0 { // the file changed under us
		return errStrict
	}
	return fmt.Errorf("%s: username: duplicate of users[%d]", entryAt(i, string(name)), first)
}

// entryAt names entry i, and its username when it is known to be one.
func entryAt(i int, username string) string {
	return fmt.Sprintf("users[%d] (%q)", i, username)
}

// decode decodes entry i from raw, compact JSON: the fast decoder when it
// can, the reference otherwise, which also checks the username and field
// names. The sink checks the username of an entry decoded fast.
func (s *usersScanner) decode(i int, raw []byte) (*rawEntry, error) {
	e := &s.e
	if decodeEntry(raw, e) {
		return e, nil
	}
	u, err := decodeEntryStrict(i, raw)
	if err != nil {
		return nil, err
	}
	*e = rawEntry{username: []byte(u.Username), hash: []byte(u.PasswordHash), name: []byte(u.Name), email: []byte(u.Email),
		groups: e.groups[:0], admin: u.Admin, disabled: u.Disabled, tokensAfter: u.TokensAfter,
		failuresAfter: u.FailuresAfter, codesAfter: u.CodesAfter, generation: u.PasswordGeneration, djangoHash: []byte(u.DjangoHash),
		factors: u.MFA, accessTokens: u.AccessTokens, resetLink: u.ResetLink}
	for _, g := range u.Groups {
		e.groups = append(e.groups, []byte(g))
	}
	return e, nil
}

// entries scans the top level, which must be exactly {"users": [...]}
// (anything else is errStrict), and calls each with every entry, compacted.
func (s *usersScanner) entries(each func(i int, raw []byte) error) error {
	if !s.want('{') || !s.want('"') {
		return s.fail()
	}
	for _, c := range []byte(`users"`) {
		if s.next() != int(c) {
			return s.fail()
		}
	}
	if !s.want(':') || !s.want('[') {
		return s.fail()
	}
	if s.peekNonSpace() == ']' {
		s.pos++
	} else {
		for i := 0; ; i++ {
			var ok bool
			s.peekNonSpace()
			s.capStart, s.orig = s.pos, s.orig[:0]
			s.raw, ok = s.value(s.raw[:0], 0)
			if !ok {
				return s.fail()
			}
			if s.keep {
				s.orig = append(s.orig, s.buf[s.capStart:s.pos]...)
			}
			if err := each(i, s.raw); err != nil {
				return err
			}
			if c := s.nextNonSpace(); c == ']' {
				break
			} else if c != ',' {
				return s.fail()
			}
		}
	}
	if !s.want('}') || s.nextNonSpace() != -1 {
		return s.fail()
	}
	return s.err
}

// fail returns the read error that stopped the scan, or errStrict.
func (s *usersScanner) fail() error {
	if s.err != nil {
		return s.err
	}
	return errStrict
}

// fill reads more of the file, reporting whether there is any.
func (s *usersScanner) fill() bool {
	if s.err != nil {
		return false
	}
	if s.keep && s.capStart < s.end {
		s.orig = append(s.orig, s.buf[s.capStart:s.end]...)
	}
	s.capStart = 0
	n, err := s.r.Read(s.buf)
	s.pos, s.end = 0, n
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n > 0 || (err == nil && s.fill())
}

// next returns the next byte, or -1 at the end of the file.
func (s *usersScanner) next() int {
	if s.pos == s.end && !s.fill() {
		return -1
	}
	c := s.buf[s.pos]
	s.pos++
	return int(c)
}

// peekNonSpace skips white space and returns the next byte without taking
// it, or -1 at the end.
func (s *usersScanner) peekNonSpace() int {
	for {
		for s.pos < s.end {
			switch c := s.buf[s.pos]; c {
			case ' ', '\t', '\n', '\r':
				s.pos++
			default:
				return int(c)
			}
		}
		if !s.fill() {
			return -1
		}
	}
}

// nextNonSpace skips white space and returns the next byte, or -1.
func (s *usersScanner) nextNonSpace() int {
	c := s.peekNonSpace()
	if c >= 0 {
		s.pos++
	}
	return c
}

// want reports whether the next byte after white space is c, taking it.
func (s *usersScanner) want(c byte) bool { return s.nextNonSpace() == int(c) }

// container appends the rest of an object (end '}') or an array (end
// ']') whose opening byte s has taken and dst ends with: its members,
// separated by commas, and end.
func (s *usersScanner) container(dst []byte, end byte, depth int) ([]byte, bool) {
	if s.peekNonSpace() == int(end) {
		s.pos++
		return append(dst, end), true
	}
	for {
		var ok bool
		if end == '}' {
			dst, ok = s.member(dst, depth)
		} else {
			dst, ok = s.value(dst, depth+1)
		}
		if !ok {
			return dst, false
		}
		switch s.nextNonSpace() {
		case ',':
			dst = append(dst, ',')
		case int(end):
			return append(dst, end), true
		default:
			return dst, false
		}
	}
}

// member appends an object's next member, "name":value.
func (s *usersScanner) member(dst []byte, depth int) ([]byte, bool) {
	if !s.want('"') {
		return dst, false
	}
	dst, ok := s.str(append(dst, '"'))
	if !ok || !s.want(':') {
		return dst, false
	}
	return s.value(append(dst, ':'), depth+1)
}

// value appends the next JSON value, without its white space, to dst, and
// reports whether it was well-formed as encoding/json's scanner has it.
func (s *usersScanner) value(dst []byte, depth int) ([]byte, bool) {
	if depth > maxScanDepth {
		return dst, false
	}
	c := s.nextNonSpace()
	switch {
	case c == '{':
		return s.container(append(dst, '{'), '}', depth)
	case c == '[':
		return s.container(append(dst, '['), ']', depth)
	case c == '"':
		return s.str(append(dst, '"'))
	case c == '-' || '0' <= c && c <= '9':
		return s.number(append(dst, byte(c)), c)
	case c == 't':
		return s.literal(append(dst, 't'), "rue")
	case c == 'f':
		return s.literal(append(dst, 'f'), "alse")
	case c == 'n':
		return s.literal(append(dst, 'n'), "ull")
	}
	return dst, false
}

// literal appends the rest of true, false or null.
func (s *usersScanner) literal(dst []byte, rest string) ([]byte, bool) {
	for i := range len(rest) {
		if s.next() != int(rest[i]) {
			return dst, false
		}
	}
	return append(dst, rest...), true
}

// str appends the rest of a string, its opening quote taken, through its
// closing quote. Control characters are refused and escapes checked, as
// encoding/json does; other bytes, valid UTF-8 or not, are taken.
func (s *usersScanner) str(dst []byte) ([]byte, bool) {
	for {
		start := s.pos
		for s.pos < s.end {
			c := s.buf[s.pos]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			s.pos++
		}
		dst = append(dst, s.buf[start:s.pos]...)
		if s.pos == s.end {
			if !s.fill() {
				return dst, false
			}
			continue
		}
		c := s.buf[s.pos]
		s.pos++
		switch {
		case c == '"':
			return append(dst, '"'), true
		case c < 0x20:
			return dst, false
		}
		dst = append(dst, '\\')
		e := s.next()
		switch e {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			dst = append(dst, byte(e))
		case 'u':
			dst = append(dst, 'u')
			for range 4 {
				h := s.next()
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					return dst, false
				}
				dst = append(dst, byte(h))
			}
		default:
			return dst, false
		}
	}
}

// number appends the rest of a number whose first byte, c, is in dst:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *usersScanner) number(dst []byte, c int) ([]byte, bool) {
	peek := func() int {
		if s.pos == s.end && !s.fill() {
			return -1
		}
		return int(s.buf[s.pos])
	}
	digit := func(c int) bool { return '0' <= c && c <= '9' }
	digits := func() bool { // one or more
		if !digit(peek()) {
			return false
		}
		for digit(peek()) {
			dst = append(dst, s.buf[s.pos])
			s.pos++
		}
		return true
	}
	if c == '-' {
		c = s.next()
		if !digit(c) {
			return dst, false
		}
		dst = append(dst, byte(c))
	}
	if c != '0' {
		for digit(peek()) {
			dst = append(dst, s.buf[s.pos])
			s.pos++
		}
	}
	if peek() == '.' {
		dst = append(dst, '.')
		s.pos++
		if !digits() {
			return dst, false
		}
	}
	if p := peek(); p == 'e' || p == 'E' {
		dst = append(dst, byte(p))
		s.pos++
		if p := peek(); p == '+' || p == '-' {
			dst = append(dst, byte(p))
			s.pos++
		}
		if !digits() {
			return dst, false
		}
	}
	return dst, true
}

// decodeEntry decodes raw, one compact, well-formed users file entry, into
// e, and reports whether it could: false for anything it leaves to the
// reference (a field name not exactly one of User's, a field twice, a
// value of another type, an escape, invalid UTF-8, a tokens_after that
// does not parse), which encoding/json then decodes or refuses.
func decodeEntry(raw []byte, e *rawEntry) bool {
	*e = rawEntry{groups: e.groups[:0]}
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	b := raw[1 : len(raw)-1]
	var seen uint16
	for len(b) > 0 {
		key, rest, ok := plainString(b)
		if !ok || len(rest) == 0 || rest[0] != ':' {
			return false
		}
		b = rest[1:]
		var bit uint16
		var dst *[]byte
		switch string(key) {
		case "username":
			bit, dst = 1<<0, &e.username
		case "password_hash":
			bit, dst = 1<<1, &e.hash
		case "name":
			bit, dst = 1<<2, &e.name
		case "email":
			bit, dst = 1<<3, &e.email
		case "groups":
			bit = 1 << 4
		case "admin":
			bit = 1 << 5
		case "disabled":
			bit = 1 << 6
		case "tokens_after":
			bit = 1 << 7
		case "password_generation":
			bit = 1 << 8
		case "failures_after":
			bit = 1 << 9
		case "django_hash":
			bit, dst = 1<<10, &e.djangoHash
		case "codes_after":
			bit = 1 << 11
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		if b, ok = decodeValue(b, e, bit, dst); !ok {
			return false
		}
		if len(b) > 0 {
			if b[0] != ',' || len(b) == 1 {
				return false
			}
			b = b[1:]
		}
	}
	return true
}

// decodeValue decodes the value at the start of b into e's field of
// decodeEntry's bit (dst, if not nil, for a string field) and returns
// what follows it, reporting false for anything left to the reference.
func decodeValue(b []byte, e *rawEntry, bit uint16, dst *[]byte) ([]byte, bool) {
	var ok bool
	switch {
	case hasPrefix(b, "null"):
		return b[4:], true // null leaves the field as it is: zero
	case dst != nil:
		*dst, b, ok = plainString(b)
		return b, ok
	case bit == 1<<4:
		return decodeGroups(b, e)
	case bit == 1<<8:
		n := 0
		for n < len(b) && '0' <= b[n] && b[n] <= '9' {
			n++
		}
		g, err := strconv.ParseUint(string(b[:n]), 10, 64)
		if n == 0 || (n > 1 && b[0] == '0') || err != nil {
			return b, false // a sign, a fraction, an exponent or too large: encoding/json says which
		}
		e.generation = g
		return b[n:], true
	case bit == 1<<7, bit == 1<<9, bit == 1<<11:
		t := &e.tokensAfter
		switch bit {
		case 1 << 9:
			t = &e.failuresAfter
		case 1 << 11:
			t = &e.codesAfter
		}
		end := stringEnd(b)
		if end < 0 || t.UnmarshalJSON(b[:end]) != nil {
			return b, false
		}
		return b[end:], true
	case hasPrefix(b, "true"):
		e.admin = e.admin || bit == 1<<5
		e.disabled = e.disabled || bit == 1<<6
		return b[4:], true
	case hasPrefix(b, "false"):
		return b[5:], true
	}
	return b, false
}

// decodeGroups decodes the array of plain strings at the start of b into e.
func decodeGroups(b []byte, e *rawEntry) ([]byte, bool) {
	if len(b) == 0 || b[0] != '[' {
		return b, false
	}
	b = b[1:]
	if len(b) > 0 && b[0] == ']' {
		return b[1:], true
	}
	for {
		g, rest, ok := plainString(b)
		if !ok || len(rest) == 0 {
			return b, false
		}
		e.groups = append(e.groups, g)
		switch rest[0] {
		case ',':
			b = rest[1:]
		case ']':
			return rest[1:], true
		default:
			return b, false
		}
	}
}

// plainString returns the contents of the string at the start of b, when
// it has no escape and is valid UTF-8, and what follows it.
func plainString(b []byte) (s, rest []byte, ok bool) {
	end := stringEnd(b)
	if end < 0 {
		return nil, b, false
	}
	s = b[1 : end-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return nil, b, false
	}
	return s, b[end:], true
}

// stringEnd returns the length of the well-formed string at the start of
// b, quotes included, or -1 when b does not start with one.
func stringEnd(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return -1
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// hasPrefix reports whether b starts with p.
func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }
