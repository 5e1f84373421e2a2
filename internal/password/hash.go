package password

import (
	"bytes"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
	"runtime"
	"strings"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/crypto/scrypt"
)

// The password-hash schemes a users file may hold (API.md, Passwords). The
// Django forms are checked exactly as Django 4.2 checks them, so an imported
// user logs in with the password Django accepted and with no other.
const (
	SchemeBcrypt        = "bcrypt"         // $2a$, $2b$, $2y$
	SchemeArgon2id      = "argon2id"       // PHC $argon2id$v=19$…
	SchemePBKDF2        = "pbkdf2_sha256"  // Django's PBKDF2PasswordHasher
	SchemePBKDF2SHA1    = "pbkdf2_sha1"    // Django's PBKDF2SHA1PasswordHasher
	SchemeDjangoArgon2  = "django_argon2"  // Django's Argon2PasswordHasher: argon2$ + PHC argon2id
	SchemeDjangoArgon2i = "django_argon2i" // its older variant: argon2$ + PHC argon2i
	SchemeScrypt        = "scrypt"         // Django 4's ScryptPasswordHasher
	SchemeBcryptSHA256  = "bcrypt_sha256"  // Django's BCryptSHA256PasswordHasher
	SchemeDjangoBcrypt  = "django_bcrypt"  // Django's BCryptPasswordHasher: bcrypt$ + bcrypt
	SchemeUnusable      = "unusable"       // Django's "!…" or "": never matches

	// Django's legacy fast forms are never stored as they are: the importer
	// wraps each in a policy hash (bcrypt or argon2id) of its hex digest, as
	// Django's PBKDF2WrappedSHA1PasswordHasher does ("Password upgrading
	// without requiring a login"), written <scheme>$<salt>$<policy hash>,
	// the salt empty for the unsalted forms (DjangoLegacy.Wrap). A check
	// computes Django's digest of the password and checks it against the
	// policy hash.
	SchemeWrappedSHA1         = "wrapped_sha1"          // SHA1PasswordHasher: hex SHA-1 of salt+password
	SchemeWrappedMD5          = "wrapped_md5"           // MD5PasswordHasher: hex MD5 of salt+password
	SchemeWrappedUnsaltedSHA1 = "wrapped_unsalted_sha1" // UnsaltedSHA1PasswordHasher: hex SHA-1 of password
	SchemeWrappedUnsaltedMD5  = "wrapped_unsalted_md5"  // UnsaltedMD5PasswordHasher: hex MD5 of password
)

// Bounds on stored hashes. A hash beyond them is refused at load rather than
// allowed to make every login slow: a failed login is made as slow as the
// slowest hash in the directory (API.md), so one absurd hash would slow them
// all, and an argon2 check holds its memory for as long as it runs.
const (
	MinBcryptCost = bcrypt.MinCost
	// DefaultBcryptCost is the cost of new bcrypt hashes unless --cost
	// says otherwise: about 230 ms a check on one core (x/crypto v0.58.0).
	DefaultBcryptCost = 12
	// MaxBcryptCost: cost 12 takes about 230 ms here and each step
	// doubles, so 14 is about 0.9 s a check: every scheme's
	// ceiling is about a second of work, since every failed login waits
	// as long as a check against the slowest hash in the directory.
	MaxBcryptCost = 14
	// BcryptKeyBytes is how much of a password bcrypt reads; the rest is ignored.
	BcryptKeyBytes = 72

	// 256 MiB: 2.5 times Django's 100 MiB default, already more than a
	// small instance should give one login.
	maxArgon2MemoryKiB = 256 << 10
	maxArgon2Time      = 16
	maxArgon2Threads   = 16
	// maxArgon2Work bounds memory × passes, in KiB: 1,280 MiB-passes is
	// about a second on one core (0.8 µs a KiB a pass), whatever the lanes
	// (a check may get only one core under load). Django's default (100 MiB,
	// t=2) is 200 MiB-passes.
	maxArgon2Work = 1280 << 10
	// Argon2 itself (RFC 9106) wants salts of at least 8 bytes; 64 bytes
	// covers every library's choice (Django's is 22, ours 16).
	minArgon2SaltLen = 8
	maxArgon2SaltLen = 64
	// Django writes 16-byte digests, most libraries 32.
	minArgon2KeyLen = 16
	maxArgon2KeyLen = 64

	// Django has never used fewer than 10,000 iterations, and uses 1,000,000
	// since 5.2; 4.5 million is about a second (0.21 µs an iteration).
	minPBKDF2Iterations = 1000
	maxPBKDF2Iterations = 4_500_000
	// Django's salts are 12 to 22 characters, and its password column
	// holds 128 characters in all.
	maxPBKDF2SaltLen = 128
	pbkdf2KeyLen     = sha256.Size // Django's dklen: the digest size
	// PBKDF2-SHA1 is slower here than PBKDF2-SHA256 (0.245 µs an iteration
	// against 0.21): 4 million iterations are about a second. Django's
	// default is the same count as for SHA-256 (600,000 in 4.2).
	maxPBKDF2SHA1Iterations = 4_000_000
	pbkdf2SHA1KeyLen        = sha1.Size

	// Django's scrypt calls hashlib.scrypt with maxmem=0, which leaves
	// OpenSSL's limit of 32 MiB for 128·r·(N+2) + 128·r·p bytes: Django's
	// default (N=2^14, r=8) takes 16 MiB, and a hash beyond the limit
	// raises in Django and never matches, so it is refused at load.
	scryptMaxMemory = 32 << 20
	// maxScryptWork bounds N·r·p, what a check's time grows with: 0.28 µs
	// a unit here, so 3.5 million (27 times Django's default 2^14·8·1) are
	// about a second.
	maxScryptWork = 3_500_000
	scryptKeyLen  = 64 // Django's dklen

	// A Django salt is never empty and holds no '$' (Django refuses to
	// encode with one); the column holds 128 characters in all.
	maxDjangoSaltLen = maxPBKDF2SaltLen
)

// New argon2id hashes get a 16-byte salt and a 32-byte digest (RFC 9106's
// recommendation).
const (
	policyArgon2SaltLen = 16
	policyArgon2KeyLen  = 32
)

// bcryptEncoding is bcrypt's own base64 alphabet. Strict: the C bcrypt that
// Django calls re-encodes the salt it decoded, so a salt with stray trailing
// bits never matches there, while x/crypto's compare would accept it.
var bcryptEncoding = base64.NewEncoding("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789").
	WithPadding(base64.NoPadding).Strict()

// argon2Encoding is PHC's base64: standard alphabet, no padding, and, as the
// argon2 reference decoder that argon2-cffi (so Django) uses, no stray bits.
var argon2Encoding = base64.RawStdEncoding.Strict()

// A Hash is a parsed, validated password hash: its scheme, its
// parameters, its salt and its digest. It is never changed once parsed, so
// it may be shared between goroutines.
type Hash struct {
	kind string // one of the scheme* constants

	// bcrypt, bcrypt_sha256, django_bcrypt
	bcrypt []byte // the $2?$ hash itself, what x/crypto compares against
	Cost   int

	// argon2id, django_argon2, django_argon2i
	MemoryKiB, Time uint32
	Threads         uint8

	// pbkdf2_sha256, pbkdf2_sha1
	Iterations int

	// scrypt: N (the work factor), r (the block size), p (the parallelism)
	ScryptN, ScryptR, ScryptP int

	// argon2: the decoded salt and digest. pbkdf2, scrypt: the salt's
	// literal bytes (Django does not decode it) and the digest's base64
	// text (Django compares the text).
	salt, digest []byte

	// The wrapped legacy forms: the scheme of the policy hash inside
	// (bcrypt or argon2id, whose fields above it fills) and the legacy
	// salt, empty for the unsalted forms.
	inner      string
	legacySalt []byte
}

// ParseHash parses and validates a stored password hash. Its errors
// name the problem and at most the scheme, never the hash: a plain-text
// password mistakenly stored as a hash must not reach a log.
func ParseHash(s string) (*Hash, error) {
	switch {
	case s == "" || strings.HasPrefix(s, "!"):
		return &Hash{kind: SchemeUnusable}, nil
	case strings.HasPrefix(s, "$2a$"), strings.HasPrefix(s, "$2b$"), strings.HasPrefix(s, "$2y$"):
		return parseBcrypt(SchemeBcrypt, s)
	case strings.HasPrefix(s, "$argon2id$"):
		return parseArgon2(SchemeArgon2id, s)
	case strings.HasPrefix(s, "pbkdf2_sha256$"):
		return parsePBKDF2(SchemePBKDF2, s)
	case strings.HasPrefix(s, "pbkdf2_sha1$"):
		return parsePBKDF2(SchemePBKDF2SHA1, s)
	case strings.HasPrefix(s, "argon2$"):
		// Django hands "$" + the rest to argon2-cffi, which takes the
		// variant from it: argon2id now, argon2i in older Djangos.
		rest := strings.TrimPrefix(s, "argon2")
		switch {
		case strings.HasPrefix(rest, "$argon2id$"):
			return parseArgon2(SchemeDjangoArgon2, rest)
		case strings.HasPrefix(rest, "$argon2i$"):
			return parseArgon2(SchemeDjangoArgon2i, rest)
		}
		return nil, errors.New("Django argon2 hash: only argon2id and argon2i are supported (Django never wrote another), not " + argon2Variant(rest))
	case strings.HasPrefix(s, "scrypt$"):
		return parseScrypt(s)
	case strings.HasPrefix(s, "wrapped_"):
		return parseWrapped(s)
	case strings.HasPrefix(s, "bcrypt_sha256$"):
		return parseBcrypt(SchemeBcryptSHA256, strings.TrimPrefix(s, "bcrypt_sha256$"))
	case strings.HasPrefix(s, "bcrypt$"):
		return parseBcrypt(SchemeDjangoBcrypt, strings.TrimPrefix(s, "bcrypt$"))
	}
	return nil, unsupportedHash(s)
}

// Scheme returns the hash's scheme: one of the Scheme constants ("bcrypt",
// "argon2id", "pbkdf2_sha256", "pbkdf2_sha1", "django_argon2",
// "django_argon2i", "scrypt", "bcrypt_sha256", "django_bcrypt", the four
// "wrapped_…" forms, "unusable").
func (h *Hash) Scheme() string { return h.kind }

// Unusable returns a hash no password matches.
func Unusable() *Hash { return &Hash{kind: SchemeUnusable} }

// Shape names h's scheme and parameters, what decides how long a check takes.
func (h *Hash) Shape() string {
	s := fmt.Sprintf("%s cost=%d m=%d t=%d p=%d i=%d", h.kind, h.Cost, h.MemoryKiB, h.Time, h.Threads, h.Iterations)
	switch {
	case h.kind == SchemeScrypt:
		s += fmt.Sprintf(" N=%d r=%d p=%d", h.ScryptN, h.ScryptR, h.ScryptP)
	case h.inner != "":
		s += " in " + h.inner
	}
	return s
}

// Usable reports whether any password can match the hash.
func (h *Hash) Usable() bool { return h.kind != SchemeUnusable }

// Verify reports whether password matches the hash, as the hash's origin
// would decide it. Digests are compared in constant time; what is not
// constant is the time a scheme takes, which the caller pads (work).
func (h *Hash) Verify(password []byte) bool {
	switch h.kind {
	case SchemeBcrypt:
		// x/crypto v0.58.0 would match on the first 72 bytes alone:
		// CompareHashAndPassword truncates where GenerateFromPassword refuses.
		if len(password) > BcryptKeyBytes {
			return false
		}
		return bcrypt.CompareHashAndPassword(h.bcrypt, password) == nil
	case SchemeDjangoBcrypt:
		// Django's bcrypt$ reads only the first 72 bytes (API.md), as its
		// python-bcrypt does; that library refuses a NUL byte anywhere,
		// and Django then fails the request: never a match.
		if bytes.IndexByte(password, 0) >= 0 {
			return false
		}
		return bcrypt.CompareHashAndPassword(h.bcrypt, password[:min(len(password), BcryptKeyBytes)]) == nil
	case SchemeBcryptSHA256:
		return bcrypt.CompareHashAndPassword(h.bcrypt, djangoSHA256Hex(password)) == nil
	case SchemeArgon2id, SchemeDjangoArgon2:
		sum := argon2.IDKey(password, h.salt, h.Time, h.MemoryKiB, h.Threads, uint32(len(h.digest)))
		return subtle.ConstantTimeCompare(sum, h.digest) == 1
	case SchemeDjangoArgon2i:
		sum := argon2.Key(password, h.salt, h.Time, h.MemoryKiB, h.Threads, uint32(len(h.digest)))
		return subtle.ConstantTimeCompare(sum, h.digest) == 1
	case SchemePBKDF2, SchemePBKDF2SHA1:
		_, keyLen := pbkdf2Bounds(h.kind)
		sum, err := pbkdf2.Key(pbkdf2Hash(h.kind), string(password), h.salt, h.Iterations, keyLen)
		if err != nil {
			return false
		}
		return subtle.ConstantTimeCompare(base64.StdEncoding.AppendEncode(nil, sum), h.digest) == 1
	case SchemeScrypt:
		sum, err := scrypt.Key(password, h.salt, h.ScryptN, h.ScryptR, h.ScryptP, scryptKeyLen)
		if err != nil {
			return false
		}
		return subtle.ConstantTimeCompare(base64.StdEncoding.AppendEncode(nil, sum), h.digest) == 1
	case SchemeWrappedSHA1, SchemeWrappedMD5, SchemeWrappedUnsaltedSHA1, SchemeWrappedUnsaltedMD5:
		digest := legacyDigest(h.kind, h.legacySalt, password)
		switch h.inner {
		case SchemeBcrypt: // 32 or 40 hex digits: within bcrypt's 72 bytes
			return bcrypt.CompareHashAndPassword(h.bcrypt, digest) == nil
		case SchemeArgon2id:
			sum := argon2.IDKey(digest, h.salt, h.Time, h.MemoryKiB, h.Threads, uint32(len(h.digest)))
			return subtle.ConstantTimeCompare(sum, h.digest) == 1
		}
	}
	return false
}

// legacyDigest is what Django's legacy fast hasher of a wrapped scheme
// writes for password: the lower-case hex SHA-1 or MD5 of salt + password
// (the unsalted forms: of the password alone).
func legacyDigest(kind string, salt, password []byte) []byte {
	var h hash.Hash
	switch kind {
	case SchemeWrappedSHA1, SchemeWrappedUnsaltedSHA1:
		h = sha1.New()
	default:
		h = md5.New()
	}
	h.Write(salt)
	h.Write(password)
	return hex.AppendEncode(nil, h.Sum(nil))
}

// djangoSHA256Hex is what Django's bcrypt_sha256 gives bcrypt: the lowercase
// hex SHA-256 of the password, 64 bytes, so no password is truncated.
func djangoSHA256Hex(password []byte) []byte {
	sum := sha256.Sum256(password)
	return hex.AppendEncode(nil, sum[:])
}

// Calibration of work, from one-goroutine timings on a 2-vCPU machine
// (x/crypto v0.58.0, measured 2026-11-23): bcrypt cost 12 229 ms; argon2id m=19 MiB t=2 26.5 ms, m=46 MiB
// t=1 44.3 ms, m=64 MiB t=3 164 ms, about 0.8 µs per KiB per pass. PBKDF2
// (crypto/pbkdf2) at Django's 260,000 iterations took 0.95 times a bcrypt
// cost-10 compare, side by side on this machine: about 54 ms.
//
// The schemes Django 4 brought, timed the same way with crypto/pbkdf2 and
// x/crypto's argon2 and scrypt: PBKDF2-SHA1 at 600,000 iterations 147 ms
// (0.245 µs an iteration); argon2i as argon2id; scrypt 0.28 µs per unit of
// N·r·p (Django's N=2^14, r=8, p=1 36 ms, p=4 132 ms, p=32 1.19 s; N=2^15,
// r=2, p=32 0.61 s).
const (
	bcryptCost12Seconds           = 0.229
	argon2SecondsPerKiBPass       = 0.8e-6
	pbkdf2SecondsPerIteration     = 0.21e-6
	pbkdf2SHA1SecondsPerIteration = 0.245e-6
	scryptSecondsPerUnit          = 0.28e-6
)

// Work estimates how many seconds verify takes, so that the slowest hash in
// a directory can be found and a failed login made as slow as it. bcrypt
// doubles with each cost step; argon2 grows with memory × passes, its lanes
// running in parallel on up to GOMAXPROCS cores (Django's p=8 runs about
// twice as fast on two cores); PBKDF2 grows with its iterations; scrypt
// with N·r·p, its p blocks one after another. A wrapped legacy form costs
// what the policy hash inside it does (the legacy digest is a microsecond).
// An unusable hash does no work.
func (h *Hash) Work() float64 {
	switch h.costKind() {
	case SchemeBcrypt, SchemeBcryptSHA256, SchemeDjangoBcrypt:
		return bcryptCost12Seconds * math.Exp2(float64(h.Cost-12))
	case SchemeArgon2id, SchemeDjangoArgon2, SchemeDjangoArgon2i:
		lanes := min(int(h.Threads), runtime.GOMAXPROCS(0))
		return argon2SecondsPerKiBPass * float64(h.MemoryKiB) * float64(h.Time) / float64(lanes)
	case SchemePBKDF2:
		return pbkdf2SecondsPerIteration * float64(h.Iterations)
	case SchemePBKDF2SHA1:
		return pbkdf2SHA1SecondsPerIteration * float64(h.Iterations)
	case SchemeScrypt:
		return scryptSecondsPerUnit * float64(h.ScryptN) * float64(h.ScryptR) * float64(h.ScryptP)
	}
	return 0
}

// costKind is the scheme whose parameters h's cost hangs on: the policy
// hash inside a wrapped form, else h's own.
func (h *Hash) costKind() string {
	if h.inner != "" {
		return h.inner
	}
	return h.kind
}
