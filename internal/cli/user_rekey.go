package cli

import (
	"context"

	"authsvc/internal/users"
)

// rekeyAbout is user rekey's --help.
const rekeyAbout = `Re-seals every user's authenticator secret (an active one, and one
enrolled but not yet confirmed) under the secret key in --secret-key-file,
in one write. Each secret is opened with that key or one of the
--old-secret-key-file keys; a secret none of them opens is reported by
username, its user is left as it was, and the command exits 1. Secrets
already under the new key are left alone, so a rekey may be run again.

Recovery codes are kept as they are: they are stored only as hashes keyed
under the key they were made with, which cannot be made again without the
codes. The summary counts the users whose codes are under another key:
they keep working as long as serve is also given that key
(--old-secret-key-file), until the user uses them up or makes new ones.
Sessions are not ended. A missing --secret-key-file is created (mode 0600)
and said so on stderr. Neither key flag is read from the environment:
serve's AUTHSVC_SECRET_KEY_FILE names the key being replaced.`

// userRekey runs "authsvc user rekey": it re-seals the users'
// authenticator secrets under a new secret key (rekeyUsers).
func userRekey(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user rekey", "", rekeyAbout)
	var opt rekeyOptions
	f.StringVar(&opt.newKeyPath, "secret-key-file", "", "the new secret key `FILE`, which the secrets are sealed under from now; required")
	f.Var((*stringList)(&opt.oldKeyPaths), "old-secret-key-file", "a secret key `FILE` the secrets may be sealed under now, such as the one being replaced; repeatable")
	f.BoolVar(&opt.dryRun, "dry-run", false, "write nothing, the new key file included: print what the rekey would do, and exit as it would")
	f.checks = append(f.checks, f.noArguments, func() error {
		if opt.newKeyPath == "" {
			return usagef("user rekey: --secret-key-file is required: the FILE of the new secret key")
		}
		return nil
	})
	if err := f.parse(e, args); err != nil {
		return err
	}
	return f.withDirectory(ctx, opt.dryRun, func(dir users.Directory) error {
		return rekeyUsers(ctx, dir, opt, e.stdout, e.stderr)
	})
}
