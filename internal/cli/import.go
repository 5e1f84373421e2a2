package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"authsvc/internal/djangoimport"
	"authsvc/internal/password"
	"authsvc/internal/secret"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"authsvc/internal/users/postgres"
)

// importOptions are user import's flags and argument.
type importOptions struct {
	from, path         string // --from, and the file to import
	dryRun, update     bool
	store, storePrefix string // where imported tokens go
	tokenTTL           time.Duration
	// keyPath is the secret key file whose key fingerprints the Django
	// hashes, seals the TOTP secrets and hashes the recovery codes
	// (--from django).
	keyPath string
}

// An importTally counts what an import did with one kind of record.
type importTally struct{ imported, updated, unchanged, dead, skipped int }

// errSomeSkipped: an import left records out; each was reported on stderr.
var errSomeSkipped = errors.New("some records were not imported (see above)")

// errUnchanged: an --update change found nothing to change; the user is
// not rewritten.
var errUnchanged = errors.New("unchanged")

// importUsers adds the users of a Django dumpdata file, or of an authsvc
// users file (to move it into PostgreSQL), leaving existing usernames
// alone or, with --update, bringing them up to date (API.md, Moving from
// Django); then it imports the dump's DRF keys into the token store. It
// reports every record it leaves out on stderr, one line each, prints one
// summary line, and then fails (exit 1) if it left any out. A dry run
// does all of it but the writes.
func importUsers(ctx context.Context, dir importTarget, opt importOptions, stdout, stderr io.Writer) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	held, err := dir.List(ctx)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	byName := make(map[string]users.User, len(held))
	for _, u := range held {
		byName[u.Username] = u
	}
	dump, key, err := readImport(opt, held, dir, now, stderr)
	if err != nil {
		return err
	}
	warnSlowHashes("user import", dump.Users, stderr)

	// What to do with each user: add it, leave it alone, or update it.
	var leftAlone, notOurs []string
	rehash := make(map[string]bool) // users whose hash will be written
	for _, u := range dump.Users {
		h, exists := byName[u.Username]
		switch {
		case !exists:
			rehash[u.Username] = true
		case !opt.update:
			leftAlone = append(leftAlone, u.Username)
		case h.DjangoHash == "":
			notOurs = append(notOurs, u.Username)
		case h.DjangoHash != u.DjangoHash:
			rehash[u.Username] = true
		}
	}
	if err := dump.WrapLegacy(password.DefaultHashPolicy(), rehash); err != nil {
		return fmt.Errorf("user import: %w", err)
	}
	// Only now, their legacy hashes wrapped, are the users fit to write.
	var added []users.User
	changes := make(map[string]func(*users.User) error)
	var mu sync.Mutex // over factorUpdates, in case a directory runs changes at once
	factorUpdates := make(map[string]djangoimport.FactorsUpdate)
	for _, u := range dump.Users {
		_, exists := byName[u.Username]
		switch {
		case !exists:
			added = append(added, u)
		case opt.update:
			changes[u.Username] = updateFromDjango(u, dump.Factors[u.Username], key, now, func(up djangoimport.FactorsUpdate) {
				mu.Lock()
				defer mu.Unlock()
				factorUpdates[u.Username] = up // a change run again replaces it
			})
		}
	}

	// The token store is reached before anything is written, so that a
	// store that is down stops the import whole.
	store, closeStore, err := openImportStore(ctx, opt, len(dump.Tokens) > 0)
	if err != nil {
		return err
	}
	defer closeStore()

	var failed map[string]error
	var raced []string // added by someone else since the List above
	after := byName    // the users as the import leaves them
	if opt.dryRun {
		after, failed = simulateUpdates(byName, added, changes)
	} else {
		if raced, err = dir.AddAll(ctx, added); err != nil {
			return err
		}
		if len(changes) > 0 {
			if failed, err = dir.UpdateAll(ctx, changes); err != nil {
				return err
			}
		}
		if after, err = usersByName(ctx, dir); err != nil {
			return err
		}
	}

	for _, s := range dump.Skipped {
		fmt.Fprintf(stderr, "authsvc: user import: skipped %s\n", printable(s.String()))
	}
	// Factors count per django-otp device: a TOTP device and a static
	// device count one each. A users file's count alike: an authenticator
	// and a user's recovery codes, one each.
	factorTally := importTally{skipped: countSkips(dump.Skipped, "second factor")}
	factorsOf := func(name string) int { return dump.Factors[name].Devices() }
	if opt.from == "file" {
		copied := make(map[string]*users.Factors, len(dump.Users))
		for _, u := range dump.Users {
			copied[u.Username] = u.MFA
		}
		factorsOf = func(name string) int { return countFactors(copied[name]) }
	}
	skipFactors := func(name, why string) {
		if n := factorsOf(name); n > 0 {
			factorTally.skipped += n
			fmt.Fprintf(stderr, "authsvc: user import: skipped %s of %q: %s\n", fmt.Sprintf("%d %s", n, plural(n, "second factor", "second factors")), name, why)
		}
	}
	leftAlone = append(leftAlone, raced...)
	for _, name := range leftAlone {
		fmt.Fprintf(stderr, "authsvc: user import: left alone: user %q already exists\n", name)
		skipFactors(name, "the user is left alone")
	}
	for _, name := range notOurs {
		fmt.Fprintf(stderr, "authsvc: user import: updated user %q but its password: user import did not create it\n", name)
		skipFactors(name, "user import did not create that user, and never touches its factors")
	}
	userTally := importTally{
		imported: len(added) - len(raced),
		skipped:  len(leftAlone) + countSkips(dump.Skipped, "auth.user"),
	}
	isRaced := make(map[string]bool, len(raced))
	for _, name := range raced {
		isRaced[name] = true
	}
	for _, u := range added {
		if !isRaced[u.Username] {
			factorTally.imported += factorsOf(u.Username)
		}
	}
	isNotOurs := make(map[string]bool, len(notOurs))
	for _, name := range notOurs {
		isNotOurs[name] = true
	}
	for _, name := range slices.Sorted(maps.Keys(changes)) {
		switch err := failed[name]; {
		case err == nil || errors.Is(err, errUnchanged):
			if err == nil {
				userTally.updated++
			} else {
				userTally.unchanged++
			}
			if isNotOurs[name] {
				break
			}
			up := factorUpdates[name]
			if up.Changed {
				factorTally.updated += up.Imported
			} else {
				factorTally.unchanged += up.Imported
			}
			factorTally.skipped += len(up.Skipped)
			for _, s := range up.Skipped {
				fmt.Fprintf(stderr, "authsvc: user import: skipped %s\n", printable(s))
			}
		default: // deleted meanwhile, or refused by the directory
			userTally.skipped++
			factorTally.skipped += factorsOf(name)
			fmt.Fprintf(stderr, "authsvc: user import: skipped the update of user %q: %v\n", name, err)
		}
	}

	// Keys go only to users the importer made from the same Django users:
	// added now, or updated and carrying a Django hash's fingerprint.
	alone := make(map[string]bool, len(leftAlone))
	for _, name := range leftAlone {
		alone[name] = true
	}
	owners := make(map[string]users.User)
	for _, u := range dump.Users {
		if a, ok := after[u.Username]; ok && !alone[u.Username] && a.DjangoHash != "" {
			owners[u.Username] = a
		}
	}
	tokenTally, err := importTokens(ctx, store, dump.Tokens, owners, opt, now, stderr)
	tokenTally.skipped += countSkips(dump.Skipped, "authtoken.token")

	summary := fmt.Sprintf("%s into %s: users %d imported, %d updated, %d unchanged, %d skipped; tokens %d imported, %d updated, %d left dead, %d skipped; factors %d imported, %d updated, %d unchanged, %d skipped",
		opt.path, dir, userTally.imported, userTally.updated, userTally.unchanged, userTally.skipped,
		tokenTally.imported, tokenTally.updated, tokenTally.dead, tokenTally.skipped,
		factorTally.imported, factorTally.updated, factorTally.unchanged, factorTally.skipped)
	if opt.dryRun {
		fmt.Fprintf(stdout, "dry run: would import %s; nothing written\n", summary)
	} else {
		fmt.Fprintf(stdout, "imported %s\n", summary)
	}
	if err != nil {
		return err
	}
	if userTally.skipped+tokenTally.skipped+factorTally.skipped > 0 {
		return errSomeSkipped
	}
	return nil
}

// readImport reads the file to import: an authsvc users file, validated
// whole as the server loads it, or a Django dump, whose users' Django
// hashes it fingerprints and whose second factors it seals or hashes,
// under the secret key it returns (importKey), and whose legacy fast
// hashes it leaves for WrapLegacy. The key is zero for a users file.
func readImport(opt importOptions, held []users.User, dest fmt.Stringer, now time.Time, stderr io.Writer) (*djangoimport.Dump, secret.Key, error) {
	if opt.from == "file" {
		list, err := users.ReadFile(opt.path)
		if err != nil {
			return nil, secret.Key{}, fmt.Errorf("user import: %w", err)
		}
		if err := checkCopiedFactors(opt, list, dest); err != nil {
			return nil, secret.Key{}, err
		}
		return &djangoimport.Dump{Users: list}, secret.Key{}, nil
	}
	data, err := os.ReadFile(opt.path)
	if err != nil {
		return nil, secret.Key{}, err
	}
	dump, err := djangoimport.Read(data, now)
	if err != nil {
		return nil, secret.Key{}, fmt.Errorf("user import: %s: %w", opt.path, err)
	}
	key, err := importKey(opt, held, stderr)
	if err != nil {
		return nil, secret.Key{}, err
	}
	dump.Fingerprint(key)
	if err := dump.SealFactors(key); err != nil {
		return nil, secret.Key{}, fmt.Errorf("user import: %w", err)
	}
	return dump, key, nil
}

// checkCopiedFactors refuses, in one line naming both key IDs, a users
// file whose second factors the destination's key cannot open: serve
// would refuse the destination then (checkSecretKeys), and only the
// source's key would mend it. The destination's key is opt.keyPath, the
// --secret-key-file serve there is given (by default authsvc.key beside a
// users file; none with PostgreSQL unless given). It reads the key file
// and never creates one: a new key opens nothing already sealed.
func checkCopiedFactors(opt importOptions, list []users.User, dest fmt.Stringer) error {
	need := make(map[string]int)
	for _, u := range list {
		users.TallyKeyIDs(need, u.MFA)
	}
	if len(need) == 0 {
		return nil
	}
	var keys secret.Keyring
	if opt.keyPath != "" {
		key, err := secret.Load(opt.keyPath)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("user import: %w", err)
		default:
			keys = secret.NewKeyring(key)
		}
	}
	missing, n := keysMissing(need, keys)
	switch {
	case len(missing) == 0:
		return nil
	case opt.keyPath == "":
		return fmt.Errorf("user import: %s holds second factors of %d users sealed under key %s, and %s has no secret key to open them: give that key's file with --secret-key-file; nothing written", opt.path, n, strings.Join(missing, ", "), dest)
	case keys.Current().IsZero():
		return fmt.Errorf("user import: %s holds second factors of %d users sealed under key %s, and the secret key file %s of %s does not exist: put that key's file there, or give it with --secret-key-file; nothing written", opt.path, n, strings.Join(missing, ", "), opt.keyPath, dest)
	}
	return fmt.Errorf("user import: %s holds second factors of %d users sealed under key %s, which the secret key of %s (key %s, %s) cannot open: give that key's file with --secret-key-file, or run user rekey on the source first; nothing written", opt.path, n, strings.Join(missing, ", "), dest, keys.Current().ID(), opt.keyPath)
}

// importKey returns the secret key that fingerprints Django hashes and
// seals or hashes their second factors: the one in opt.keyPath, created
// there when missing (a dry run makes one up and writes nothing). It refuses a key other than the one the directory's
// imported users were fingerprinted under, and a missing key file when
// there are such users: a new key would make every Django hash look
// changed, and end every imported user's sessions.
func importKey(opt importOptions, held []users.User, stderr io.Writer) (secret.Key, error) {
	var under string // the key ID of the directory's fingerprints
	for _, u := range held {
		if u.DjangoHash != "" {
			under = users.DjangoHashKeyID(u.DjangoHash)
			break
		}
	}
	key, err := secret.Load(opt.keyPath)
	switch {
	case errors.Is(err, fs.ErrNotExist) && under != "":
		return secret.Key{}, fmt.Errorf("user import: the secret key file %s does not exist, and the users were imported under key %s: give that key's file with --secret-key-file", opt.keyPath, under)
	case errors.Is(err, fs.ErrNotExist) && opt.dryRun:
		fmt.Fprintf(stderr, "authsvc: user import: would create the secret key file %s; every later import of these users needs it\n", opt.keyPath)
		return secret.Generate()
	case errors.Is(err, fs.ErrNotExist):
		var created bool
		if key, created, err = secret.LoadOrCreate(opt.keyPath); err != nil {
			return secret.Key{}, fmt.Errorf("user import: %w", err)
		}
		if created {
			fmt.Fprintf(stderr, "authsvc: user import: created the secret key file %s (key %s); every later import of these users needs it\n", opt.keyPath, key.ID())
		}
	case err != nil:
		return secret.Key{}, fmt.Errorf("user import: %w", err)
	}
	if under != "" && under != key.ID() {
		return secret.Key{}, fmt.Errorf("user import: the users were imported under secret key %s, not %s (%s): give that key's file with --secret-key-file", under, key.ID(), opt.keyPath)
	}
	return key, nil
}

// updateFromDjango returns the --update change that brings a user up to
// date with d, its record in a newer dump: name, email, groups and flags
// always; the hash and the second factors only when the user was imported
// (it has a DjangoHash). The hash is taken when the Django hash changed
// since; the factors follow factors, the user's django-otp devices under
// key (djangoimport.Factors.UpdateFactors), and report what they did to
// outcome. A changed hash, or factors added, replaced or removed, end the
// user's sessions as a password change ends them. A user deactivated in
// Django is disabled, and its sessions end. errUnchanged when nothing
// changes.
func updateFromDjango(d users.User, factors *djangoimport.Factors, key secret.Key, now time.Time, outcome func(djangoimport.FactorsUpdate)) func(*users.User) error {
	return func(x *users.User) error {
		before := *x
		before.Groups = slices.Clone(x.Groups)
		x.Name, x.Email, x.Groups, x.Admin = d.Name, d.Email, d.Groups, d.Admin
		endSessions := false
		if x.DjangoHash != "" {
			// A user enrolled in authsvc itself (no DjangoHash) never
			// loses a factor to an import.
			up, err := factors.UpdateFactors(key, x.Username, x.MFA)
			if err != nil {
				return err
			}
			outcome(up)
			x.MFA, endSessions = up.MFA, up.Changed
		}
		if x.DjangoHash != "" && x.DjangoHash != d.DjangoHash {
			x.PasswordHash, x.DjangoHash = d.PasswordHash, d.DjangoHash
			endSessions = true
		}
		if endSessions {
			x.PasswordGeneration++
			x.TokensAfter = later(x.TokensAfter, now)
		}
		if d.Disabled && !x.Disabled {
			x.TokensAfter = later(x.TokensAfter, now)
		}
		x.Disabled = d.Disabled
		if x.Name == before.Name && x.Email == before.Email && slices.Equal(x.Groups, before.Groups) &&
			x.Admin == before.Admin && x.Disabled == before.Disabled && x.PasswordHash == before.PasswordHash &&
			reflect.DeepEqual(x.MFA, before.MFA) {
			return errUnchanged
		}
		return nil
	}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// simulateUpdates returns the users as an import would leave them, held
// updated by changes and added added, without writing: what a dry run
// reports. failed is as UpdateAll's.
func simulateUpdates(held map[string]users.User, added []users.User, changes map[string]func(*users.User) error) (map[string]users.User, map[string]error) {
	after := make(map[string]users.User, len(held)+len(added))
	for name, u := range held {
		after[name] = u
	}
	failed := make(map[string]error)
	for name, change := range changes {
		u := after[name]
		u.Groups = slices.Clone(u.Groups)
		if err := change(&u); err != nil {
			failed[name] = err
			continue
		}
		after[name] = u
	}
	for _, u := range added {
		after[u.Username] = u
	}
	return after, failed
}

// usersByName returns dir's users by name.
func usersByName(ctx context.Context, dir importTarget) (map[string]users.User, error) {
	list, err := dir.List(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]users.User, len(list))
	for _, u := range list {
		byName[u.Username] = u
	}
	return byName, nil
}

// countFactors counts f's second factors as the import's summary does:
// an authenticator and a set of recovery codes, one each.
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

// countSkips counts the skips of records of model.
func countSkips(skips []djangoimport.Skip, model string) int {
	n := 0
	for _, s := range skips {
		if s.Model() == model {
			n++
		}
	}
	return n
}

// openImportStore opens the token store that opt names, when there are
// tokens to import and it can keep them past the import: not the memory
// store (nil then).
func openImportStore(ctx context.Context, opt importOptions, haveTokens bool) (tokens.Store, func(), error) {
	if !haveTokens || opt.store == "memory" {
		return nil, func() {}, nil
	}
	store, _, closeStore, err := openStore("user import", opt.store, opt.storePrefix, throttle.DefaultConfig())
	if err != nil {
		return nil, nil, err
	}
	done := func() { closeStore() }
	if err := store.Ping(ctx); err != nil {
		done()
		return nil, nil, fmt.Errorf("user import: token store: %w", err)
	}
	return store, done, nil
}

// importTokens imports the DRF keys into store (nil: the memory store,
// which cannot keep them, and they are skipped), each as a session of its
// user in owners, created at its created time and expiring opt.tokenTTL
// from now. Keys of users not in owners are skipped; keys created before
// their user's cut-off are dead already and left so.
func importTokens(ctx context.Context, store tokens.Store, keys []djangoimport.Token, owners map[string]users.User, opt importOptions, now time.Time, stderr io.Writer) (importTally, error) {
	var tally importTally
	if len(keys) == 0 {
		return tally, nil
	}
	if store == nil {
		tally.skipped = len(keys)
		fmt.Fprintf(stderr, "authsvc: user import: skipped %d tokens: the memory token store cannot keep them past the import (give --store redis://…)\n", len(keys))
		return tally, nil
	}
	var expires time.Time
	if opt.tokenTTL > 0 {
		expires = now.Add(opt.tokenTTL).Truncate(time.Second) // as a login's
	}
	var batch []tokens.Imported
	for _, t := range keys {
		u, ok := owners[t.Username]
		switch {
		case !ok:
			tally.skipped++
			fmt.Fprintf(stderr, "authsvc: user import: skipped the token of %q: user import did not create that user from this Django user\n", t.Username)
			continue
		case t.Created.Before(u.TokensAfter):
			tally.dead++ // ended in authsvc after Django made it
			continue
		}
		d, err := tokens.DigestOf(t.Key)
		if err != nil { // the parser let only DRF's form through
			return tally, fmt.Errorf("user import: the token of %q: %w", t.Username, err)
		}
		batch = append(batch, tokens.Imported{Digest: d, Session: tokens.Session{
			Username:  t.Username,
			Stamp:     users.SessionGeneration(u.PasswordGeneration),
			IssuedAt:  t.Created,
			ExpiresAt: expires,
			ID:        tokens.NewSessionID(),
		}})
	}
	outcomes, err := store.Import(ctx, batch, now, opt.dryRun)
	for i, o := range outcomes {
		switch o {
		case tokens.ImportAdded:
			tally.imported++
		case tokens.ImportRefreshed:
			tally.updated++
		case tokens.ImportDead:
			tally.dead++
		default:
			tally.skipped++
			fmt.Fprintf(stderr, "authsvc: user import: skipped the token of %q: its user's password changed meanwhile\n", batch[i].Session.Username)
		}
	}
	if err != nil {
		return tally, fmt.Errorf("user import: token store: %w", err)
	}
	return tally, nil
}

// openImportTarget opens the directory usersPath names for an import, as
// openCLIDirectory does; a dry run opens it read only, and takes a
// database no authsvc has set up for one that holds no users, which it
// must not set up either. done releases it.
func openImportTarget(ctx context.Context, usersPath string, dryRun bool) (dir importTarget, done func(), err error) {
	dir, done, err = openCLIDirectory(ctx, usersPath, dryRun)
	if dryRun && errors.Is(err, postgres.ErrNoSchema) {
		return noUsersYet{name: postgres.Name(usersPath)}, func() {}, nil
	}
	return dir, done, err
}

// importTarget is what an import needs of a directory.
type importTarget interface {
	fmt.Stringer
	AddAll(ctx context.Context, users []users.User) (existing []string, err error)
	UpdateAll(ctx context.Context, changes map[string]func(*users.User) error) (failed map[string]error, err error)
	List(ctx context.Context) ([]users.User, error)
}

// noUsersYet stands for a database no authsvc has set up, in a dry run:
// it holds no users, and takes no write.
type noUsersYet struct{ name string }

func (n noUsersYet) String() string                           { return n.name }
func (noUsersYet) List(context.Context) ([]users.User, error) { return nil, nil }
func (noUsersYet) AddAll(context.Context, []users.User) ([]string, error) {
	return nil, errors.New("dry run: nothing is written")
}
func (noUsersYet) UpdateAll(context.Context, map[string]func(*users.User) error) (map[string]error, error) {
	return nil, errors.New("dry run: nothing is written")
}

// defaultKeyFile is the secret key file's name beside a users file, when
// --secret-key-file does not name one.
const defaultKeyFile = "authsvc.key"
