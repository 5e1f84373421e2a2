package password

import (
	"bytes"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
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
	"strconv"
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

// parseBcrypt parses b, a $2a$, $2b$ or $2y$ hash, as scheme kind. It must be
// exactly what bcrypt writes (60 characters, two-digit cost, canonical
// base64): Django compares the whole string it recomputes, so any other
// spelling would never match there.
func parseBcrypt(kind, b string) (*Hash, error) {
	name := schemeLabel(kind)
	if len(b) != 60 || b[0] != '$' || b[1] != '2' || !strings.ContainsRune("aby", rune(b[2])) || b[3] != '$' ||
		!isDigit(b[4]) || !isDigit(b[5]) || b[6] != '$' {
		return nil, fmt.Errorf("%s: malformed (want $2a$, $2b$ or $2y$, a two-digit cost and 53 characters)", name)
	}
	salt, err := decodeBase64(bcryptEncoding, b[7:29])
	if err != nil || len(salt) != 16 {
		return nil, fmt.Errorf("%s: malformed salt", name)
	}
	if sum, err := decodeBase64(bcryptEncoding, b[29:]); err != nil || len(sum) != 23 {
		return nil, fmt.Errorf("%s: malformed digest", name)
	}
	cost := int(b[4]-'0')*10 + int(b[5]-'0')
	if err := checkBcryptCost(cost); err != nil {
		return nil, djangoLabel(kind, err)
	}
	return &Hash{kind: kind, bcrypt: []byte(b), Cost: cost}, nil
}

// checkBcryptCost returns why cost is out of range, or nil.
func checkBcryptCost(cost int) error {
	switch {
	case cost < MinBcryptCost:
		return fmt.Errorf("bcrypt cost %d is below the minimum %d", cost, MinBcryptCost)
	case cost > MaxBcryptCost:
		return fmt.Errorf("bcrypt cost %d is above the maximum %d", cost, MaxBcryptCost)
	}
	return nil
}

// parseArgon2 parses phc, a PHC-form argon2 hash, as scheme kind: argon2id,
// or argon2i for Django's older form. The syntax is the argon2 reference
// decoder's, which argon2-cffi (so Django) uses: fields in this order,
// decimals without leading zeros, base64 without padding. Only version 19 is
// accepted: x/crypto implements no other, and Django has never written
// another (it needed argon2-cffi 16.1, which writes v=19).
func parseArgon2(kind, phc string) (*Hash, error) {
	name := schemeLabel(kind)
	variant := "argon2id"
	if kind == SchemeDjangoArgon2i {
		variant = "argon2i"
	}
	var f [6]string
	if !splitExactly(phc, '$', f[:]) || f[0] != "" || f[1] != variant {
		if splitExactly(phc, '$', f[:5]) && strings.HasPrefix(f[2], "m=") {
			return nil, fmt.Errorf("%s: malformed: no version field, which is argon2 1.0 (v=16); only v=19 is supported", name)
		}
		return nil, fmt.Errorf("%s: malformed (want $%s$v=19$m=…,t=…,p=…$salt$digest)", name, variant)
	}
	if f[2] != "v=19" {
		return nil, fmt.Errorf("%s: want version v=19", name)
	}
	m, t, p, ok := parseArgon2Params(f[3])
	if !ok {
		return nil, fmt.Errorf("%s: malformed parameters (want m=…,t=…,p=…)", name)
	}
	if err := checkArgon2Params(m, t, p); err != nil {
		return nil, djangoLabel(kind, err)
	}
	salt, err := decodeBase64(argon2Encoding, f[4])
	if err != nil {
		return nil, fmt.Errorf("%s: salt is not unpadded base64", name)
	}
	if len(salt) < minArgon2SaltLen || len(salt) > maxArgon2SaltLen {
		return nil, fmt.Errorf("%s: salt is %d bytes, want %d to %d", name, len(salt), minArgon2SaltLen, maxArgon2SaltLen)
	}
	sum, err := decodeBase64(argon2Encoding, f[5])
	if err != nil {
		return nil, fmt.Errorf("%s: digest is not unpadded base64", name)
	}
	if len(sum) < minArgon2KeyLen || len(sum) > maxArgon2KeyLen {
		return nil, fmt.Errorf("%s: digest is %d bytes, want %d to %d", name, len(sum), minArgon2KeyLen, maxArgon2KeyLen)
	}
	return &Hash{kind: kind, MemoryKiB: m, Time: t, Threads: uint8(p), salt: salt, digest: sum}, nil
}

// splitExactly splits s around each sep into f, and reports whether there
// were exactly len(f) fields: strings.Split's len(...) == len(f), without
// its allocation (a load checks a million hashes).
func splitExactly(s string, sep byte, f []string) bool {
	for i := range len(f) - 1 {
		j := strings.IndexByte(s, sep)
		if j < 0 {
			return false
		}
		f[i], s = s[:j], s[j+1:]
	}
	f[len(f)-1] = s
	return strings.IndexByte(s, sep) < 0
}

// parseArgon2Params parses "m=M,t=T,p=P".
func parseArgon2Params(s string) (m, t, p uint32, ok bool) {
	ms, rest, ok1 := strings.Cut(s, ",")
	ts, ps, ok2 := strings.Cut(rest, ",")
	ms, ok3 := strings.CutPrefix(ms, "m=")
	ts, ok4 := strings.CutPrefix(ts, "t=")
	ps, ok5 := strings.CutPrefix(ps, "p=")
	m, ok6 := parseDecimal(ms)
	t, ok7 := parseDecimal(ts)
	p, ok8 := parseDecimal(ps)
	return m, t, p, ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8
}

// checkArgon2Params returns why memory (KiB), time and threads are out of
// range, or nil.
func checkArgon2Params(m, t, p uint32) error {
	switch {
	case p < 1:
		return errors.New("argon2 parallelism p=0 is below the minimum 1")
	case p > maxArgon2Threads:
		return fmt.Errorf("argon2 parallelism p=%d is above the maximum %d", p, maxArgon2Threads)
	case t < 1:
		return errors.New("argon2 time t=0 is below the minimum 1")
	case t > maxArgon2Time:
		return fmt.Errorf("argon2 time t=%d is above the maximum %d", t, maxArgon2Time)
	case m < 8*p: // argon2 needs 8 KiB (two blocks per sync point) a lane
		return fmt.Errorf("argon2 memory m=%d KiB is below the minimum 8×p = %d", m, 8*p)
	case m > maxArgon2MemoryKiB:
		return fmt.Errorf("argon2 memory m=%d KiB is above the maximum %d", m, maxArgon2MemoryKiB)
	case uint64(m)*uint64(t) > maxArgon2Work:
		return fmt.Errorf("argon2 memory × time m×t=%d KiB is above the maximum %d (about a second a check)", uint64(m)*uint64(t), maxArgon2Work)
	}
	return nil
}

// parsePBKDF2 parses Django's pbkdf2_sha256$<iterations>$<salt>$<digest>,
// or pbkdf2_sha1$… as kind says. Django recomputes the whole string and
// compares, so the iterations must be written as %d writes them and the
// digest as standard padded base64 of the hash's size: any other spelling
// would never match there.
func parsePBKDF2(kind, s string) (*Hash, error) {
	name := schemeLabel(kind)
	maxIterations, keyLen := pbkdf2Bounds(kind)
	f := strings.Split(s, "$")
	if len(f) != 4 {
		return nil, fmt.Errorf("%s: malformed (want %s$iterations$salt$digest)", name, kind)
	}
	n, ok := parseDecimal(f[1])
	if !ok {
		return nil, errors.New(name + ": iterations are not a decimal number")
	}
	switch {
	case n < minPBKDF2Iterations:
		return nil, fmt.Errorf("%s: %d iterations are below the minimum %d", name, n, minPBKDF2Iterations)
	case n > uint32(maxIterations):
		return nil, fmt.Errorf("%s: %d iterations are above the maximum %d", name, n, maxIterations)
	case f[2] == "" || len(f[2]) > maxPBKDF2SaltLen:
		return nil, fmt.Errorf("%s: salt is %d bytes, want 1 to %d", name, len(f[2]), maxPBKDF2SaltLen)
	}
	if sum, err := decodeBase64(base64.StdEncoding.Strict(), f[3]); err != nil || len(sum) != keyLen {
		return nil, fmt.Errorf("%s: digest is not the base64 of %d bytes", name, keyLen)
	}
	return &Hash{kind: kind, Iterations: int(n), salt: []byte(f[2]), digest: []byte(f[3])}, nil
}

// pbkdf2Bounds returns the most iterations and the digest size of a PBKDF2
// scheme.
func pbkdf2Bounds(kind string) (maxIterations, keyLen int) {
	if kind == SchemePBKDF2SHA1 {
		return maxPBKDF2SHA1Iterations, pbkdf2SHA1KeyLen
	}
	return maxPBKDF2Iterations, pbkdf2KeyLen
}

// pbkdf2Hash returns the hash function of a PBKDF2 scheme.
func pbkdf2Hash(kind string) func() hash.Hash {
	if kind == SchemePBKDF2SHA1 {
		return sha1.New
	}
	return sha256.New
}

// parseScrypt parses Django's scrypt$<N>$<salt>$<r>$<p>$<digest>. Django
// recomputes the whole string and compares, so the numbers must be written
// as %d writes them and the digest as standard padded base64 of 64 bytes.
// The parameters must be ones Django's hashlib.scrypt (OpenSSL) takes at
// all: N a power of 2 from 2, r and p from 1, within OpenSSL's 32 MiB.
func parseScrypt(s string) (*Hash, error) {
	const name = "Django scrypt hash"
	var f [6]string
	if !splitExactly(s, '$', f[:]) {
		return nil, fmt.Errorf("%s: malformed (want scrypt$N$salt$r$p$digest)", name)
	}
	n, ok1 := parseDecimal(f[1])
	r, ok2 := parseDecimal(f[3])
	p, ok3 := parseDecimal(f[4])
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("%s: N, r and p must be decimal numbers", name)
	}
	if err := checkScryptParams(uint64(n), uint64(r), uint64(p)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if f[2] == "" || len(f[2]) > maxDjangoSaltLen {
		return nil, fmt.Errorf("%s: salt is %d bytes, want 1 to %d", name, len(f[2]), maxDjangoSaltLen)
	}
	if sum, err := decodeBase64(base64.StdEncoding.Strict(), f[5]); err != nil || len(sum) != scryptKeyLen {
		return nil, fmt.Errorf("%s: digest is not the base64 of %d bytes", name, scryptKeyLen)
	}
	return &Hash{kind: SchemeScrypt, ScryptN: int(n), ScryptR: int(r), ScryptP: int(p), salt: []byte(f[2]), digest: []byte(f[5])}, nil
}

// checkScryptParams returns why N, r and p are out of range, or nil: what
// OpenSSL refuses (so Django never matches), and what costs more than
// about a second.
func checkScryptParams(n, r, p uint64) error {
	switch {
	case n < 2 || n&(n-1) != 0:
		return fmt.Errorf("scrypt N=%d is not a power of 2 from 2", n)
	case r < 1:
		return errors.New("scrypt r=0 is below the minimum 1")
	case p < 1:
		return errors.New("scrypt p=0 is below the minimum 1")
	case n > scryptMaxMemory || r > scryptMaxMemory || p > scryptMaxMemory:
		return errors.New("scrypt needs more than OpenSSL's 32 MiB, where Django raises")
	case 16*r < 64 && n >= 1<<(16*r): // RFC 7914: N < 2^(128·r/8)
		return fmt.Errorf("scrypt N=%d is not below 2^(16·r) = 2^%d", n, 16*r)
	}
	if mem := 128*r*(n+2) + 128*r*p; mem > scryptMaxMemory {
		return fmt.Errorf("scrypt needs %d bytes (128·r·(N+2) + 128·r·p), above OpenSSL's %d, where Django raises", mem, scryptMaxMemory)
	}
	if work := n * r * p; work > maxScryptWork {
		return fmt.Errorf("scrypt N·r·p=%d is above the maximum %d (about a second a check)", work, maxScryptWork)
	}
	return nil
}

// parseWrapped parses a wrapped legacy form: <scheme>$<salt>$<policy hash>,
// the salt empty for the unsalted forms, the policy hash a plain bcrypt or
// argon2id hash.
func parseWrapped(s string) (*Hash, error) {
	kind, rest, _ := strings.Cut(s, "$")
	name := schemeLabel(kind)
	salted, known := wrappedSalted(kind)
	if !known {
		return nil, errors.New("not a supported password hash: unknown wrapped form (want wrapped_sha1, wrapped_md5, wrapped_unsalted_sha1 or wrapped_unsalted_md5)")
	}
	salt, inner, ok := strings.Cut(rest, "$")
	switch {
	case !ok:
		return nil, fmt.Errorf("%s: malformed (want %s$salt$policy hash)", name, kind)
	case salted && (salt == "" || len(salt) > maxDjangoSaltLen):
		return nil, fmt.Errorf("%s: salt is %d bytes, want 1 to %d", name, len(salt), maxDjangoSaltLen)
	case !salted && salt != "":
		return nil, fmt.Errorf("%s: malformed (an unsalted form has an empty salt: %s$$policy hash)", name, kind)
	}
	var h *Hash
	var err error
	switch {
	case strings.HasPrefix(inner, "$2"):
		h, err = parseBcrypt(SchemeBcrypt, inner)
	case strings.HasPrefix(inner, "$argon2id$"):
		h, err = parseArgon2(SchemeArgon2id, inner)
	default:
		return nil, fmt.Errorf("%s: the wrapped hash is not bcrypt or argon2id", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	h.inner, h.kind, h.legacySalt = h.kind, kind, []byte(salt)
	return h, nil
}

// wrappedSalted reports whether a wrapped scheme carries a salt, and whether
// kind is a wrapped scheme at all.
func wrappedSalted(kind string) (salted, known bool) {
	switch kind {
	case SchemeWrappedSHA1, SchemeWrappedMD5:
		return true, true
	case SchemeWrappedUnsaltedSHA1, SchemeWrappedUnsaltedMD5:
		return false, true
	}
	return false, false
}

// decodeBase64 decodes s, refusing the line breaks Go's decoders skip and
// the decoders of Django's libraries do not.
func decodeBase64(enc *base64.Encoding, s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, errors.New("line break in base64")
	}
	return enc.DecodeString(s)
}

// parseDecimal parses an unsigned decimal without sign, spaces or leading
// zeros (the argon2 reference decoder's rule, and how Django writes numbers).
func parseDecimal(s string) (uint32, bool) {
	if s == "" || len(s) > 10 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := range len(s) {
		if !isDigit(s[i]) {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// djangoLabel prefixes err with the Django form it is about; a range error
// about a plain bcrypt or argon2id hash names its scheme already.
func djangoLabel(kind string, err error) error {
	if kind == SchemeBcrypt || kind == SchemeArgon2id {
		return err
	}
	return fmt.Errorf("%s: %w", schemeLabel(kind), err)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// schemeLabel names a scheme in error messages.
func schemeLabel(kind string) string {
	switch kind {
	case SchemePBKDF2, SchemePBKDF2SHA1, SchemeBcryptSHA256, SchemeScrypt:
		return "Django " + kind + " hash"
	case SchemeDjangoArgon2:
		return "Django argon2 hash"
	case SchemeDjangoArgon2i:
		return "Django argon2 (argon2i) hash"
	case SchemeDjangoBcrypt:
		return "Django bcrypt hash"
	case SchemeArgon2id: // constant: a load labels a million hashes
		return "argon2id hash"
	case SchemeBcrypt:
		return "bcrypt hash"
	}
	return kind + " hash"
}

// argon2Variant names the argon2 variant a PHC string declares, if it is one
// of the known ones.
func argon2Variant(phc string) string {
	for _, v := range []string{"argon2id", "argon2i", "argon2d"} {
		if strings.HasPrefix(phc, "$"+v+"$") {
			return v
		}
	}
	return "this form"
}

// importLegacy is why a bare legacy Django form is refused at load, and
// what to do instead.
const importLegacy = ": a fast hash, never stored as it is; import the Django dump with `authsvc user import --from django`, which wraps it in the hash policy"

// knownHashForms are hash forms that are recognised but not accepted, so the
// refusal can name them, with the reason when there is more to say than
// that authsvc does not implement them. Anything else is named by no part
// of itself: it may be a password pasted in by mistake.
var knownHashForms = []struct{ prefix, name string }{
	{"sha1$$", "Django unsalted_sha1 (UnsaltedSHA1PasswordHasher)" + importLegacy},
	{"md5$$", "Django unsalted_md5 (UnsaltedMD5PasswordHasher)" + importLegacy},
	{"sha1$", "Django sha1 (SHA1PasswordHasher)" + importLegacy},
	{"md5$", "Django md5 (MD5PasswordHasher)" + importLegacy},
	{"unsalted_sha1$", "Django unsalted_sha1 under its own name, which Django never matches (it writes sha1$$)"},
	{"unsalted_md5$", "Django unsalted_md5 under its own name, which Django never matches (it writes 32 hex digits)"},
	{"crypt$", "Django crypt (CryptPasswordHasher), refused: DES crypt(3) reads only the first 8 characters of a password; have the user set a new password in Django, then import again"},
	{"$argon2i$", "argon2i"},
	{"$argon2d$", "argon2d"},
	{"$scrypt$", "scrypt"},
	{"$pbkdf2", "PHC pbkdf2"},
	{"$2x$", "bcrypt $2x$"},
	{"$2$", "bcrypt $2$"},
	{"$1$", "md5-crypt"},
	{"$5$", "sha256-crypt"},
	{"$6$", "sha512-crypt"},
	{"$y$", "yescrypt"},
	{"$7$", "scrypt (crypt form)"},
}

// unsupportedHash returns why s, matching no accepted form, is refused.
func unsupportedHash(s string) error {
	for _, k := range knownHashForms {
		if strings.HasPrefix(s, k.prefix) {
			return fmt.Errorf("unsupported password hash scheme: %s", k.name)
		}
	}
	if len(s) == 32 && isLowerHex(s) {
		return errors.New("unsupported password hash scheme: Django unsalted_md5 (ancient Django)" + importLegacy)
	}
	return errors.New("not a supported password hash (bcrypt, argon2id, Django's pbkdf2_sha256, pbkdf2_sha1, argon2, bcrypt_sha256, bcrypt, scrypt, or a wrapped legacy Django form)")
}

// isLowerHex reports whether s is all lower-case hex digits, as Python's
// hexdigest writes them.
func isLowerHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
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

// A HashPolicy says how new hashes are made (API.md, Passwords): argon2id
// with its memory, time and threads, or bcrypt at a cost.
type HashPolicy struct {
	Scheme         string // "argon2id" or "bcrypt"
	BcryptCost     int
	ArgonMemoryKiB uint32
	ArgonTime      uint32
	ArgonThreads   uint8
}

// DefaultHashPolicy is argon2id at OWASP's minimum, m=19 MiB, t=2, p=1
// (about 27 ms a check on one core), with bcrypt's cost at API.md's default 12
// for when the scheme is switched to bcrypt.
func DefaultHashPolicy() HashPolicy {
	return HashPolicy{Scheme: SchemeArgon2id, BcryptCost: DefaultBcryptCost, ArgonMemoryKiB: 19 << 10, ArgonTime: 2, ArgonThreads: 1}
}

// Hash returns a new hash of password under the policy. Under bcrypt a
// password over 72 bytes is refused: bcrypt would ignore the rest. The
// parameters are held only to the parser's bounds, so that what hash makes
// always loads; API.md's floor (OWASP's m=19 MiB, t=2, p=1) is for the
// settings to enforce, and tests hash at less.
func (p HashPolicy) Hash(password []byte) (string, error) {
	switch p.Scheme {
	case SchemeArgon2id:
		if err := checkArgon2Params(p.ArgonMemoryKiB, p.ArgonTime, uint32(p.ArgonThreads)); err != nil {
			return "", fmt.Errorf("hash policy: %w", err)
		}
		salt := make([]byte, policyArgon2SaltLen)
		rand.Read(salt)
		sum := argon2.IDKey(password, salt, p.ArgonTime, p.ArgonMemoryKiB, p.ArgonThreads, policyArgon2KeyLen)
		return formatArgon2id(p.ArgonMemoryKiB, p.ArgonTime, p.ArgonThreads, salt, sum), nil
	case SchemeBcrypt:
		if err := checkBcryptCost(p.BcryptCost); err != nil {
			return "", fmt.Errorf("hash policy: %w", err)
		}
		if len(password) > BcryptKeyBytes {
			return "", fmt.Errorf("password is %d bytes; bcrypt reads only %d", len(password), BcryptKeyBytes)
		}
		b, err := bcrypt.GenerateFromPassword(password, p.BcryptCost)
		return string(b), err
	}
	return "", fmt.Errorf("hash policy: scheme %q, want argon2id or bcrypt", p.Scheme)
}

// formatArgon2id writes an argon2id hash in PHC form.
func formatArgon2id(m, t uint32, p uint8, salt, sum []byte) string {
	return formatArgon2("argon2id", m, t, p, salt, sum)
}

// formatArgon2 writes an argon2 hash of a variant (argon2id, argon2i) in PHC form.
func formatArgon2(variant string, m, t uint32, p uint8, salt, sum []byte) string {
	return fmt.Sprintf("$%s$v=19$m=%d,t=%d,p=%d$%s$%s", variant, m, t, p,
		argon2Encoding.EncodeToString(salt), argon2Encoding.EncodeToString(sum))
}

// NeedsRehash reports whether h should be replaced by a hash under the
// policy after a successful login: any other scheme (every Django form
// among them), or the policy's scheme with any parameter different, weaker
// or stronger, as Django's must_update decides. For argon2id the salt and
// digest lengths count as parameters.
func (p HashPolicy) NeedsRehash(h *Hash) bool {
	if h.kind != p.Scheme {
		return true
	}
	switch h.kind {
	case SchemeBcrypt:
		return h.Cost != p.BcryptCost
	case SchemeArgon2id:
		return h.MemoryKiB != p.ArgonMemoryKiB || h.Time != p.ArgonTime || h.Threads != p.ArgonThreads ||
			len(h.salt) != policyArgon2SaltLen || len(h.digest) != policyArgon2KeyLen
	}
	return true
}

// Dummy returns a hash of a random secret under the policy: what an unknown
// user's login is checked against when no stored hash is slower.
func (p HashPolicy) Dummy() (*Hash, error) {
	s, err := p.Hash(randomSecret())
	if err != nil {
		return nil, err
	}
	return ParseHash(s)
}

// DummyLike returns a hash of a random secret with exactly h's scheme and
// parameters (and salt and digest lengths), so that checking a password
// against it takes as long as against h: unknown users are checked against a
// copy of the slowest hash in the directory. An unusable hash has no cost to
// copy; for it DummyLike returns DefaultHashPolicy's dummy, and a caller with
// another policy should use that policy's dummy instead.
func DummyLike(h *Hash) (*Hash, error) {
	secret := randomSecret()
	var s string
	switch h.costKind() {
	case SchemeUnusable:
		return DefaultHashPolicy().Dummy()
	case SchemeBcrypt, SchemeDjangoBcrypt, SchemeBcryptSHA256:
		b, err := bcrypt.GenerateFromPassword(secret, h.Cost)
		if err != nil {
			return nil, err
		}
		s = string(b)
		switch h.kind {
		case SchemeDjangoBcrypt:
			s = "bcrypt$" + s
		case SchemeBcryptSHA256:
			s = "bcrypt_sha256$" + s
		}
	case SchemeArgon2id, SchemeDjangoArgon2, SchemeDjangoArgon2i:
		salt := make([]byte, len(h.salt))
		rand.Read(salt)
		if h.kind == SchemeDjangoArgon2i {
			sum := argon2.Key(secret, salt, h.Time, h.MemoryKiB, h.Threads, uint32(len(h.digest)))
			s = "argon2" + formatArgon2("argon2i", h.MemoryKiB, h.Time, h.Threads, salt, sum)
			break
		}
		sum := argon2.IDKey(secret, salt, h.Time, h.MemoryKiB, h.Threads, uint32(len(h.digest)))
		s = formatArgon2id(h.MemoryKiB, h.Time, h.Threads, salt, sum)
		if h.kind == SchemeDjangoArgon2 {
			s = "argon2" + s
		}
	case SchemePBKDF2, SchemePBKDF2SHA1:
		salt := randomDjangoSalt(len(h.salt))
		_, keyLen := pbkdf2Bounds(h.kind)
		sum, err := pbkdf2.Key(pbkdf2Hash(h.kind), string(secret), salt, h.Iterations, keyLen)
		if err != nil {
			return nil, err
		}
		s = fmt.Sprintf("%s$%d$%s$%s", h.kind, h.Iterations, salt, base64.StdEncoding.EncodeToString(sum))
	case SchemeScrypt:
		salt := randomDjangoSalt(len(h.salt))
		sum, err := scrypt.Key(secret, salt, h.ScryptN, h.ScryptR, h.ScryptP, scryptKeyLen)
		if err != nil {
			return nil, err
		}
		s = fmt.Sprintf("scrypt$%d$%s$%d$%d$%s", h.ScryptN, salt, h.ScryptR, h.ScryptP, base64.StdEncoding.EncodeToString(sum))
	default:
		return nil, fmt.Errorf("no dummy for hash scheme %q", h.kind)
	}
	if h.inner != "" { // the dummy policy hash, wrapped as h is
		s = h.kind + "$" + string(randomDjangoSalt(len(h.legacySalt))) + "$" + s
	}
	return ParseHash(s)
}

// randomDjangoSalt returns n random letters and digits, as Django's salts
// are: never '$'.
func randomDjangoSalt(n int) []byte {
	var salt []byte
	for len(salt) < n {
		salt = append(salt, rand.Text()...)
	}
	return salt[:n]
}

// randomSecret returns a password no one knows: 26 random base32
// characters, within bcrypt's 72 bytes.
func randomSecret() []byte { return []byte(rand.Text()) }
