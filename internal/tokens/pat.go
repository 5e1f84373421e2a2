package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"hash/crc32"
)

// Personal access tokens (API.md, "Personal access tokens"): PATPrefix,
// patRandom characters of base62 from crypto/rand, and patChecksum
// characters of base62 of the CRC-32 (IEEE) of those random characters.
// GitHub's format: a secret scanner finds a leaked token by its prefix and
// tells it from noise by its checksum, and a server refuses a mistyped or
// made-up one before any store or directory is read.
const (
	PATPrefix   = "authsvc_pat_"
	patRandom   = 30 // 30 × log2(62) ≈ 178.6 bits
	patChecksum = 6  // 62^6 > 2^32
	// PATLength is the length of every personal access token.
	PATLength = len(PATPrefix) + patRandom + patChecksum
	// PATShownPrefix is how many characters of a token its listing shows
	// (the prefix and 4 random characters), for recognising it.
	PATShownPrefix = len(PATPrefix) + 4
)

// base62 is the alphabet of personal access tokens, in the order of
// their numbers: 0-9, A-Z, a-z.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// A Kind is what sort of token a credential is.
type Kind uint8

const (
	// KindSession: a login's token, 40 lowercase hex characters.
	KindSession Kind = iota + 1
	// KindPAT: a personal access token (PATPrefix…).
	KindPAT
)

// String returns the kind as API.md's introspection names it
// ("session", "pat").
func (k Kind) String() string {
	switch k {
	case KindSession:
		return "session"
	case KindPAT:
		return "pat"
	}
	return "unknown"
}

// NewPAT returns a fresh personal access token and its digest.
func NewPAT() (string, Digest) {
	var b [PATLength]byte
	copy(b[:], PATPrefix)
	random := b[len(PATPrefix) : len(PATPrefix)+patRandom]
	// Rejection sampling: a byte below 248 (4 × 62) maps to one of the 62
	// characters with equal chance; the rest are drawn again.
	var pool [64]byte
	for n := 0; n < patRandom; {
		rand.Read(pool[:]) // never returns an error; crashes the program if the OS cannot supply randomness
		for _, c := range pool {
			if c < 248 && n < patRandom {
				random[n] = base62[c%62]
				n++
			}
		}
	}
	putChecksum(b[len(PATPrefix)+patRandom:], random)
	t := string(b[:])
	return t, sha256.Sum256(b[:])
}

// putChecksum writes the CRC-32 of random into dst as a big-endian base62
// number, left-padded with '0'.
func putChecksum[T ~string | ~[]byte](dst []byte, random T) {
	sum := crcIEEE(random)
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = base62[sum%62]
		sum /= 62
	}
}

// crcIEEE is crc32.ChecksumIEEE over a string or bytes, by the table:
// the package's function takes a slice that escapes through its
// dispatch, which would cost every token check an allocation.
func crcIEEE[T ~string | ~[]byte](b T) uint32 {
	crc := ^uint32(0)
	for i := 0; i < len(b); i++ {
		crc = crc32.IEEETable[byte(crc)^b[i]] ^ crc>>8
	}
	return ^crc
}

// PATDigestOf returns the digest of t, or ErrBadToken unless t is a
// personal access token whose checksum matches: a made-up or mistyped
// token costs no lookup.
func PATDigestOf(t string) (Digest, error) {
	if !ValidPAT(t) {
		return Digest{}, ErrBadToken
	}
	var b [PATLength]byte // on the stack: []byte(t) would be on the heap
	copy(b[:], t)
	return sha256.Sum256(b[:]), nil
}

// ValidPAT reports whether t has a personal access token's form and its
// checksum matches.
func ValidPAT(t string) bool {
	if len(t) != PATLength || t[:len(PATPrefix)] != PATPrefix {
		return false
	}
	rest := t[len(PATPrefix):]
	for i := 0; i < len(rest); i++ {
		if !isBase62(rest[i]) {
			return false
		}
	}
	var want [patChecksum]byte
	putChecksum(want[:], rest[:patRandom])
	return string(want[:]) == rest[patRandom:]
}

func isBase62(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z'
}
