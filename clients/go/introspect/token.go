package introspect

import (
	"errors"
	"hash/crc32"
	"net/http"
	"strings"
)

// API.md, "Personal access tokens": the prefix, 30 base62 characters, and
// 6 base62 characters of their CRC-32 (IEEE), a big-endian number padded
// with '0'. A session is 40 lowercase hex characters.
const (
	patPrefix     = "authsvc_pat_"
	patRandom     = 30
	patChecksum   = 6
	patLength     = len(patPrefix) + patRandom + patChecksum
	sessionLength = 40
	base62        = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

var (
	// errNoCredentials: no authorization header, or another scheme.
	errNoCredentials = errors.New("no Token or Bearer credentials")
	// errMalformed: more than one authorization header.
	errMalformed = errors.New("more than one authorization header")
)

// credentials returns what follows the scheme of the request's
// authorization header, parsed as authsvc parses it: scheme Token or
// Bearer in any case, then spaces or tabs. errNoCredentials when there
// is no header or another scheme; errMalformed for two headers.
// Introspect checks the token's form.
func credentials(h http.Header) (string, error) {
	values := h.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", errNoCredentials
	case len(values) > 1:
		return "", errMalformed
	}
	scheme, rest := values[0], ""
	if i := strings.IndexAny(scheme, " \t"); i >= 0 {
		scheme, rest = scheme[:i], scheme[i:]
	}
	if !strings.EqualFold(scheme, "token") && !strings.EqualFold(scheme, "bearer") {
		return "", errNoCredentials
	}
	return strings.TrimLeft(rest, " \t"), nil
}

// wellFormed reports whether t has the form of a session or of a personal
// access token whose checksum matches.
func wellFormed(t string) bool {
	if len(t) == sessionLength {
		for i := 0; i < len(t); i++ {
			if c := t[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
		return true
	}
	return validPAT(t)
}

// validPAT reports whether t has a personal access token's form and its
// checksum matches.
func validPAT(t string) bool {
	if len(t) != patLength || !strings.HasPrefix(t, patPrefix) {
		return false
	}
	rest := t[len(patPrefix):]
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(base62, rest[i]) < 0 {
			return false
		}
	}
	sum := crc32.ChecksumIEEE([]byte(rest[:patRandom]))
	for i := patLength - 1; i >= patLength-patChecksum; i-- {
		if t[i] != base62[sum%62] {
			return false
		}
		sum /= 62
	}
	return true
}
