package users

import (
	"slices"
	"strconv"
	"unicode/utf8"
)

// The info reply, encoded on demand: a precomputed reply per user cost more
// memory than the whole rest of a user (about 130 B each, 130 MB at a
// million users), and encoding it takes well under a microsecond.

// InfoReply returns u's info reply, written over dst's array when it has
// room (the handler reuses its buffers), and its Content-Length header value
// (shared: the caller must not change it).
func (u *Account) InfoReply(dst []byte) (body []byte, length []string) {
	n := 64 + len(u.username) + len(u.name) + len(u.email) // the keys and punctuation, and the values unescaped
	for _, g := range u.groups {
		n += len(g) + 3
	}
	body = u.appendInfoJSON(slices.Grow(dst[:0], n))
	if len(body) < len(contentLengths) {
		return body, contentLengths[len(body)]
	}
	return body, []string{strconv.Itoa(len(body))}
}

// contentLengths[n] is the header value of a Content-Length of n, made
// once and never written (net/http does not write into header values): an
// info reply allocates only its body.
var contentLengths = func() [][]string {
	t := make([][]string, 1024)
	for n := range t {
		t[n] = []string{strconv.Itoa(n)}
	}
	return t
}()

// appendInfoJSON appends u's info reply to dst: what json.Marshal(u.info)
// and a newline make, byte for byte, without reflection.
func (u *Account) appendInfoJSON(dst []byte) []byte {
	i := u
	dst = append(dst, `{"username":`...)
	dst = appendJSONString(dst, i.username)
	dst = append(dst, `,"name":`...)
	dst = appendJSONString(dst, i.name)
	dst = append(dst, `,"email":`...)
	dst = appendJSONString(dst, i.email)
	dst = append(dst, `,"groups":`...)
	if i.groups == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for k, g := range i.groups {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, g)
		}
		dst = append(dst, ']')
	}
	if i.isAdmin() {
		return append(dst, ",\"admin\":true}\n"...)
	}
	return append(dst, ",\"admin\":false}\n"...)
}

// appendJSONString appends s as encoding/json writes a string: HTML's <, >
// and & escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
