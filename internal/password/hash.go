package password

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// The password-hash schemes a users file may hold (API.md, Passwords). The
// Django forms are checked exactly as Django 3.2 checks them, so an imported
// user logs in with the password Django accepted and with no other.
const (
	SchemeBcrypt       = "bcrypt"        // $2a$, $2b$, $2y$
	SchemeArgon2id     = "argon2id"      // PHC $argon2id$v=19$…
	SchemePBKDF2       = "pbkdf2_sha256" // Django's PBKDF2PasswordHasher
	SchemeDjangoArgon2 = "django_argon2" // Django's Argon2PasswordHasher: argon2$ + PHC
	SchemeBcryptSHA256 = "bcrypt_sha256" // Django's BCryptSHA256PasswordHasher
	SchemeDjangoBcrypt = "django_bcrypt" // Django's BCryptPasswordHasher: bcrypt$ + bcrypt
	SchemeUnusable     = "unusable"      // Django's "!…" or "": never matches
)

// Bounds on stored hashes. A hash beyond them is refused at load rather than
// allowed to make every login slow: a failed login is made as slow as the
// slowest hash in the directory (API.md), so one absurd hash would slow them
// all, and an argon2 check holds its memory for as long as it runs.
const (
	MinBcryptCost = bcrypt.MinCost
	// DefaultBcryptCost is the cost of new bcrypt hashes unless --cost
	// says otherwise: about 230 ms a check here (FACTS.md).
	DefaultBcryptCost = 12
	// MaxBcryptCost: cost 12 takes about 230 ms here and each step
	// doubles, so 14 is about 0.9 s a check (FACTS.md): every scheme's
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

	// argon2id, django_argon2
	MemoryKiB, Time uint32
	Threads         uint8

	// pbkdf2_sha256
	Iterations int

	// argon2: the decoded salt and digest. pbkdf2: the salt's literal bytes
	// (Django does not decode it) and the digest's base64 text (Django
	// compares the text).
	salt, digest []byte
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
		return parseArgon2id(SchemeArgon2id, s)
	case strings.HasPrefix(s, "pbkdf2_sha256$"):
		return parsePBKDF2(s)
	case strings.HasPrefix(s, "argon2$"):
		rest := strings.TrimPrefix(s, "argon2")
		if !strings.HasPrefix(rest, "$argon2id$") {
			return nil, errors.New("Django argon2 hash: only argon2id is supported, not " + argon2Variant(rest))
		}
		return parseArgon2id(SchemeDjangoArgon2, rest)
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

// parseArgon2id parses phc, a PHC-form argon2id hash, as scheme kind. The
// syntax is the argon2 reference decoder's, which argon2-cffi (so Django)
// uses: fields in this order, decimals without leading zeros, base64 without
// padding. Only version 19 is accepted: x/crypto implements no other.
func parseArgon2id(kind, phc string) (*Hash, error) {
	name := schemeLabel(kind)
	var f [6]string
	if !splitExactly(phc, '$', f[:]) || f[0] != "" || f[1] != "argon2id" {
		return nil, fmt.Errorf("%s: malformed (want $argon2id$v=19$m=…,t=…,p=…$salt$digest)", name)
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

// parsePBKDF2 parses Django's pbkdf2_sha256$<iterations>$<salt>$<digest>.
// Django recomputes the whole string and compares, so the iterations must be
// written as %d writes them and the digest as standard padded base64 of 32
// bytes: any other spelling would never match there.
func parsePBKDF2(s string) (*Hash, error) {
	const name = "Django pbkdf2_sha256 hash"
	f := strings.Split(s, "$")
	if len(f) != 4 {
		return nil, errors.New(name + ": malformed (want pbkdf2_sha256$iterations$salt$digest)")
	}
	n, ok := parseDecimal(f[1])
	if !ok {
		return nil, errors.New(name + ": iterations are not a decimal number")
	}
	switch {
	case n < minPBKDF2Iterations:
		return nil, fmt.Errorf("%s: %d iterations are below the minimum %d", name, n, minPBKDF2Iterations)
	case n > maxPBKDF2Iterations:
		return nil, fmt.Errorf("%s: %d iterations are above the maximum %d", name, n, maxPBKDF2Iterations)
	case f[2] == "" || len(f[2]) > maxPBKDF2SaltLen:
		return nil, fmt.Errorf("%s: salt is %d bytes, want 1 to %d", name, len(f[2]), maxPBKDF2SaltLen)
	}
	if sum, err := decodeBase64(base64.StdEncoding.Strict(), f[3]); err != nil || len(sum) != pbkdf2KeyLen {
		return nil, fmt.Errorf("%s: digest is not the base64 of %d bytes", name, pbkdf2KeyLen)
	}
	return &Hash{kind: SchemePBKDF2, Iterations: int(n), salt: []byte(f[2]), digest: []byte(f[3])}, nil
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
	case SchemePBKDF2, SchemeBcryptSHA256:
		return "Django " + kind + " hash"
	case SchemeDjangoArgon2:
		return "Django argon2 hash"
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

// knownHashForms are hash forms that are recognised but not accepted, so the
// refusal can name them. Anything else is named by no part of itself: it may
// be a password pasted in by mistake.
var knownHashForms = []struct{ prefix, name string }{
	{"sha1$", "Django sha1 (SHA1PasswordHasher)"},
	{"md5$", "Django md5 (MD5PasswordHasher)"},
	{"unsalted_sha1$", "Django unsalted_sha1"},
	{"unsalted_md5$", "Django unsalted_md5"},
	{"crypt$", "Django crypt (CryptPasswordHasher)"},
	{"pbkdf2_sha1$", "Django pbkdf2_sha1"},
	{"scrypt$", "Django scrypt"},
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
	if len(s) == 32 && strings.Trim(s, "0123456789abcdef") == "" {
		return errors.New("unsupported password hash scheme: unsalted MD5 (ancient Django)")
	}
	return errors.New("not a supported password hash (bcrypt, argon2id, or Django's pbkdf2_sha256, argon2, bcrypt_sha256, bcrypt)")
}

// Scheme returns the hash's scheme: one of "bcrypt", "argon2id",
// "pbkdf2_sha256", "django_argon2", "bcrypt_sha256", "django_bcrypt",
// "unusable".
func (h *Hash) Scheme() string { return h.kind }

// Unusable returns a hash no password matches.
func Unusable() *Hash { return &Hash{kind: SchemeUnusable} }

// Shape names h's scheme and parameters, what decides how long a check takes.
func (h *Hash) Shape() string {
	return fmt.Sprintf("%s cost=%d m=%d t=%d p=%d i=%d", h.kind, h.Cost, h.MemoryKiB, h.Time, h.Threads, h.Iterations)
}

// Usable reports whether any password can match the hash.
func (h *Hash) Usable() bool { return h.kind != SchemeUnusable }

// Verify reports whether password matches the hash, as the hash's origin
// would decide it. Digests are compared in constant time; what is not
// constant is the time a scheme takes, which the caller pads (work).
func (h *Hash) Verify(password []byte) bool {
	switch h.kind {
	case SchemeBcrypt:
		// x/crypto would match on the first 72 bytes alone (FACTS.md).
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
	case SchemePBKDF2:
		sum, err := pbkdf2.Key(sha256.New, string(password), h.salt, h.Iterations, pbkdf2KeyLen)
		if err != nil {
			return false
		}
		return subtle.ConstantTimeCompare(base64.StdEncoding.AppendEncode(nil, sum), h.digest) == 1
	}
	return false
}

// djangoSHA256Hex is what Django's bcrypt_sha256 gives bcrypt: the lowercase
// hex SHA-256 of the password, 64 bytes, so no password is truncated.
func djangoSHA256Hex(password []byte) []byte {
	sum := sha256.Sum256(password)
	return hex.AppendEncode(nil, sum[:])
}

// Calibration of work, from FACTS.md's one-goroutine timings (x/crypto
// v0.58.0): bcrypt cost 12 229 ms; argon2id m=19 MiB t=2 26.5 ms, m=46 MiB
// t=1 44.3 ms, m=64 MiB t=3 164 ms, about 0.8 µs per KiB per pass. PBKDF2
// (crypto/pbkdf2) at Django's 260,000 iterations took 0.95 times a bcrypt
// cost-10 compare, side by side on this machine: about 54 ms.
const (
	bcryptCost12Seconds       = 0.229
	argon2SecondsPerKiBPass   = 0.8e-6
	pbkdf2SecondsPerIteration = 0.21e-6
)

// Work estimates how many seconds verify takes, so that the slowest hash in
// a directory can be found and a failed login made as slow as it. bcrypt
// doubles with each cost step; argon2 grows with memory × passes, its lanes
// running in parallel on up to GOMAXPROCS cores (Django's p=8 runs about
// twice as fast on two cores); PBKDF2 grows with its iterations. An unusable
// hash does no work.
func (h *Hash) Work() float64 {
	switch h.kind {
	case SchemeBcrypt, SchemeBcryptSHA256, SchemeDjangoBcrypt:
		return bcryptCost12Seconds * math.Exp2(float64(h.Cost-12))
	case SchemeArgon2id, SchemeDjangoArgon2:
		lanes := min(int(h.Threads), runtime.GOMAXPROCS(0))
		return argon2SecondsPerKiBPass * float64(h.MemoryKiB) * float64(h.Time) / float64(lanes)
	case SchemePBKDF2:
		return pbkdf2SecondsPerIteration * float64(h.Iterations)
	}
	return 0
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
// (about 27 ms here, FACTS.md), with bcrypt's cost at API.md's default 12
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
	return fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$%s$%s", m, t, p,
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
	switch h.kind {
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
	case SchemeArgon2id, SchemeDjangoArgon2:
		salt := make([]byte, len(h.salt))
		rand.Read(salt)
		sum := argon2.IDKey(secret, salt, h.Time, h.MemoryKiB, h.Threads, uint32(len(h.digest)))
		s = formatArgon2id(h.MemoryKiB, h.Time, h.Threads, salt, sum)
		if h.kind == SchemeDjangoArgon2 {
			s = "argon2" + s
		}
	case SchemePBKDF2:
		// Letters and digits, as Django's salts: never '$'.
		var salt []byte
		for len(salt) < len(h.salt) {
			salt = append(salt, rand.Text()...)
		}
		salt = salt[:len(h.salt)]
		sum, err := pbkdf2.Key(sha256.New, string(secret), salt, h.Iterations, pbkdf2KeyLen)
		if err != nil {
			return nil, err
		}
		s = fmt.Sprintf("pbkdf2_sha256$%d$%s$%s", h.Iterations, salt, base64.StdEncoding.EncodeToString(sum))
	default:
		return nil, fmt.Errorf("no dummy for hash scheme %q", h.kind)
	}
	return ParseHash(s)
}

// randomSecret returns a password no one knows: 26 random base32
// characters, within bcrypt's 72 bytes.
func randomSecret() []byte { return []byte(rand.Text()) }
