package users

import (
	"errors"
	"fmt"
	"slices"

	"authsvc/internal/mfa"
	"authsvc/internal/secret"
)

// totpAD is the additional data a user's TOTP secret is sealed with: a
// sealed secret copied into another user's entry does not open there.
func totpAD(username string) []byte {
	return append([]byte("authsvc totp secret\x00"), username...)
}

// SealTOTP returns the stored form of authenticator t of username: its
// secret sealed under ring's current key, bound to username, and its other
// fields as they are.
func SealTOTP(ring secret.Keyring, username string, t mfa.TOTP) (*TOTPFactor, error) {
	sealed, err := ring.Seal(t.Secret, totpAD(username))
	if err != nil {
		return nil, err
	}
	return &TOTPFactor{SealedSecret: sealed, Step: t.Step, T0: t.T0, Digits: t.Digits, Drift: t.Drift, LastT: t.LastT}, nil
}

// Open returns the authenticator f stores for username, its secret opened
// with ring. stale reports that the secret was sealed under an old key of
// the ring, so the caller may seal it again (SealTOTP) under the current one.
func (f *TOTPFactor) Open(ring secret.Keyring, username string) (t mfa.TOTP, stale bool, err error) {
	plain, stale, err := ring.Open(f.SealedSecret, totpAD(username))
	if err != nil {
		return mfa.TOTP{}, false, err
	}
	t = mfa.TOTP{Secret: plain, Step: f.Step, T0: f.T0, Digits: f.Digits, Drift: f.Drift, LastT: f.LastT}
	if err := t.Validate(); err != nil {
		return mfa.TOTP{}, false, err
	}
	return t, stale, nil
}

// SetRecoveryCodes replaces f's recovery codes by the keyed hashes of
// codes under key (mfa.HashRecoveryCode), and notes key's ID, under which
// they must be matched (MatchRecoveryCode). The new codes are authsvc's,
// not Django's: it clears RecoveryFromDjango.
func (f *Factors) SetRecoveryCodes(key secret.Key, codes []string) error {
	hashes := make([]string, 0, len(codes))
	for _, c := range codes {
		h, err := mfa.HashRecoveryCode(key, c)
		if err != nil {
			return err
		}
		hashes = append(hashes, h)
	}
	f.RecoveryCodes, f.RecoveryKeyID, f.RecoveryFromDjango = hashes, key.ID(), false
	if len(hashes) == 0 {
		f.RecoveryKeyID = ""
	}
	return nil
}

// ErrRecoveryKey: a user's recovery codes were hashed under a key the
// keyring does not hold.
var ErrRecoveryKey = errors.New("recovery codes hashed under a key the keyring does not hold")

// MatchRecoveryCode reports whether code is one of f's unused recovery
// codes, and which (its index in RecoveryCodes), matched under the key of
// ring that hashed them, in constant time over every hash. Without codes
// it reports false; codes under a key the ring lacks are ErrRecoveryKey.
func (f *Factors) MatchRecoveryCode(ring secret.Keyring, code string) (index int, ok bool, err error) {
	if f == nil || len(f.RecoveryCodes) == 0 {
		return -1, false, nil
	}
	key, found := ring.Key(f.RecoveryKeyID)
	if !found {
		return -1, false, fmt.Errorf("%w (key %s)", ErrRecoveryKey, f.RecoveryKeyID)
	}
	index, ok = mfa.MatchRecoveryCode(key, code, f.RecoveryCodes)
	return index, ok, nil
}

// KeyIDs returns the IDs of the keys f's secrets are sealed, and its
// recovery codes hashed, under: what a key must be to serve f.
func (f *Factors) KeyIDs() []string {
	if f == nil {
		return nil
	}
	var ids []string
	for _, t := range []*TOTPFactor{f.TOTP, f.PendingTOTP} {
		if t == nil {
			continue
		}
		id, err := secret.SealedKeyID(t.SealedSecret)
		if err != nil {
			id = "(corrupt)"
		}
		ids = append(ids, id)
	}
	if len(f.RecoveryCodes) > 0 {
		ids = append(ids, f.RecoveryKeyID)
	}
	return ids
}

// TallyKeyIDs adds one to keys[id] for every key ID f needs (KeyIDs), once
// per key however many of f's secrets are under it: keys counts users.
func TallyKeyIDs(keys map[string]int, f *Factors) {
	ids := f.KeyIDs()
	for i, id := range ids {
		if !slices.Contains(ids[:i], id) {
			keys[id]++
		}
	}
}
