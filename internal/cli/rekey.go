package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"sync"

	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// errRekeyUnchanged: a user's secrets were all under the new key already.
var errRekeyUnchanged = errors.New("already under the new key")

// A rekeyOptions is what user rekey's flags say.
type rekeyOptions struct {
	newKeyPath  string
	oldKeyPaths []string
	dryRun      bool
}

// rekeyTally is what a rekey did, or would do, for its summary.
type rekeyTally struct {
	resealed, current int // secrets re-sealed, and already under the new key
	// codesUnder counts, by key ID, the users whose recovery codes are
	// hashed under a key other than the new one.
	codesUnder map[string]int
	// djangoUnder counts, by key ID, the users whose Django hash
	// fingerprint (User.DjangoHash) is under a key other than the new one.
	djangoUnder map[string]int
	failed      map[string]error // users left as they were, and why
}

// rekeyUsers re-seals the TOTP secrets of dir's users under the key in
// opt.newKeyPath, opening them with it or one of the old keys, and prints
// a summary. See rekeyAbout.
func rekeyUsers(ctx context.Context, dir users.Directory, opt rekeyOptions, stdout, stderr io.Writer) error {
	// The users first: a directory that cannot be read is no reason to
	// create a key file.
	list, err := dir.List(ctx)
	if err != nil {
		return err
	}
	ring, err := rekeyRing(opt, stderr)
	if err != nil {
		return err
	}
	newID := ring.Current().ID()
	tally := rekeyTally{codesUnder: make(map[string]int), djangoUnder: make(map[string]int), failed: make(map[string]error)}
	changes := make(map[string]func(*users.User) error)
	var mu sync.Mutex
	resealed := make(map[string]int) // by the write, by username
	for _, u := range list {
		// Fingerprints, like recovery codes, cannot be made again without
		// what they fingerprint: user import checks them under their key.
		if id := users.DjangoHashKeyID(u.DjangoHash); u.DjangoHash != "" && id != newID {
			tally.djangoUnder[id]++
		}
		if u.MFA == nil {
			continue
		}
		if len(u.MFA.RecoveryCodes) > 0 && u.MFA.RecoveryKeyID != newID {
			tally.codesUnder[u.MFA.RecoveryKeyID]++
		}
		// Tried on the listed copy first: a dry run goes no further, and a
		// user whose secret does not open is left out of the write.
		n, err := resealFactors(ring, u.Username, u.MFA.Clone())
		switch {
		case err != nil:
			tally.failed[u.Username] = err
			continue
		case n > 0 && opt.dryRun:
			tally.resealed += n
		case n > 0:
			changes[u.Username] = func(x *users.User) error {
				// Again on the user as it is under the write's lock: it may
				// have enrolled or confirmed since the list.
				n, err := resealFactors(ring, x.Username, x.MFA)
				if err == nil && n == 0 {
					err = errRekeyUnchanged
				}
				mu.Lock()
				resealed[x.Username] = n
				mu.Unlock()
				return err
			}
		}
		tally.current += countTOTP(u.MFA) - n
	}
	if !opt.dryRun && len(changes) > 0 {
		failed, err := dir.UpdateAll(ctx, changes)
		if err != nil {
			return fmt.Errorf("user rekey: %w", err)
		}
		for name := range changes {
			switch err := failed[name]; {
			case err == nil:
				tally.resealed += resealed[name]
			case errors.Is(err, errRekeyUnchanged):
			case errors.Is(err, users.ErrNotFound):
				// Deleted since the list: nothing left to re-seal.
			default:
				tally.failed[name] = err
			}
		}
	}
	tally.print(dir, newID, opt, stdout, stderr)
	if n := len(tally.failed); n > 0 {
		return fmt.Errorf("user rekey: %d %s left as %s (the lines above say why)", n, plural(n, "user", "users"), plural(n, "it was", "they were"))
	}
	return nil
}

// rekeyRing loads the new key, created when missing (made up, and not
// written, by a dry run), and the old ones, which must exist.
func rekeyRing(opt rekeyOptions, stderr io.Writer) (secret.Keyring, error) {
	// The old keys first: a mistake in them is no reason to create a key file.
	var old []secret.Key
	for _, p := range opt.oldKeyPaths {
		k, err := secret.Load(p)
		if err != nil {
			return secret.Keyring{}, fmt.Errorf("user rekey: %w", err)
		}
		old = append(old, k)
	}
	current, err := secret.Load(opt.newKeyPath)
	switch {
	case errors.Is(err, fs.ErrNotExist) && opt.dryRun:
		fmt.Fprintf(stderr, "authsvc: user rekey: would create the secret key file %s (dry run: a key made up for it, not written)\n", opt.newKeyPath)
		current, err = secret.Generate()
	case errors.Is(err, fs.ErrNotExist):
		var created bool
		current, created, err = secret.LoadOrCreate(opt.newKeyPath)
		if err == nil && created {
			fmt.Fprintf(stderr, "authsvc: user rekey: created the secret key file %s (key %s)\n", opt.newKeyPath, current.ID())
		}
	}
	if err != nil {
		return secret.Keyring{}, fmt.Errorf("user rekey: %w", err)
	}
	return secret.NewKeyring(current, old...), nil
}

// resealFactors seals every TOTP secret of f that ring opens only with an
// old key again under ring's current key, in place, and returns how many
// it re-sealed. When a secret does not open, f is left as it was.
func resealFactors(ring secret.Keyring, username string, f *users.Factors) (int, error) {
	if f == nil {
		return 0, nil
	}
	type slot struct {
		name string
		p    **users.TOTPFactor
	}
	var resealed []slot
	var sealed []*users.TOTPFactor
	for _, s := range []slot{{"authenticator", &f.TOTP}, {"unconfirmed authenticator", &f.PendingTOTP}} {
		if *s.p == nil {
			continue
		}
		t, stale, err := (*s.p).Open(ring, username)
		if err != nil {
			return 0, fmt.Errorf("its %s: %w", s.name, err)
		}
		if !stale {
			continue
		}
		n, err := users.SealTOTP(ring, username, t)
		if err != nil {
			return 0, err
		}
		resealed, sealed = append(resealed, s), append(sealed, n)
	}
	for i, s := range resealed {
		*s.p = sealed[i]
	}
	return len(resealed), nil
}

// countTOTP returns how many TOTP secrets f holds.
func countTOTP(f *users.Factors) int {
	if f == nil {
		return 0
	}
	n := 0
	if f.TOTP != nil {
		n++
	}
	if f.PendingTOTP != nil {
		n++
	}
	return n
}

// print writes t's summary to stdout, and each user left as it was to
// stderr. Key IDs only: never a key.
func (t rekeyTally) print(dir users.Directory, newID string, opt rekeyOptions, stdout, stderr io.Writer) {
	verb := "re-sealed"
	if opt.dryRun {
		verb = "would re-seal"
	}
	fmt.Fprintf(stdout, "%s %d TOTP %s under key %s in %s; %d already under it\n",
		verb, t.resealed, plural(t.resealed, "secret", "secrets"), newID, dir, t.current)
	for _, id := range slices.Sorted(maps.Keys(t.codesUnder)) {
		n := t.codesUnder[id]
		fmt.Fprintf(stdout, "%d %s recovery codes hashed under key %s: they work while serve is given that key too (--old-secret-key-file)\n",
			n, plural(n, "user keeps", "users keep"), id)
	}
	for _, id := range slices.Sorted(maps.Keys(t.djangoUnder)) {
		n := t.djangoUnder[id]
		fmt.Fprintf(stdout, "%d %s Django hash fingerprints under key %s: user import needs that key's file (--secret-key-file)\n",
			n, plural(n, "user keeps", "users keep"), id)
	}
	if opt.dryRun {
		fmt.Fprintln(stdout, "dry run: nothing written")
	}
	for _, name := range slices.Sorted(maps.Keys(t.failed)) {
		fmt.Fprintf(stderr, "authsvc: user rekey: left user %q as it was: %v\n", name, t.failed[name])
	}
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
