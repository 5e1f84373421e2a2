package users

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Password reset links (API.md, "Password reset"): a link is a user's uid
// (the username, base64url) and a token of resetTokenBytes from a CSPRNG
// (base64url); the user's record keeps the token's SHA-256 and its
// expiry, never the token. A user has at most one live link: a newer one,
// a password change or a reset replaces or removes it, so older links
// are dead.

// resetTokenBytes is a reset token's entropy.
const resetTokenBytes = 32

// DefaultResetTTL is how long a reset link works unless told otherwise.
const DefaultResetTTL = time.Hour

// ErrBadResetLink: a reset link that is not the user's live one: wrong,
// used, expired, superseded, malformed, or of a user that is gone or
// disabled. One error for all, as the reply is one.
var ErrBadResetLink = errors.New("invalid or expired reset link")

// A ResetLink is a user's live password reset link as the record keeps it.
type ResetLink struct {
	Digest    string    `json:"digest"` // hex SHA-256 of the token's raw bytes
	ExpiresAt time.Time `json:"expires_at"`
	// Mailed is what versions before User.ResetMails kept of the mails:
	// read, and counted, but never written.
	Mailed []time.Time `json:"mailed,omitempty"`
}

// MaxResetMails is how many reset links are mailed to one user an hour at
// most, whatever the requests (API.md).
const MaxResetMails = 3

// ErrResetMailLimit: MaxResetMails links were mailed to the user within
// the last hour.
var ErrResetMailLimit = errors.New("reset links mailed to this user within the hour: at the limit")

// CheckResetLink returns why l cannot be a stored reset link, or nil.
func CheckResetLink(l *ResetLink) error {
	if l == nil {
		return nil
	}
	if _, err := hex.DecodeString(l.Digest); err != nil || len(l.Digest) != 2*sha256.Size {
		return errors.New("reset_link: digest: want the 64 hex characters of a SHA-256")
	}
	if l.ExpiresAt.IsZero() {
		return errors.New("reset_link: expires_at: missing")
	}
	return nil
}

// ResetUID returns the uid of a reset link of username: the name,
// base64url without padding (djoser's shape).
func ResetUID(username string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(username))
}

// ParseResetUID returns the username of uid, or ErrBadResetLink.
func ParseResetUID(uid string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(uid)
	if err != nil || len(b) == 0 || len(b) > 4*MaxUsernameLen {
		return "", ErrBadResetLink
	}
	return string(b), nil
}

// resetDigest returns the digest of a reset token as given in a link, or
// ErrBadResetLink unless it is resetTokenBytes in base64url.
func resetDigest(token string) ([sha256.Size]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) != resetTokenBytes {
		return [sha256.Size]byte{}, ErrBadResetLink
	}
	return sha256.Sum256(b), nil
}

// FormatResetURL fills pattern's {uid} and {token} (--reset-url).
func FormatResetURL(pattern, uid, token string) string {
	return strings.NewReplacer("{uid}", uid, "{token}", token).Replace(pattern)
}

// NewResetLink makes a reset link for the user named username, live until
// now+ttl, which replaces any older one (dead from then on), and returns
// its uid and token. A disabled user gets none: ErrDisabled.
func NewResetLink(ctx context.Context, d Directory, username string, ttl time.Duration, now time.Time) (uid, token string, err error) {
	return newResetLink(ctx, d, username, ttl, now, false)
}

// NewMailedResetLink is NewResetLink for a link to be mailed: it also
// counts the mail, and refuses with ErrResetMailLimit a user who was
// mailed MaxResetMails links within the hour before now, on any instance.
// A user without an email address gets none (ErrNoEmail).
func NewMailedResetLink(ctx context.Context, d Directory, username string, ttl time.Duration, now time.Time) (uid, token string, err error) {
	return newResetLink(ctx, d, username, ttl, now, true)
}

// ErrNoEmail: a link to be mailed to a user without an email address.
var ErrNoEmail = errors.New("user has no email address")

// newResetLink is NewResetLink, and NewMailedResetLink when mailed.
func newResetLink(ctx context.Context, d Directory, username string, ttl time.Duration, now time.Time, mailed bool) (uid, token string, err error) {
	var raw [resetTokenBytes]byte
	rand.Read(raw[:]) // never returns an error; crashes the program if the OS cannot supply randomness
	digest := sha256.Sum256(raw[:])
	change := func(u *User) error {
		if u.Disabled {
			return ErrDisabled
		}
		// The mails of the last hour, apart from the link: neither a
		// confirm nor a newer link resets the count.
		var mails []time.Time
		for _, at := range u.ResetMails {
			if now.Sub(at) < time.Hour {
				mails = append(mails, at)
			}
		}
		if u.ResetLink != nil { // an older version's count, kept in its link
			for _, at := range u.ResetLink.Mailed {
				if now.Sub(at) < time.Hour && !slices.ContainsFunc(mails, at.Equal) {
					mails = append(mails, at)
				}
			}
		}
		if mailed {
			switch {
			case u.Email == "":
				return ErrNoEmail
			case len(mails) >= MaxResetMails:
				return ErrResetMailLimit
			}
			mails = append(mails, now.UTC())
		}
		u.ResetLink = &ResetLink{Digest: hex.EncodeToString(digest[:]), ExpiresAt: now.Add(ttl).UTC()}
		u.ResetMails = mails
		return nil
	}
	if err := Update(ctx, d, username, change, ResetLinkOnly); err != nil {
		return "", "", err
	}
	return ResetUID(username), base64.RawURLEncoding.EncodeToString(raw[:]), nil
}

// ConfirmReset sets the password hash of the user a reset link names, if
// token is that user's live link at now: ErrBadResetLink otherwise, with
// nothing written. It has a password change's reach, as SetPassword: every
// session and personal access token of the user dies; the link is spent;
// the user's password lockouts are lifted as Unlock lifts them; second factors
// stay, so the next login still asks for one. The code lock after wrong
// second-factor codes stays too (CodesAfter is not moved): a mailbox's
// holder must not buy a fresh hundred guesses with each reset. The count
// of reset mails stays (ResetMails). The caller checks the new
// password against the policy and hashes it first: a weak one must not
// spend the link.
func ConfirmReset(ctx context.Context, d Directory, username, token, hash string, now time.Time) error {
	digest, err := resetDigest(token)
	if err != nil {
		return err
	}
	err = Update(ctx, d, username, func(u *User) error {
		l := u.ResetLink
		if u.Disabled || l == nil || !now.Before(l.ExpiresAt) {
			return ErrBadResetLink
		}
		want, err := hex.DecodeString(l.Digest)
		if err != nil || subtle.ConstantTimeCompare(want, digest[:]) != 1 {
			return ErrBadResetLink
		}
		at := now.UTC()
		u.PasswordHash, u.TokensAfter, u.AccessTokens, u.ResetLink = hash, NextCutoff(u.TokensAfter, at), nil, nil
		u.PasswordGeneration++
		u.FailuresAfter = at
		return nil
	})
	if errors.Is(err, ErrNotFound) {
		return ErrBadResetLink
	}
	if err != nil && !errors.Is(err, ErrBadResetLink) {
		return fmt.Errorf("reset %q: %w", username, err)
	}
	return err
}
