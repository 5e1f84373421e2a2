package djangoimport

import (
	"bytes"
	"fmt"
	"slices"

	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// SealFactors sets the MFA of each user with django-otp factors to their
// stored form under key: the authenticator's secret sealed for its user
// (SealTOTP), the static tokens as keyed hashes (SetRecoveryCodes), each
// marked as brought from Django, so that import --update may bring them up
// to date later without touching factors the user set up in authsvc.
func (d *Dump) SealFactors(key secret.Key) error {
	for i := range d.Users {
		u := &d.Users[i]
		f, ok := d.Factors[u.Username]
		if !ok {
			continue
		}
		m, err := f.seal(key, u.Username)
		if err != nil {
			return fmt.Errorf("user %q: %w", u.Username, err)
		}
		u.MFA = m
	}
	return nil
}

// seal returns f's stored form for username under key; nil when f holds
// no usable factor (a static device without tokens).
func (f *Factors) seal(key secret.Key, username string) (*users.Factors, error) {
	m := &users.Factors{}
	if f.TOTP != nil {
		t, err := users.SealTOTP(secret.NewKeyring(key), username, *f.TOTP)
		if err != nil {
			return nil, err
		}
		t.FromDjango = true
		m.TOTP = t
	}
	if len(f.RecoveryCodes) > 0 {
		if err := m.SetRecoveryCodes(key, f.RecoveryCodes); err != nil {
			return nil, err
		}
		m.RecoveryFromDjango = true
	}
	if m.TOTP == nil && len(m.RecoveryCodes) == 0 {
		return nil, nil
	}
	return m, nil
}

// A FactorsUpdate is what import --update makes of a user's second
// factors (UpdateFactors).
type FactorsUpdate struct {
	// MFA is the user's factors after the update.
	MFA *users.Factors
	// Changed reports that the factors changed as a new enrolment or a
	// removal changes them: an authenticator added, replaced or removed,
	// recovery codes added, replaced or removed. The user's sessions must
	// end then, as a password change ends them. A newer last_t or drift,
	// or recovery codes used up on either side, change nothing of the
	// kind.
	Changed bool
	// Imported counts the devices the factors now follow.
	Imported int
	// Skipped names each device left out, and why.
	Skipped []string
}

// UpdateFactors brings stored, the factors of username as its directory
// holds them, up to date with f, its django-otp devices in a newer dump
// (nil: none), under key, the import's. Only factors an import brought
// (FromDjango, RecoveryFromDjango) follow Django; factors the user set up
// in authsvc are kept, and the Django devices they stand in the way of
// are skipped. stored is not modified.
//
// An authenticator whose device is unchanged in Django (the same key,
// step, t0 and digits) keeps its sealed secret; its last_t is the later of
// authsvc's and Django's, so a code used on either side is never accepted
// again, and its drift is Django's, the one learned last (authsvc never
// moves it). A device with another key replaces it; one gone from Django
// removes it.
//
// Recovery codes are matched by their keyed hashes. While the stored codes
// and Django's tokens share any, they are one device, and the codes kept
// are those still unused on both sides; a token added to that device in
// Django since is therefore not taken, since it cannot be told from one
// used in authsvc, and a used code must never come back. Tokens that share
// none with the stored codes are new (Django generated them again) and
// replace them. Once every imported code is used in authsvc, none comes
// back until the static device vanishes from Django.
func (f *Factors) UpdateFactors(key secret.Key, username string, stored *users.Factors) (FactorsUpdate, error) {
	if f == nil {
		f = &Factors{}
	}
	out := stored.Clone()
	if out == nil {
		out = &users.Factors{}
	}
	var up FactorsUpdate
	ring := secret.NewKeyring(key)

	switch s, d := out.TOTP, f.TOTP; {
	case s != nil && !s.FromDjango:
		if d != nil {
			up.Skipped = append(up.Skipped, fmt.Sprintf("a TOTP device of %q: the user enrolled an authenticator in authsvc, which is kept", username))
		}
	case d == nil:
		if s != nil {
			out.TOTP, up.Changed = nil, true
		}
	default:
		up.Imported++
		if s != nil {
			if t, _, err := s.Open(ring, username); err == nil && bytes.Equal(t.Secret, d.Secret) && t.Step == d.Step && t.T0 == d.T0 && t.Digits == d.Digits {
				s.LastT, s.Drift = max(s.LastT, d.LastT), d.Drift
				break
			}
		}
		t, err := users.SealTOTP(ring, username, *d)
		if err != nil {
			return FactorsUpdate{}, err
		}
		t.FromDjango = true
		out.TOTP, up.Changed = t, true
	}

	switch {
	case len(out.RecoveryCodes) > 0 && !out.RecoveryFromDjango:
		for range f.StaticDevices {
			up.Skipped = append(up.Skipped, fmt.Sprintf("a static device of %q: the user has recovery codes from authsvc, which are kept", username))
		}
	case len(f.RecoveryCodes) == 0:
		up.Imported += f.StaticDevices // none, or devices without tokens
		if len(out.RecoveryCodes) > 0 {
			up.Changed = true
		}
		out.RecoveryCodes, out.RecoveryKeyID, out.RecoveryFromDjango = nil, "", false
	default:
		up.Imported += f.StaticDevices
		var dumped users.Factors
		if err := dumped.SetRecoveryCodes(key, f.RecoveryCodes); err != nil {
			return FactorsUpdate{}, err
		}
		if out.RecoveryFromDjango && len(out.RecoveryCodes) == 0 {
			break // every imported code used in authsvc
		}
		if out.RecoveryFromDjango && out.RecoveryKeyID == key.ID() {
			still := slices.DeleteFunc(slices.Clone(out.RecoveryCodes), func(h string) bool { return !slices.Contains(dumped.RecoveryCodes, h) })
			if len(still) > 0 {
				out.RecoveryCodes = still
				break
			}
		}
		out.RecoveryCodes, out.RecoveryKeyID, out.RecoveryFromDjango, up.Changed = dumped.RecoveryCodes, dumped.RecoveryKeyID, true, true
	}

	if out.TOTP == nil && out.PendingTOTP == nil && len(out.RecoveryCodes) == 0 && !out.RecoveryFromDjango {
		out = nil
	}
	up.MFA = out
	return up, nil
}
