package djangoimport

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// ErrUnchanged: an update found nothing to change; the user is not
// rewritten.
var ErrUnchanged = errors.New("unchanged")

// A Plan is what an import does to a directory, worked out from the dump
// and the users the directory holds before anything is written: the
// users to add, the changes that bring users up to date (--update), the
// users left alone, and what goes with them, their second factors and
// DRF keys. The directory may change between the plan and its writes;
// the writes' outcome says what was done (Owners, FactorsUpdate).
type Plan struct {
	// Add are the dump's users whose names the directory does not hold,
	// their legacy hashes wrapped: ready to write.
	Add []users.User
	// Update are the changes that bring users the directory holds up to
	// date with the dump, by username (NewPlan's update): for
	// Directory.UpdateAll, or Simulate. A change that finds nothing to
	// change returns ErrUnchanged.
	Update map[string]func(*users.User) error
	// LeftAlone names the dump's users the directory holds, when the
	// import does not update them.
	LeftAlone []string
	// NotOurs names the users updated but for their password and second
	// factors: the directory holds them, but no import made them (they
	// have no DjangoHash).
	NotOurs []string

	dump *Dump

	mu      sync.Mutex               // over factors, in case a directory runs changes at once
	factors map[string]FactorsUpdate // what the changes made of the users' factors
}

// NewPlan plans the import of dump into a directory that holds held: a
// user whose name is free is added; one whose name is taken is left
// alone, or with update brought up to date (see Plan.Update). Only the
// users whose hash will be written have their legacy hashes wrapped,
// under the default hash policy: a user whose Django hash is unchanged
// keeps its stored hash, and is not worth a policy hash. key is the one
// dump's factors are sealed under (Dump.SealFactors); now is the import's
// time, the cut-off of the sessions an update ends.
func NewPlan(dump *Dump, held []users.User, update bool, key secret.Key, now time.Time) (*Plan, error) {
	byName := make(map[string]users.User, len(held))
	for _, u := range held {
		byName[u.Username] = u
	}
	p := &Plan{dump: dump, Update: make(map[string]func(*users.User) error), factors: make(map[string]FactorsUpdate)}
	rehash := make(map[string]bool) // users whose hash will be written
	for _, u := range dump.Users {
		h, exists := byName[u.Username]
		switch {
		case !exists:
			rehash[u.Username] = true
		case !update:
			p.LeftAlone = append(p.LeftAlone, u.Username)
		case h.DjangoHash == "":
			p.NotOurs = append(p.NotOurs, u.Username)
		case h.DjangoHash != u.DjangoHash:
			rehash[u.Username] = true
		}
	}
	if err := dump.WrapLegacy(password.DefaultHashPolicy(), rehash); err != nil {
		return nil, err
	}
	// Only now, their legacy hashes wrapped, are the users fit to write.
	for _, u := range dump.Users {
		_, exists := byName[u.Username]
		switch {
		case !exists:
			p.Add = append(p.Add, u)
		case update:
			p.Update[u.Username] = p.updateFrom(u, key, now)
		}
	}
	return p, nil
}

// updateFrom returns the change that brings a user up to date with d, its
// record in a newer dump: name, email, groups and flags always; the hash
// and the second factors only when the user was imported (it has a
// DjangoHash). The hash is taken when the Django hash changed since; the
// factors follow the user's django-otp devices under key
// (Factors.UpdateFactors), and what they did is kept for FactorsUpdate. A
// changed hash, or factors added, replaced or removed, end the user's
// sessions as a password change ends them. A user deactivated in Django
// is disabled, and its sessions end. A user who is no longer an admin in
// Django loses their personal access tokens with the admin scope
// (users.SetAdmin). ErrUnchanged when nothing changes.
func (p *Plan) updateFrom(d users.User, key secret.Key, now time.Time) func(*users.User) error {
	factors := p.dump.Factors[d.Username]
	return func(x *users.User) error {
		before := *x
		before.Groups = slices.Clone(x.Groups)
		x.Name, x.Email, x.Groups = d.Name, d.Email, d.Groups
		users.SetAdmin(x, d.Admin) // a demotion ends the admin-scoped personal access tokens, as user edit's
		endSessions := false
		if x.DjangoHash != "" {
			// A user enrolled in authsvc itself (no DjangoHash) never
			// loses a factor to an import.
			up, err := factors.UpdateFactors(key, x.Username, x.MFA)
			if err != nil {
				return err
			}
			p.mu.Lock()
			p.factors[x.Username] = up // a change run again replaces it
			p.mu.Unlock()
			x.MFA, endSessions = up.MFA, up.Changed
		}
		if x.DjangoHash != "" && x.DjangoHash != d.DjangoHash {
			// Set in Django, by the user or by an administrator: which,
			// the dump does not say, so it ends the personal access
			// tokens as an operator's password does.
			x.PasswordHash, x.DjangoHash, x.AccessTokens = d.PasswordHash, d.DjangoHash, nil
			endSessions = true
		}
		if endSessions {
			x.PasswordGeneration++
			x.TokensAfter = users.Later(x.TokensAfter, now)
		}
		if d.Disabled && !x.Disabled {
			x.TokensAfter, x.AccessTokens = users.Later(x.TokensAfter, now), nil
		}
		x.Disabled = d.Disabled
		if x.Name == before.Name && x.Email == before.Email && slices.Equal(x.Groups, before.Groups) &&
			x.Admin == before.Admin && x.Disabled == before.Disabled && x.PasswordHash == before.PasswordHash &&
			reflect.DeepEqual(x.MFA, before.MFA) && len(x.AccessTokens) == len(before.AccessTokens) {
			return ErrUnchanged
		}
		return nil
	}
}

// FactorsUpdate returns what the change of the user named name made of
// its second factors, once it ran: zero when it did not run, or left the
// factors to the user (NotOurs).
func (p *Plan) FactorsUpdate(name string) FactorsUpdate {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.factors[name]
}

// FactorsOf counts the second factors the dump brings for the user named
// name, as the import's summary counts them: per django-otp device (a
// TOTP device and a static device, one each), or for a users file (Copy),
// an authenticator and a user's recovery codes, one each.
func (p *Plan) FactorsOf(name string) int {
	if p.dump.copied != nil {
		return countFactors(p.dump.copied[name])
	}
	return p.dump.Factors[name].Devices()
}

// countFactors counts f's second factors: an authenticator and a set of
// recovery codes, one each.
func countFactors(f *users.Factors) int {
	n := 0
	if f != nil && f.TOTP != nil {
		n++
	}
	if f != nil && len(f.RecoveryCodes) > 0 {
		n++
	}
	return n
}

// Simulate returns the users as the plan would leave held, the
// directory's users, without writing: what a dry run reports. failed is
// as Directory.UpdateAll's.
func (p *Plan) Simulate(held []users.User) (after map[string]users.User, failed map[string]error) {
	after = make(map[string]users.User, len(held)+len(p.Add))
	for _, u := range held {
		after[u.Username] = u
	}
	failed = make(map[string]error)
	for name, change := range p.Update {
		u := after[name]
		u.Groups = slices.Clone(u.Groups)
		if err := change(&u); err != nil {
			failed[name] = err
			continue
		}
		after[name] = u
	}
	for _, u := range p.Add {
		after[u.Username] = u
	}
	return after, failed
}

// Owners returns the users the dump's DRF keys go to, by name: those the
// import made from the same Django users, added now or updated, and
// carrying a Django hash's fingerprint, as after holds them, the
// directory's users once the plan is applied; never one of alone, the
// users the import left alone. A key of any other user is skipped.
func (p *Plan) Owners(after map[string]users.User, alone []string) map[string]users.User {
	leftAlone := make(map[string]bool, len(alone))
	for _, name := range alone {
		leftAlone[name] = true
	}
	owners := make(map[string]users.User)
	for _, u := range p.dump.Users {
		if a, ok := after[u.Username]; ok && !leftAlone[u.Username] && a.DjangoHash != "" {
			owners[u.Username] = a
		}
	}
	return owners
}
