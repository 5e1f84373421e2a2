package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// importOptions are user import's flags and argument.
type importOptions struct {
	from, path         string // --from, and the file to import
	dryRun             bool
	store, storePrefix string // where imported tokens go
	tokenTTL           time.Duration
}

// An importTally counts what an import did with one kind of record.
type importTally struct{ imported, updated, dead, skipped int }

// errSomeSkipped: an import left records out; each was reported on stderr.
var errSomeSkipped = errors.New("some records were not imported (see above)")

// importUsers adds the users of a Django dumpdata file, or of an authsvc
// users file (to move it into PostgreSQL), in one write, leaving existing
// usernames alone, and then the dump's DRF keys to the token store; it
// reports every record it leaves out on stderr, one line each, prints one
// summary line, and then fails (exit 1) if it left any out.
func importUsers(ctx context.Context, dir importTarget, opt importOptions, stdout, stderr io.Writer) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	dump := &users.DjangoDump{}
	if opt.from == "file" {
		var err error
		if dump.Users, err = users.ReadFile(opt.path); err != nil { // validated whole, as the server loads it
			return fmt.Errorf("user import: %w", err)
		}
	} else {
		data, err := os.ReadFile(opt.path)
		if err != nil {
			return err
		}
		if dump, err = users.ParseDjangoDump(data, now); err != nil {
			return fmt.Errorf("user import: %s: %w", opt.path, err)
		}
	}
	warnSlowHashes("user import", dump.Users, stderr)
	// The token store is reached before anything is written, so that a
	// store that is down stops the import whole.
	store, closeStore, err := openImportStore(ctx, opt, len(dump.Tokens) > 0)
	if err != nil {
		return err
	}
	defer closeStore()

	addAll := dir.AddAll
	if opt.dryRun {
		addAll = func(ctx context.Context, list []users.User) ([]string, error) { return takenNames(ctx, dir, list) }
	}
	existing, err := addAll(ctx, dump.Users)
	if err != nil {
		return err
	}
	for _, s := range dump.Skipped {
		fmt.Fprintf(stderr, "authsvc: user import: skipped %s\n", printable(s.String()))
	}
	leftAlone := make(map[string]bool, len(existing))
	for _, name := range existing {
		fmt.Fprintf(stderr, "authsvc: user import: left alone: user %q already exists\n", name)
		leftAlone[name] = true
	}
	userTally := importTally{imported: len(dump.Users) - len(existing), skipped: len(existing) + countSkips(dump.Skipped, "auth.user")}
	tokenTally := importTally{skipped: len(dump.Skipped) - countSkips(dump.Skipped, "auth.user")}
	t, err := importTokens(ctx, store, dir, dump, leftAlone, opt, now, stderr)
	tokenTally.add(t)
	summary := fmt.Sprintf("%s into %s: users %d imported, %d updated, %d skipped; tokens %d imported, %d updated, %d left dead, %d skipped",
		opt.path, dir, userTally.imported, userTally.updated, userTally.skipped,
		tokenTally.imported, tokenTally.updated, tokenTally.dead, tokenTally.skipped)
	if opt.dryRun {
		fmt.Fprintf(stdout, "dry run: would import %s; nothing written\n", summary)
	} else {
		fmt.Fprintf(stdout, "imported %s\n", summary)
	}
	if err != nil {
		return err
	}
	if userTally.skipped+tokenTally.skipped > 0 {
		return errSomeSkipped
	}
	return nil
}

func (t *importTally) add(u importTally) {
	t.imported += u.imported
	t.updated += u.updated
	t.dead += u.dead
	t.skipped += u.skipped
}

// countSkips counts the skips of records of model.
func countSkips(skips []users.DjangoSkip, model string) int {
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

// importTokens imports dump's DRF keys into store (nil: the memory store,
// which cannot keep them, and they are skipped), each as a session of its
// user created at its created time and expiring opt.tokenTTL from now.
// Keys of users left alone are skipped; keys created before their user's
// cut-off are dead already and left so.
func importTokens(ctx context.Context, store tokens.Store, dir importTarget, dump *users.DjangoDump, leftAlone map[string]bool, opt importOptions, now time.Time, stderr io.Writer) (importTally, error) {
	var tally importTally
	if len(dump.Tokens) == 0 {
		return tally, nil
	}
	if store == nil {
		tally.skipped = len(dump.Tokens)
		fmt.Fprintf(stderr, "authsvc: user import: skipped %d tokens: the memory token store cannot keep them past the import (give --store redis://…)\n", len(dump.Tokens))
		return tally, nil
	}
	held, err := dir.List(ctx)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return tally, err
	}
	byName := make(map[string]users.User, len(held))
	for _, u := range held {
		byName[u.Username] = u
	}
	if opt.dryRun { // the dump's users stand for those the run would add
		for _, u := range dump.Users {
			if !leftAlone[u.Username] {
				byName[u.Username] = u
			}
		}
	}
	var expires time.Time
	if opt.tokenTTL > 0 {
		expires = now.Add(opt.tokenTTL)
	}
	var batch []tokens.Imported
	for _, t := range dump.Tokens {
		u, ok := byName[t.Username]
		switch {
		case leftAlone[t.Username] || !ok:
			tally.skipped++
			fmt.Fprintf(stderr, "authsvc: user import: skipped the token of %q: its user was left alone\n", t.Username)
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

// importTarget is what an import needs of a directory.
type importTarget interface {
	fmt.Stringer
	AddAll(ctx context.Context, users []users.User) (existing []string, err error)
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

// takenNames returns the names of list that AddAll would leave alone:
// those dir holds, and the later of two entries of one name. A users
// file that does not exist yet, or a database authsvc has not set up,
// holds none.
func takenNames(ctx context.Context, dir importTarget, list []users.User) ([]string, error) {
	held, err := dir.List(ctx)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	taken := make(map[string]bool, len(held))
	for _, u := range held {
		taken[u.Username] = true
	}
	var existing []string
	for _, u := range list {
		if taken[u.Username] {
			existing = append(existing, u.Username)
		}
		taken[u.Username] = true
	}
	return existing, nil
}
