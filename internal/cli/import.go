package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"authsvc/internal/djangoimport"
	"authsvc/internal/secret"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"authsvc/internal/users/postgres"
	"authsvc/internal/users/usersfile"
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

// importFile imports the users of the file opt names into dir, leaving
// existing usernames alone or, with --update, bringing them up to date
// (API.md, Moving from Django), and then the dump's DRF keys into the
// token store: it reads the file (readImport), plans the import
// (djangoimport.NewPlan), applies the plan (applyImport) and reports what
// was done (importReport). A dry run does all of it but the writes: what
// it reports is the plan. Every record left out is reported on stderr,
// one line each, then one summary line on stdout; the import then fails
// (exit 1) if it left any out.
func importFile(ctx context.Context, dir importTarget, opt importOptions, e *env) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	held, err := dir.List(ctx)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	dump, key, err := readImport(opt, held, dir, now, e.stderr)
	if err != nil {
		return err
	}
	warnSlowHashes("user import", dump.Users, e.stderr)
	plan, err := djangoimport.NewPlan(dump, held, opt.update, key, now)
	if err != nil {
		return fmt.Errorf("user import: %w", err)
	}
	// The token store is reached before anything is written, so that a
	// store that is down stops the import whole.
	store, closeStore, err := openImportStore(ctx, opt, len(dump.Tokens) > 0)
	if err != nil {
		return err
	}
	defer closeStore()
	res, err := applyImport(ctx, dir, plan, held, opt.dryRun)
	if err != nil {
		return err
	}
	r := importReport{stderr: e.stderr}
	r.reportUsers(dump, plan, res)
	r.tokenTally, err = importTokens(ctx, store, dump.Tokens, plan.Owners(res.after, res.alone), opt, now, e.stderr)
	r.tokenTally.skipped += dump.CountSkipped("authtoken.token")
	r.summary(opt, dir, e.stdout)
	if err != nil {
		return err
	}
	if r.skipped() {
		return errSomeSkipped
	}
	return nil
}

// An importResult is what applying an import's plan did to the directory,
// or would do (a dry run).
type importResult struct {
	after  map[string]users.User // the users as the import leaves them
	raced  []string              // users of the plan's Add that someone else added first
	alone  []string              // users left alone: the plan's, and those raced
	failed map[string]error      // the changes that failed, as UpdateAll's
}

// applyImport writes plan's users to dir, the users added and the changes
// made, and returns what it did; a dry run writes nothing, and returns
// what the writes would do to held, dir's users (Plan.Simulate).
func applyImport(ctx context.Context, dir importTarget, plan *djangoimport.Plan, held []users.User, dryRun bool) (importResult, error) {
	if dryRun {
		after, failed := plan.Simulate(held)
		return importResult{after: after, alone: plan.LeftAlone, failed: failed}, nil
	}
	raced, err := dir.AddAll(ctx, plan.Add)
	if err != nil {
		return importResult{}, err
	}
	var failed map[string]error
	if len(plan.Update) > 0 {
		if failed, err = dir.UpdateAll(ctx, plan.Update); err != nil {
			return importResult{}, err
		}
	}
	after, err := usersByName(ctx, dir)
	if err != nil {
		return importResult{}, err
	}
	return importResult{after: after, raced: raced, alone: slices.Concat(plan.LeftAlone, raced), failed: failed}, nil
}

// An importReport tallies what an import did, and says on stderr, one
// line each, what it left out.
type importReport struct {
	stderr                             io.Writer
	userTally, tokenTally, factorTally importTally
}

// note writes one line of the import's on stderr.
func (r *importReport) note(format string, args ...any) {
	fmt.Fprintf(r.stderr, "authsvc: user import: "+format+"\n", args...)
}

// reportUsers tallies what applying plan did to the users (res) and to
// their second factors, and reports what it left out: the dump's records,
// the users left alone, and the updates that failed or left factors out.
func (r *importReport) reportUsers(dump *djangoimport.Dump, plan *djangoimport.Plan, res importResult) {
	for _, s := range dump.Skipped {
		r.note("skipped %s", printable(s.String()))
	}
	r.factorTally.skipped = dump.CountSkipped("second factor")
	for _, name := range res.alone {
		r.note("left alone: user %q already exists", name)
		r.skipFactors(plan, name, "the user is left alone")
	}
	for _, name := range plan.NotOurs {
		r.note("updated user %q but its password: user import did not create it", name)
		r.skipFactors(plan, name, "user import did not create that user, and never touches its factors")
	}
	r.userTally = importTally{
		imported: len(plan.Add) - len(res.raced),
		skipped:  len(res.alone) + dump.CountSkipped("auth.user"),
	}
	raced := set(res.raced)
	for _, u := range plan.Add {
		if !raced[u.Username] {
			r.factorTally.imported += plan.FactorsOf(u.Username)
		}
	}
	r.reportUpdates(plan, res.failed)
}

// skipFactors counts and reports the second factors the dump brings for
// the user named name as skipped, for why.
func (r *importReport) skipFactors(plan *djangoimport.Plan, name, why string) {
	if n := plan.FactorsOf(name); n > 0 {
		r.factorTally.skipped += n
		r.note("skipped %d %s of %q: %s", n, plural(n, "second factor", "second factors"), name, why)
	}
}

// reportUpdates tallies what plan's changes did, failed as UpdateAll's,
// and reports each that failed, and each device an update left out.
func (r *importReport) reportUpdates(plan *djangoimport.Plan, failed map[string]error) {
	notOurs := set(plan.NotOurs)
	for _, name := range slices.Sorted(maps.Keys(plan.Update)) {
		switch err := failed[name]; {
		case err == nil || errors.Is(err, djangoimport.ErrUnchanged):
			if err == nil {
				r.userTally.updated++
			} else {
				r.userTally.unchanged++
			}
			if notOurs[name] {
				break
			}
			up := plan.FactorsUpdate(name)
			if up.Changed {
				r.factorTally.updated += up.Imported
			} else {
				r.factorTally.unchanged += up.Imported
			}
			r.factorTally.skipped += len(up.Skipped)
			for _, s := range up.Skipped {
				r.note("skipped %s", printable(s))
			}
		default: // deleted meanwhile, or refused by the directory
			r.userTally.skipped++
			r.factorTally.skipped += plan.FactorsOf(name)
			r.note("skipped the update of user %q: %v", name, err)
		}
	}
}

// summary prints the import's summary line on stdout: the file, the
// directory, and the tallies.
func (r *importReport) summary(opt importOptions, dir fmt.Stringer, stdout io.Writer) {
	u, t, f := r.userTally, r.tokenTally, r.factorTally
	summary := fmt.Sprintf("%s into %s: users %d imported, %d updated, %d unchanged, %d skipped; tokens %d imported, %d updated, %d left dead, %d skipped; factors %d imported, %d updated, %d unchanged, %d skipped",
		opt.path, dir, u.imported, u.updated, u.unchanged, u.skipped, t.imported, t.updated, t.dead, t.skipped, f.imported, f.updated, f.unchanged, f.skipped)
	if opt.dryRun {
		fmt.Fprintf(stdout, "dry run: would import %s; nothing written\n", summary)
	} else {
		fmt.Fprintf(stdout, "imported %s\n", summary)
	}
}

// skipped reports whether the import left any record out.
func (r *importReport) skipped() bool {
	return r.userTally.skipped+r.tokenTally.skipped+r.factorTally.skipped > 0
}

// set returns the set of names.
func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, name := range names {
		m[name] = true
	}
	return m
}

// readImport reads the file to import: an authsvc users file, validated
// whole as the server loads it, or a Django dump, whose users' Django
// hashes it fingerprints and whose second factors it seals or hashes,
// under the secret key it returns (importKey), and whose legacy fast
// hashes it leaves for WrapLegacy. The key is zero for a users file.
func readImport(opt importOptions, held []users.User, dest fmt.Stringer, now time.Time, stderr io.Writer) (*djangoimport.Dump, secret.Key, error) {
	if opt.from == "file" {
		list, err := usersfile.Read(opt.path)
		if err != nil {
			return nil, secret.Key{}, fmt.Errorf("user import: %w", err)
		}
		if err := checkCopiedFactors(opt, list, dest); err != nil {
			return nil, secret.Key{}, err
		}
		return djangoimport.FromUsers(list), secret.Key{}, nil
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
func openImportTarget(ctx context.Context, usersPath string, dryRun bool, stderr io.Writer) (dir importTarget, done func(), err error) {
	dir, done, err = openCLIDirectory(ctx, usersPath, dryRun, stderr)
	if dryRun && errors.Is(err, postgres.ErrNoSchema) {
		return noUsersYet{name: postgres.Name(usersPath)}, func() {}, nil
	}
	return dir, done, err
}

// importTarget is what an import needs of a directory.
type importTarget interface {
	fmt.Stringer
	AddAll(ctx context.Context, users []users.User) (existing []string, err error)
	UpdateAll(ctx context.Context, changes map[string]func(*users.User) error, opts ...users.WriteOption) (failed map[string]error, err error)
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
func (noUsersYet) UpdateAll(context.Context, map[string]func(*users.User) error, ...users.WriteOption) (map[string]error, error) {
	return nil, errors.New("dry run: nothing is written")
}

// defaultKeyFile is the secret key file's name beside a users file, when
// --secret-key-file does not name one.
const defaultKeyFile = "authsvc.key"
