package cli

import (
	"context"
	"path/filepath"

	"authsvc/internal/tokens/redisstore"
)

// userImportAbout is user import's --help.
const userImportAbout = `Adds the users of a Django dumpdata file (--from django) or of an authsvc
users file (--from file, to move it into PostgreSQL). Users whose names are
taken are left alone, or with --update brought up to date with the dump.
A dump's DRF keys go to the token store --store names, and keep working as
tokens, never expiring unless --token-ttl says so; its confirmed
django-otp devices become the users' authenticators and recovery codes,
sealed and hashed under --secret-key-file's key. The keys and devices of
a Django user left out are left out with it. A users file's second
factors are copied only when --secret-key-file's key, the one serve is
given over --users, opens them; otherwise nothing is written. One summary
line counts what was done; every record left out is reported on stderr,
and the command then exits 1. See the README's "Moving from Django REST
Framework".`

// userImport runs "authsvc user import DUMP.json|USERS.json": it adds the
// users of a Django dump or of a users file: it reads the file, plans the
// import and applies the plan, or with --dry-run says what the plan would
// do (importFile).
func userImport(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user import", "DUMP.json|USERS.json", userImportAbout)
	opt := defineImportFlags(f)
	if err := f.parse(e, args); err != nil {
		return err
	}
	dir, done, err := openImportTarget(ctx, *f.users, opt.dryRun, e.stderr)
	if err != nil {
		return err
	}
	defer done()
	// Checked once the directory is open, as they always were.
	switch {
	case f.NArg() != 1:
		return usagef("user import: want exactly one file to import")
	case opt.tokenTTL < 0:
		return usagef("user import: --token-ttl %v: want 0 or more", opt.tokenTTL)
	case opt.update && opt.from != "django":
		return usagef("user import: --update works with --from django")
	case opt.keyPath == "" && opt.from == "django" && isPostgresURL(*f.users):
		return usagef("user import: --secret-key-file is needed with PostgreSQL: the key that fingerprints the Django hashes and seals their second factors, the same file for every import")
	case opt.keyPath == "" && !isPostgresURL(*f.users):
		opt.keyPath = filepath.Join(filepath.Dir(*f.users), defaultKeyFile) // serve's
	}
	opt.path = f.Arg(0)
	return importFile(ctx, dir, *opt, e)
}

// defineImportFlags adds user import's flags to f, and the check of
// --from, and returns the options they set.
func defineImportFlags(f *userFlags) *importOptions {
	opt := new(importOptions)
	f.StringVar(&opt.from, "from", "", "what `KIND` of file to import: django (a dumpdata file) or file (a users file)")
	f.BoolVar(&opt.dryRun, "dry-run", false, "write nothing: print what the import would do, and exit as it would")
	f.BoolVar(&opt.update, "update", false, "bring users that exist already up to date with the dump (--from django): profile, flags, second factors and a hash changed in Django")
	f.StringVar(&opt.keyPath, "secret-key-file", "", "the secret key `FILE` serve is given over --users: --from django fingerprints Django hashes and seals their second factors under it (created when missing; required with PostgreSQL); --from file copies second factors only when it opens them (never created); default authsvc.key beside a users file")
	f.StringVar(&opt.store, "store", "memory", "the token `STORE` the dump's DRF keys go to, as serve's: "+storeForms+" (memory cannot keep them past the import: they are reported skipped)")
	f.StringVar(&opt.storePrefix, "store-prefix", redisstore.DefaultPrefix, "key `PREFIX` in a shared Redis, as serve's")
	// Not from AUTHSVC_TOKEN_TTL: that is serve's lifetime of its own
	// tokens, and DRF keys never expire unless the import says so.
	f.DurationVar(&opt.tokenTTL, "token-ttl", 0, "imported DRF keys expire this `DURATION` after the latest import that lists them; 0 = never, as DRF's keys (not read from AUTHSVC_TOKEN_TTL, which is serve's)")
	f.fromEnv = append(f.fromEnv, "store", "store-prefix", "secret-key-file")
	f.checks = append(f.checks, func() error {
		const kinds = "want --from django (a Django dumpdata file) or --from file (a users file)"
		switch opt.from {
		case "django", "file":
			return nil
		case "":
			return usagef("user import: --from is missing: %s", kinds)
		}
		return usagef("user import: --from %q: %s", opt.from, kinds)
	})
	return opt
}
