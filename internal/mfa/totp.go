package mfa

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
)

// SecretSize is the length of a new TOTP secret in bytes: 160 bits, the
// length RFC 4226 recommends for HMAC-SHA-1 (and django-otp's default).
const SecretSize = 20

// New enrolments use these (API.md), as the otpauth:// URL says.
const (
	DefaultStep   = 30
	DefaultDigits = 6
)

// window is how many steps a code may be off the current counter plus
// drift, either way: API.md's 1, django-otp's default tolerance.
const window = 1

// ErrBadTOTP: a TOTP's fields cannot make codes (see Validate).
var ErrBadTOTP = errors.New("unusable TOTP parameters")

// A TOTP is an authenticator (RFC 6238, HMAC-SHA-1). Its fields are those
// of a django-otp otp_totp.totpdevice, so an imported device maps field
// for field: key (hex) is Secret's bytes, and step, t0, digits, drift and
// last_t are Step, T0, Digits, Drift and LastT. django-otp's tolerance is
// not kept: authsvc accepts one step either way (API.md).
type TOTP struct {
	Secret []byte
	Step   int64 // seconds per counter step: 30 (django-otp also allows others, 60 for instance)
	T0     int64 // Unix time of counter 0
	Digits int   // 6, 7 or 8
	// Drift shifts the window: django-otp learns it when a code of a
	// neighbouring step is accepted. authsvc keeps an imported device's
	// drift and never changes it.
	Drift int64
	// LastT is the last accepted counter; no code of a counter at or
	// before it is accepted again. -1 (django-otp's value for a device
	// never used) means none. The zero value 0 would refuse only counter
	// 0, of January 1970.
	LastT int64
}

// NewTOTP returns a new authenticator for secret with API.md's
// parameters: 30-second steps from t0 0, 6 digits, no drift, never used.
func NewTOTP(secret []byte) TOTP {
	return TOTP{Secret: secret, Step: DefaultStep, Digits: DefaultDigits, LastT: -1}
}

// NewSecret returns a new random TOTP secret of SecretSize bytes.
func NewSecret() ([]byte, error) {
	b := make([]byte, SecretSize)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return b, nil
}

// Base32 returns secret as an authenticator app takes it: RFC 4648's
// upper-case base32 without "=" padding, which the Key URI Format omits.
func Base32(secret []byte) string {
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(secret)
}

// OTPAuthURL returns the otpauth:// URL an authenticator app scans, in
// API.md's form and order:
//
//	otpauth://totp/<issuer>:<username>?secret=…&issuer=<issuer>&algorithm=SHA1&digits=6&period=30
//
// It is built here rather than with pquerna/otp's totp.Generate, whose URL
// orders its parameters alphabetically (algorithm, digits, issuer, period,
// secret) and leaves a colon inside the issuer unescaped. Each label part
// is path-escaped with ":" escaped too, so the one literal colon separates
// issuer from username; query values are query-escaped with a space as
// %20, not "+", which some apps show as a plus (pyotp does the same).
func OTPAuthURL(issuer, username string, secret []byte) string {
	label := func(s string) string { return strings.ReplaceAll(url.PathEscape(s), ":", "%3A") }
	query := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	return fmt.Sprintf("otpauth://totp/%s:%s?secret=%s&issuer=%s&algorithm=SHA1&digits=%d&period=%d",
		label(issuer), label(username), Base32(secret), query(issuer), DefaultDigits, DefaultStep)
}

// Limits of Validate: far beyond any real device, near enough to zero
// that counter arithmetic cannot overflow.
const (
	minSecret = 10 // 80 bits: the shortest secret authenticator apps commonly issued
	maxSecret = 1024
	maxStep   = 1 << 32
	maxT0     = 1 << 48
	maxDrift  = 1 << 32
)

// Validate returns ErrBadTOTP, with the field named, when t cannot make
// codes: a secret under 10 or over 1024 bytes, Step not positive,
// Digits outside 6–8 (RFC 4226's range), or T0, Step, Drift or LastT so
// far from anything real that counters would overflow.
func (t TOTP) Validate() error {
	switch {
	case len(t.Secret) < minSecret || len(t.Secret) > maxSecret:
		return fmt.Errorf("%w: secret of %d bytes; want %d to %d", ErrBadTOTP, len(t.Secret), minSecret, maxSecret)
	case t.Step < 1 || t.Step > maxStep:
		return fmt.Errorf("%w: step %d", ErrBadTOTP, t.Step)
	case t.Digits < 6 || t.Digits > 8:
		return fmt.Errorf("%w: %d digits; want 6 to 8", ErrBadTOTP, t.Digits)
	case t.T0 < -maxT0 || t.T0 > maxT0:
		return fmt.Errorf("%w: t0 %d", ErrBadTOTP, t.T0)
	case t.Drift < -maxDrift || t.Drift > maxDrift:
		return fmt.Errorf("%w: drift %d", ErrBadTOTP, t.Drift)
	case t.LastT < -1:
		return fmt.Errorf("%w: last counter %d", ErrBadTOTP, t.LastT)
	}
	return nil
}

// Counter returns the counter of now, ⌊(now − T0) / Step⌋ (negative
// before T0), without drift. t must be valid.
func (t TOTP) Counter(now time.Time) int64 {
	d := now.Unix() - t.T0
	c := d / t.Step
	if d%t.Step != 0 && d < 0 {
		c-- // floor, as django-otp's //, not Go's truncation
	}
	return c
}

// Code returns the code of counter c, or "" when t is not valid or c is
// negative.
func (t TOTP) Code(c int64) string {
	if t.Validate() != nil || c < 0 {
		return ""
	}
	return t.code(Base32(t.Secret), c)
}

// code is RFC 4226's HOTP of the secret (given in base32, as pquerna/otp
// takes it) and counter c ≥ 0.
func (t TOTP) code(secret32 string, c int64) string {
	code, err := hotp.GenerateCodeCustom(secret32, uint64(c), hotp.ValidateOpts{
		Digits:    otp.Digits(t.Digits),
		Algorithm: otp.AlgorithmSHA1,
	})
	if err != nil {
		return "" // cannot happen: Base32 made secret32
	}
	return code
}

// Check reports whether code is the code of a counter c with
// |c − (Counter(now) + Drift)| ≤ 1 and c > LastT, and returns c, which the
// caller must record as LastT so that the code is not accepted again.
// Drift is left as it is (API.md), unlike django-otp, which moves it.
//
// A code is Digits ASCII digits; spaces are ignored (apps show "123 456").
// All three candidate codes are computed and compared in constant time,
// with no early exit, so the time taken does not tell whether a code was
// close or which step it matched; a malformed code or an invalid t takes
// the same path and fails.
func (t TOTP) Check(code string, now time.Time) (counter int64, ok bool) {
	return t.check(code, now, subtle.ConstantTimeCompare)
}

// check is Check with the comparison passed in, so that a test can count
// the comparisons.
func (t TOTP) check(code string, now time.Time, equal func(a, b []byte) int) (counter int64, ok bool) {
	valid := t.Validate() == nil
	if !valid {
		// Still three comparisons, of codes that cannot match.
		t = TOTP{Secret: make([]byte, SecretSize), Step: DefaultStep, Digits: DefaultDigits}
	}
	in, wellFormed := digitsOf(code, t.Digits)
	secret32 := Base32(t.Secret)
	base := t.Counter(now) + t.Drift
	matched := 0
	for c := base - window; c <= base+window; c++ {
		usable := 0
		if valid && wellFormed && c >= 0 && c > t.LastT { // public facts, not the code's
			usable = 1
		}
		want := t.code(secret32, max(c, 0))
		m := equal(in, []byte(want)) & usable
		// The lowest matching counter wins, as in django-otp, which tries
		// counters upwards; selected without a branch on the match.
		take := int64(m &^ matched)
		counter = c&-take | counter&^-take
		matched |= m
	}
	if matched == 0 {
		return 0, false
	}
	return counter, true
}

// digitsOf returns code without spaces, and whether that is exactly n
// ASCII digits. The result always has n bytes, so that a malformed code
// is compared as long as a good one.
func digitsOf(code string, n int) ([]byte, bool) {
	out := make([]byte, 0, n)
	ok := true
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == ' ':
		case '0' <= c && c <= '9' && len(out) < n:
			out = append(out, c)
		default:
			ok = false
		}
	}
	if len(out) != n {
		ok = false
		out = append(out, make([]byte, n-len(out))...)
	}
	return out, ok
}
