package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
)

// Size is the length of a key in bytes; its file holds twice as many hex
// characters.
const Size = 32

// idSize is the length of a key ID in bytes, as a sealed value carries it.
const idSize = 4

// Sealed values: version, key ID, then what AES-GCM with a random nonce
// makes (12-byte nonce, ciphertext, 16-byte tag).
const (
	sealVersion = 1
	headerSize  = 1 + idSize
	minSealed   = headerSize + 12 + 16
)

// Errors of Open.
var (
	// ErrWrongKey: the value was sealed under another key (its key ID is
	// not this key's), for instance a key from before a rotation.
	ErrWrongKey = errors.New("sealed under another key")
	// ErrCorrupt: the value is not one Seal made, was altered, or is
	// opened with other additional data than it was sealed with (a secret
	// copied to another user's row). GCM cannot tell these apart.
	ErrCorrupt = errors.New("sealed value corrupt or not for this additional data")
	// ErrNoKey: the zero Key was used, which holds no key.
	ErrNoKey = errors.New("no secret key")
)

// A Key is a 32-byte secret key. The zero Key holds none.
//
// Printed directly, a Key shows only its ID. A Key is safe for concurrent
// use; compare keys with Equal.
type Key struct {
	// get is a function rather than a pointer because fmt, printing a Key
	// held in an unexported field (where it cannot call the Key's
	// methods), follows a pointer with a verb such as %s and prints what it
	// points to; a function it prints as an address.
	get func() *keyBytes
}

type keyBytes struct {
	raw [Size]byte
	id  [idSize]byte
}

// newKey wraps raw, which it copies, and derives the key ID.
func newKey(raw []byte) Key {
	kb := &keyBytes{}
	copy(kb.raw[:], raw)
	// The ID is a hash of the key, not a prefix of it, so that it can be
	// logged and stored beside sealed values.
	sum := sha256.Sum256(append([]byte("authsvc key id"), raw...))
	copy(kb.id[:], sum[:idSize])
	return Key{func() *keyBytes { return kb }}
}

// b returns the key's bytes, or nil for the zero Key.
func (k Key) b() *keyBytes {
	if k.get == nil {
		return nil
	}
	return k.get()
}

// Generate returns a new random key.
func Generate() (Key, error) {
	var raw [Size]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Key{}, err
	}
	return newKey(raw[:]), nil
}

// IsZero reports whether k is the zero Key, which holds no key.
func (k Key) IsZero() bool { return k.b() == nil }

// ID returns the key's ID: 8 hex characters of a SHA-256 of the key, which
// tells keys apart without revealing them. The zero Key's ID is "".
func (k Key) ID() string {
	if k.b() == nil {
		return ""
	}
	return hex.EncodeToString(k.b().id[:])
}

// Equal reports whether k and o hold the same key.
func (k Key) Equal(o Key) bool {
	kb, ob := k.b(), o.b()
	if kb == nil || ob == nil {
		return kb == ob
	}
	return subtle.ConstantTimeCompare(kb.raw[:], ob.raw[:]) == 1
}

// String returns "secret.Key(ID)", never the key.
func (k Key) String() string {
	if k.b() == nil {
		return "secret.Key(none)"
	}
	return "secret.Key(" + k.ID() + ")"
}

// GoString is String, so that %#v does not print the key either.
func (k Key) GoString() string { return k.String() }

// Format prints String for every verb (%x and %d included), so that no
// format directive prints the key.
func (k Key) Format(f fmt.State, verb rune) { fmt.Fprint(f, k.String()) }

// subkey derives the key for one use of k, so that sealing and each
// fingerprint purpose never share a key.
func (k Key) subkey(label string) []byte {
	m := hmac.New(sha256.New, k.b().raw[:])
	m.Write([]byte(label))
	return m.Sum(nil)
}

func (k Key) aead() cipher.AEAD {
	block, err := aes.NewCipher(k.subkey("authsvc seal v1"))
	if err != nil {
		panic("secret: AES-256 refused a 32-byte key") // cannot happen: the subkey is 32 bytes
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		panic("secret: GCM refused an AES block") // cannot happen for crypto/aes blocks
	}
	return aead
}

// header returns what a value sealed under k starts with.
func (k Key) header() []byte {
	h := make([]byte, headerSize, headerSize+minSealed)
	h[0] = sealVersion
	copy(h[1:], k.b().id[:])
	return h
}

// Seal encrypts and authenticates plaintext under k (AES-256-GCM with a
// random 96-bit nonce) and binds it to additionalData, which Open must be
// given again: a value sealed for one owner does not open for another.
// The result is a version byte, the key's ID, the nonce, the ciphertext
// and the tag. A key must not seal more than 2³² values (random nonces).
func (k Key) Seal(plaintext, additionalData []byte) ([]byte, error) {
	if k.b() == nil {
		return nil, ErrNoKey
	}
	h := k.header()
	// The header is authenticated too: a value cannot be passed off as
	// sealed under another key or version.
	aad := append(h[:headerSize:headerSize], additionalData...)
	return k.aead().Seal(h, nil, plaintext, aad), nil
}

// Open returns the plaintext of a value Seal made under k with the same
// additionalData. It fails with ErrWrongKey when the value names another
// key, and with ErrCorrupt when it is malformed, altered, or bound to other
// additional data.
func (k Key) Open(sealed, additionalData []byte) ([]byte, error) {
	if k.b() == nil {
		return nil, ErrNoKey
	}
	id, err := SealedKeyID(sealed)
	if err != nil {
		return nil, err
	}
	if id != k.ID() {
		return nil, fmt.Errorf("%w: sealed under key %s, opened with key %s", ErrWrongKey, id, k.ID())
	}
	aad := append(sealed[:headerSize:headerSize], additionalData...)
	plaintext, err := k.aead().Open(nil, nil, sealed[headerSize:], aad)
	if err != nil {
		return nil, ErrCorrupt
	}
	return plaintext, nil
}

// SealedKeyID returns the ID of the key that sealed a value, as Key.ID
// gives it, or ErrCorrupt when sealed is not a value Seal could have made.
// It does not check that the value is authentic.
func SealedKeyID(sealed []byte) (string, error) {
	if len(sealed) < minSealed {
		return "", fmt.Errorf("%w: %d bytes, shorter than any sealed value", ErrCorrupt, len(sealed))
	}
	if sealed[0] != sealVersion {
		return "", fmt.Errorf("%w: unknown version %d", ErrCorrupt, sealed[0])
	}
	return hex.EncodeToString(sealed[1:headerSize]), nil
}

// Fingerprint returns a keyed fingerprint of data for one purpose, in hex:
// HMAC-SHA-256 of data under a subkey of k for that purpose, so the same
// data gives unrelated fingerprints for two purposes, and no one without
// the key can compute or test one. It panics on the zero Key: a
// fingerprint under no key would be a bare hash, which a caller must not
// store by mistake.
func (k Key) Fingerprint(purpose string, data []byte) string {
	if k.b() == nil {
		panic("secret: Fingerprint with the zero Key")
	}
	m := hmac.New(sha256.New, k.subkey("authsvc fingerprint "+purpose))
	m.Write(data)
	return hex.EncodeToString(m.Sum(nil))
}
