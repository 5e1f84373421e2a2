package password

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/crypto/scrypt"
)

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
