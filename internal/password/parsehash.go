package password

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// The parsers of ParseHash, one a scheme: each validates a stored hash as
// strictly as its origin writes it, so that a hash that loads is one that
// verifies as it does there.

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
