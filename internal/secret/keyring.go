package secret

import "fmt"

// A Keyring is the current key and the keys it replaced: it seals under
// the current key and opens values sealed under any of them, so that a
// rotation can re-seal values one by one while all of them keep opening.
type Keyring struct {
	keys []Key // keys[0] is the current key
}

// NewKeyring returns a keyring that seals under current and also opens
// values sealed under old. Zero keys in old are ignored.
func NewKeyring(current Key, old ...Key) Keyring {
	keys := []Key{current}
	for _, k := range old {
		if !k.IsZero() {
			keys = append(keys, k)
		}
	}
	return Keyring{keys: keys}
}

// Current returns the key new values are sealed under.
func (r Keyring) Current() Key {
	if len(r.keys) == 0 {
		return Key{}
	}
	return r.keys[0]
}

// Key returns the key of the ring whose ID is id, and whether there is one.
func (r Keyring) Key(id string) (Key, bool) {
	for _, k := range r.keys {
		if !k.IsZero() && k.ID() == id {
			return k, true
		}
	}
	return Key{}, false
}

// Seal seals under the current key, as Key.Seal.
func (r Keyring) Seal(plaintext, additionalData []byte) ([]byte, error) {
	return r.Current().Seal(plaintext, additionalData)
}

// Open opens a value with the key whose ID it names, as Key.Open; stale
// reports that this was an old key, so the caller should seal the value
// again under the current one. It fails with ErrWrongKey when no key of
// the ring has that ID.
func (r Keyring) Open(sealed, additionalData []byte) (plaintext []byte, stale bool, err error) {
	if r.Current().IsZero() {
		return nil, false, ErrNoKey
	}
	id, err := SealedKeyID(sealed)
	if err != nil {
		return nil, false, err
	}
	err = fmt.Errorf("%w: sealed under key %s, which the keyring does not hold", ErrWrongKey, id)
	for i, k := range r.keys {
		// Two keys of a ring share an ID once in 2³² rotations: each is tried.
		if k.ID() != id {
			continue
		}
		if plaintext, err = k.Open(sealed, additionalData); err == nil {
			return plaintext, i > 0, nil
		}
	}
	return nil, false, err
}
