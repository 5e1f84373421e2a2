package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
)

// tokenBytes is the entropy of a token; its hex form is Length characters.
const (
	tokenBytes = 20
	Length     = 2 * tokenBytes
)

// A Digest is the SHA-256 of a token's raw bytes: the only form in
// which a token is ever stored.
type Digest [sha256.Size]byte

// Errors of ParseAuthorization, mapped to 401 not_authenticated and 401
// invalid_token.
var (
	ErrNoCredentials = errors.New("no token credentials")
	ErrBadToken      = errors.New("malformed token")
)

// New returns a fresh token (Length lowercase hex characters from
// crypto/rand) and its digest.
func New() (string, Digest) {
	var raw [tokenBytes]byte
	rand.Read(raw[:]) // never returns an error; crashes the program if the OS cannot supply randomness
	return hex.EncodeToString(raw[:]), sha256.Sum256(raw[:])
}

// ParseAuthorization extracts the token digest and kind from the
// request's authorization header, as API.md's "GET /api/auth/info"
// describes: scheme Token or Bearer (any case), one or more spaces or
// tabs, exactly one token: a session (Length lowercase hex characters) or
// a personal access token whose checksum matches (ValidPAT). It returns
// ErrNoCredentials when no header or another scheme is present, and
// ErrBadToken for everything else that is wrong. It touches no store.
func ParseAuthorization(h http.Header) (Digest, Kind, error) {
	values := h["Authorization"]
	switch {
	case len(values) == 0:
		return Digest{}, 0, ErrNoCredentials
	case len(values) > 1:
		return Digest{}, 0, ErrBadToken
	}
	return ParseCredentials(values[0])
}

// ParseCredentials parses one authorization header value.
func ParseCredentials(v string) (Digest, Kind, error) {
	i := 0
	for i < len(v) && v[i] != ' ' && v[i] != '\t' {
		i++
	}
	if !isTokenScheme(v[:i]) {
		return Digest{}, 0, ErrNoCredentials
	}
	for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	return ParseToken(v[i:])
}

// ParseToken returns the digest and kind of token, a session's or a
// personal access token, or ErrBadToken when it is neither.
func ParseToken(token string) (Digest, Kind, error) {
	if len(token) == Length {
		d, err := DigestOf(token)
		return d, KindSession, err
	}
	d, err := PATDigestOf(token)
	return d, KindPAT, err
}

// isTokenScheme reports whether scheme is "Token" or "Bearer", in any case.
func isTokenScheme(scheme string) bool {
	return asciiEqualFold(scheme, "token") || asciiEqualFold(scheme, "bearer")
}

// asciiEqualFold reports whether s equals the lowercase ASCII word lower,
// ignoring ASCII case; unlike strings.EqualFold it folds no Unicode, so
// "toKen" with a Kelvin sign is not a scheme.
func asciiEqualFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// DigestOf returns the digest of token, or ErrBadToken unless token is
// exactly Length lowercase hex characters.
func DigestOf(token string) (Digest, error) {
	if len(token) != Length {
		return Digest{}, ErrBadToken
	}
	var raw [tokenBytes]byte
	for i := 0; i < tokenBytes; i++ {
		hi, ok1 := fromHexLower(token[2*i])
		lo, ok2 := fromHexLower(token[2*i+1])
		if !ok1 || !ok2 {
			return Digest{}, ErrBadToken
		}
		raw[i] = hi<<4 | lo
	}
	return sha256.Sum256(raw[:]), nil
}

func fromHexLower(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
