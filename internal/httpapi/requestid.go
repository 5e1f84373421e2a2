package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync/atomic"
)

// maxRequestIDLen bounds an incoming X-Request-Id (API.md: 1–128 characters).
const maxRequestIDLen = 128

// validRequestID reports whether id may be kept as it came: 1–128
// characters of A-Z a-z 0-9 . _ -.
func validRequestID(id string) bool {
	return asciiWord(id, maxRequestIDLen, "._-")
}

// asciiWord reports whether s is 1 to maxLen bytes of ASCII letters,
// digits and the bytes in extra.
func asciiWord(s string, maxLen int, extra string) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte(extra, c) >= 0:
		default:
			return false
		}
	}
	return true
}

// requestIDs generates request ids: a random per-process prefix and a
// counter, unique without a crypto/rand read per request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:])
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (g *requestIDs) next() string {
	var buf [40]byte // prefix (13) + a uint64 (at most 20): built on the stack, one allocation for the string
	return string(strconv.AppendUint(append(buf[:0], g.prefix...), g.n.Add(1), 10))
}
