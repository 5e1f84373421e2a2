package users

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"authsvc/internal/secret"
)

// MaxUsernameLen is API.md's longest username; a user the CLI creates meets it.
const MaxUsernameLen = 150

// Limits of a user's profile as the CLI sets it: room for any real name,
// address or group, and no more, since each login and /info reply carries it.
const (
	maxNameLen  = 150 // characters
	maxEmailLen = 254 // bytes: RFC 5321's longest path, less its < and >
	maxGroupLen = 150 // characters, each
	maxGroups   = 100
)

// checkText returns why s cannot be a profile field of at most limit
// characters (bytes, with inBytes), or nil. JSON would turn invalid UTF-8
// into U+FFFD, and control characters would reach clients' terminals and logs.
func checkText(s string, limit int, inBytes bool) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return fmt.Errorf("control character %U refused", r)
	}
	if inBytes && len(s) > limit {
		return fmt.Errorf("%d bytes; at most %d", len(s), limit)
	}
	if n := utf8.RuneCountInString(s); !inBytes && n > limit {
		return fmt.Errorf("%d characters; at most %d", n, limit)
	}
	return nil
}

// A User is one entry of the users file.
type User struct {
	Username     string   `json:"username"`
	PasswordHash string   `json:"password_hash"`
	Name         string   `json:"name"`
	Email        string   `json:"email"`
	Groups       []string `json:"groups"`
	Admin        bool     `json:"admin"`
	Disabled     bool     `json:"disabled"`
	// TokensAfter is the user's cut-off: tokens issued before it are dead
	// for good. add, disable, enable, passwd, logout and reset-mfa set it
	// to the moment they run, so that no later change (a re-add, an older
	// file put back) brings a dead token back, and an enable ends the
	// tokens a lagging instance issued while the user was disabled.
	// Absent in older files: no cut-off.
	TokensAfter time.Time `json:"tokens_after,omitzero"`
	// PasswordGeneration counts the user's password changes: user passwd
	// and POST /api/auth/password/ add one, a rehash on login does not. A
	// session carries the generation it was issued on, and dies when it
	// moves, so a login that checked the old password while a change was
	// written gets a token that is dead at once. Absent in older files: 0.
	PasswordGeneration uint64 `json:"password_generation,omitzero"`
	// FailuresAfter is when the user was last unlocked (user unlock):
	// failed logins before it no longer count towards the login
	// throttle's limits for the user, per user and per (user, client), on
	// every instance. Absent: never unlocked.
	FailuresAfter time.Time `json:"failures_after,omitzero"`
	// CodesAfter is when the user's lock after MaxCodeFailures wrong
	// second-factor codes was last lifted (user unlock): wrong codes
	// before it no longer count. Apart from FailuresAfter, which a reset
	// confirm moves too: whoever holds the mailbox must not buy another
	// hundred code guesses with each reset (API.md). Absent: never.
	CodesAfter time.Time `json:"codes_after,omitzero"`
	// DjangoHash is the keyed fingerprint of the Django hash that user
	// import brought ("KEYID:HEX", see DjangoHashFingerprint), never the
	// hash itself: import --update takes a newer Django hash only when its
	// fingerprint differs, so a hash authsvc upgraded on login is not
	// overwritten by the unchanged Django hash it came from. Empty for
	// users the importer did not create.
	DjangoHash string `json:"django_hash,omitempty"`
	// MFA is the user's second factors; nil when it has none.
	MFA *Factors `json:"mfa,omitempty"`
	// AccessTokens are the user's personal access tokens (digests, never
	// tokens). A token lives while it is here and not expired: revoking
	// one removes it, and what ends them all (disable, enable, a password
	// set by anyone but the user, SetPassword) empties the list, so that
	// nothing brings a dead one back.
	AccessTokens []AccessToken `json:"access_tokens,omitempty"`
	// ResetLink is the user's one live password reset link (its digest,
	// never its token); nil for none. A password change, a reset and a
	// newer link remove or replace it.
	ResetLink *ResetLink `json:"reset_link,omitempty"`
	// ResetMails are when reset links were mailed to the user within the
	// last hour (at most MaxResetMails), kept apart from the link: a
	// confirm, which spends the link, or a newer link does not reset the
	// count. A users file keeps them beside it (usersfile's resets file),
	// never in it: its Users carry none.
	ResetMails []time.Time `json:"reset_mails,omitempty"`
}

// Factors are a user's second factors (API.md, Two-factor authentication).
type Factors struct {
	TOTP          *TOTPFactor `json:"totp,omitempty"`           // the active authenticator
	PendingTOTP   *TOTPFactor `json:"pending_totp,omitempty"`   // enrolled, not yet confirmed
	RecoveryCodes []string    `json:"recovery_codes,omitempty"` // keyed hashes (mfa.HashRecoveryCode), unused ones
	// RecoveryKeyID names the secret key RecoveryCodes were hashed under
	// (secret.Key.ID): after a key rotation they are matched under it.
	RecoveryKeyID string `json:"recovery_key_id,omitempty"`
	// RecoveryFromDjango marks RecoveryCodes as what is left of django-otp
	// static tokens that user import brought: import --update may bring
	// them up to date with Django, but never touches codes authsvc gave
	// (SetRecoveryCodes clears the mark). It stays when the last code is
	// used, so that --update does not bring used codes back.
	RecoveryFromDjango bool `json:"recovery_from_django,omitempty"`
}

// TOTPFactor is an authenticator: its secret sealed under the secret key
// (secret.Key.Seal, additional data binding it to its user), never in clear.
type TOTPFactor struct {
	SealedSecret []byte `json:"sealed_secret"` // base64 in JSON (encoding/json's []byte)
	Step         int64  `json:"step"`
	T0           int64  `json:"t0"`
	Digits       int    `json:"digits"`
	Drift        int64  `json:"drift"`
	LastT        int64  `json:"last_t"`
	// FromDjango marks an authenticator user import brought from a
	// django-otp device: import --update may replace or remove it as the
	// device changes in Django, but never touches one enrolled in authsvc.
	FromDjango bool `json:"from_django,omitempty"`
}

// HasSecondFactor reports whether u has a second factor as API.md defines
// it: an active authenticator, or unused recovery codes.
func (u *User) HasSecondFactor() bool { return u.MFA.has() }

// Clone returns a deep copy of f; nil for nil.
func (f *Factors) Clone() *Factors {
	if f == nil {
		return nil
	}
	c := *f
	c.TOTP, c.PendingTOTP, c.RecoveryCodes = f.TOTP.clone(), f.PendingTOTP.clone(), slices.Clone(f.RecoveryCodes)
	return &c
}

// clone returns a deep copy of t; nil for nil.
func (t *TOTPFactor) clone() *TOTPFactor {
	if t == nil {
		return nil
	}
	c := *t
	c.SealedSecret = slices.Clone(t.SealedSecret)
	return &c
}

// has reports whether f holds a second factor; a nil f holds none.
func (f *Factors) has() bool {
	return f != nil && (f.TOTP != nil || len(f.RecoveryCodes) > 0)
}

// Limits of a user's stored second factors.
const (
	maxSealedSecret = 2 << 10 // bytes
	maxRecoveryKept = 20
	recoveryHashLen = 64 // hex characters: mfa.HashRecoveryCode's HMAC-SHA256
)

// CheckFactors returns why f cannot be a User's MFA, or nil. A nil f is
// no second factor.
func CheckFactors(f *Factors) error {
	if f == nil {
		return nil
	}
	for _, t := range []struct {
		name string
		f    *TOTPFactor
	}{{"totp", f.TOTP}, {"pending_totp", f.PendingTOTP}} {
		if t.f == nil {
			continue
		}
		if err := checkTOTPFactor(t.f); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	if len(f.RecoveryCodes) > 0 && !isKeyID(f.RecoveryKeyID) {
		return errors.New("recovery_key_id: want the 8 hex characters of the key the recovery codes were hashed under")
	}
	if len(f.RecoveryCodes) == 0 && f.RecoveryKeyID != "" {
		return errors.New("recovery_key_id: set, with no recovery codes")
	}
	if len(f.RecoveryCodes) > maxRecoveryKept {
		return fmt.Errorf("recovery_codes: %d; at most %d", len(f.RecoveryCodes), maxRecoveryKept)
	}
	for i, h := range f.RecoveryCodes {
		ok := len(h) == recoveryHashLen
		for j := 0; ok && j < len(h); j++ {
			c := h[j]
			ok = '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
		}
		if !ok {
			return fmt.Errorf("recovery_codes[%d]: want %d lower-case hex characters (a keyed hash)", i, recoveryHashLen)
		}
	}
	return nil
}

// isKeyID reports whether id has the form of a secret.Key's ID.
func isKeyID(id string) bool {
	ok := len(id) == 8
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
	}
	return ok
}

// checkTOTPFactor returns why t cannot be a stored authenticator, or nil.
func checkTOTPFactor(t *TOTPFactor) error {
	switch {
	case len(t.SealedSecret) == 0:
		return errors.New("sealed_secret: empty")
	case len(t.SealedSecret) > maxSealedSecret:
		return fmt.Errorf("sealed_secret: %d bytes; at most %d", len(t.SealedSecret), maxSealedSecret)
	case t.Step < 1:
		return fmt.Errorf("step: %d; at least 1", t.Step)
	case t.Digits < 6 || t.Digits > 8:
		return fmt.Errorf("digits: %d; want 6 to 8", t.Digits)
	case t.LastT < -1:
		return fmt.Errorf("last_t: %d; at least -1", t.LastT)
	}
	return nil
}

// djangoHashPurpose is the purpose of DjangoHash's fingerprints under the
// secret key.
const djangoHashPurpose = "django hash"

// DjangoHashFingerprint returns User.DjangoHash for hash, a Django hash
// as dumped: its key's ID and its fingerprint under that key.
func DjangoHashFingerprint(key secret.Key, hash string) string {
	return key.ID() + ":" + key.Fingerprint(djangoHashPurpose, []byte(hash))
}

// DjangoHashKeyID returns the ID of the key a User.DjangoHash was made
// under.
func DjangoHashKeyID(fingerprint string) string {
	id, _, _ := strings.Cut(fingerprint, ":")
	return id
}

// CheckDjangoHash returns why fp cannot be a User's DjangoHash, or nil.
// It takes fp as a string, or as the bytes of a reader's buffer, which it
// does not copy.
func CheckDjangoHash[T ~string | ~[]byte](fp T) error {
	if len(fp) == 0 {
		return nil
	}
	const idLen, hexLen = 8, 64
	ok := len(fp) == idLen+1+hexLen && fp[idLen] == ':'
	for i := 0; ok && i < len(fp); i++ {
		c := fp[i]
		ok = i == idLen || '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
	}
	if !ok {
		return errors.New("want a key ID, ':' and a hex fingerprint, as user import writes it")
	}
	return nil
}

// Info is the public view of a user: the info reply and the login
// reply's "user". It never holds a hash.
type Info struct {
	Username string   `json:"username"`
	Name     string   `json:"name"`
	Email    string   `json:"email"`
	Groups   []string `json:"groups"`
	Admin    bool     `json:"admin"`
}

// CheckProfile returns why the --name, --email and --group values cannot be
// set, naming the flag, or nil.
func CheckProfile(name, email string, groups []string) error {
	if err := checkText(name, maxNameLen, false); err != nil {
		return fmt.Errorf("--name: %v", err)
	}
	if err := checkText(email, maxEmailLen, true); err != nil {
		return fmt.Errorf("--email: %v", err)
	}
	if len(groups) > maxGroups {
		return fmt.Errorf("--group: %d groups; at most %d", len(groups), maxGroups)
	}
	for i, g := range groups {
		err := checkText(g, maxGroupLen, false)
		if g == "" {
			err = errors.New("empty")
		}
		if err != nil {
			return fmt.Errorf("--group number %d: %v", i+1, err)
		}
	}
	return nil
}

// CheckUsername returns why name cannot be a stored username, or nil:
// stored names are in NFKC form and follow Django's rule (usernames.go).
func CheckUsername(name string) error {
	if !isNFKC(name) {
		return fmt.Errorf("username %q: not in NFKC form (%q)", name, NormalizeUsername(name))
	}
	if !validUnicodeUsername(name) {
		return fmt.Errorf("username %q: want 1-%d letters, numbers or @ . + - _", name, MaxUsernameLen)
	}
	return nil
}

// CheckNewPassword returns why password cannot be hashed at all, or nil:
// what even the hash command refuses. Setting a user's password also
// takes the password policy (password.Policy).
func CheckNewPassword(password string) error {
	switch {
	case password == "":
		return errors.New("empty password refused")
	case !utf8.ValidString(password):
		// A JSON login request turns it into U+FFFD, so it could never log in.
		return errors.New("password is not valid UTF-8; no login request could send it")
	}
	return nil
}
