package mfa

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"

	"authsvc/internal/secret"
)

// RecoveryCodes is how many recovery codes a user is given (API.md).
const RecoveryCodes = 10

// recoveryAlphabet is RFC 4648's base32 alphabet in lower case, the one
// django-otp's static tokens use: it has no 0, 1 or 8, so none of its
// letters can be mistaken for a digit. 32 symbols: 5 bits a character.
const recoveryAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// A new code is 24 characters (120 bits), shown as four groups of six:
// ASVS 5.0's 6.5.2 asks lookup secrets under 112 bits for a salted password
// hash, and lets one of 112 bits or more be stored under a plain hash, as
// the keyed hash here is. Typed rarely, so length costs little.
const (
	recoveryLen   = 24
	recoveryGroup = 6
)

// The normal form of a recovery code is 8 to 24 lower-case letters and
// digits: django-otp's static tokens are 8 (StaticToken.random_token) and
// at most 16 (its column), authsvc's 24.
const (
	minRecovery = 8
	maxRecovery = recoveryLen
)

// recoveryPurpose is the secret.Key fingerprint purpose of recovery codes.
const recoveryPurpose = "recovery code"

// ErrMalformedCode: a recovery code has no normal form.
var ErrMalformedCode = errors.New("malformed recovery code")

// NewRecoveryCodes returns n new recovery codes, each 24 random characters
// of lower-case base32 (120 bits) shown as "xxxxxx-xxxxxx-xxxxxx-xxxxxx".
// n < 1 gives none.
func NewRecoveryCodes(n int) ([]string, error) {
	if n < 1 {
		return nil, nil
	}
	raw := make([]byte, n*recoveryLen)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	codes := make([]string, n)
	for i := range codes {
		b := make([]byte, 0, recoveryLen+recoveryLen/recoveryGroup)
		for j, r := range raw[i*recoveryLen : (i+1)*recoveryLen] {
			if j > 0 && j%recoveryGroup == 0 {
				b = append(b, '-')
			}
			b = append(b, recoveryAlphabet[r&31]) // 256 is a multiple of 32: no bias
		}
		codes[i] = string(b)
	}
	return codes, nil
}

// NormalizeRecoveryCode returns code's normal form and reports whether it
// has one: spaces and dashes dropped, ASCII letters lower-cased, and then
// 8 to 24 ASCII letters and digits. So "ABCDE-FGHIJ", "abcde fghij" and
// "abcdefghij" are one code, and a django-otp static token (8 lower-case
// base32 characters, or whatever up to 16 an admin typed) is its own
// normal form. Nothing else is mapped (no 0 to o): django-otp compares
// tokens exactly, and its alphabet has o but no 0.
func NormalizeRecoveryCode(code string) (string, bool) {
	if len(code) > 4*maxRecovery { // however many separators, far too long
		return "", false
	}
	b := make([]byte, 0, len(code))
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == ' ' || c == '-':
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			b = append(b, c)
		case 'A' <= c && c <= 'Z':
			b = append(b, c+'a'-'A')
		default:
			return "", false
		}
	}
	if len(b) < minRecovery || len(b) > maxRecovery {
		return "", false
	}
	return string(b), true
}

// HashRecoveryCode returns the keyed hash of a recovery code, the only
// form stored: key's fingerprint of the code's normal form for the
// purpose "recovery code", so a stolen table of hashes is no use without
// the key. A code with no normal form is ErrMalformedCode. The hashes
// belong to key: after a key rotation they must be checked under the key
// that made them.
func HashRecoveryCode(key secret.Key, code string) (string, error) {
	norm, ok := NormalizeRecoveryCode(code)
	if !ok {
		return "", ErrMalformedCode
	}
	if key.IsZero() {
		return "", secret.ErrNoKey
	}
	return key.Fingerprint(recoveryPurpose, []byte(norm)), nil
}

// MatchRecoveryCode reports whether code is one of the codes whose
// hashes (HashRecoveryCode under key) are given, and which: the index of
// the first match, to remove it, since each code works once. Every hash is
// compared, in constant time and with no early exit, so the time taken
// tells neither whether nor where the code matched. A malformed code or
// the zero key matches nothing.
func MatchRecoveryCode(key secret.Key, code string, hashes []string) (index int, ok bool) {
	return matchRecoveryCode(key, code, hashes, subtle.ConstantTimeCompare)
}

// matchRecoveryCode is MatchRecoveryCode with the comparison passed in, so
// that a test can count the comparisons.
func matchRecoveryCode(key secret.Key, code string, hashes []string, equal func(a, b []byte) int) (index int, ok bool) {
	h, err := HashRecoveryCode(key, code)
	if err != nil {
		return -1, false // the input's form and the key's presence are no secret
	}
	found, matched := -1, 0
	for i, stored := range hashes {
		m := equal([]byte(h), []byte(stored))
		found = subtle.ConstantTimeSelect(m&^matched, i, found)
		matched |= m
	}
	return found, matched == 1
}
