package cli

import (
	"context"
	"fmt"
	"io"

	"authsvc/internal/password"
	"authsvc/internal/users"
)

// userCheckAbout is user check's --help.
const userCheckAbout = `Validates the users file or database as the server would load it: exit 0
or 1. Second factors that the secret key serve is given cannot open
(--secret-key-file, and --old-secret-key-file during a rotation), or that
no key file is there for, fail it with the line serve would stop with. It
writes nothing, and never creates a key file.`

// userCheck runs "authsvc user check": it validates the users file or
// database offline, as serve would load it, its secret-key check
// included: second factors that the key files cannot open fail it with
// the line serve would stop with. It never creates a key file.
func userCheck(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user check", "", userCheckAbout)
	keyFiles := secretKeyFiles{cmd: f.Name()}
	f.StringVar(&keyFiles.current, "secret-key-file", "", "the secret key `FILE` serve is given, checked to open every second factor; default authsvc.key beside a users file, none with PostgreSQL; never created")
	f.Var((*stringList)(&keyFiles.old), "old-secret-key-file", "a key `FILE` serve is given with --old-secret-key-file; repeatable")
	f.fromEnv = append(f.fromEnv, "secret-key-file", "old-secret-key-file")
	if err := f.parse(e, args); err != nil {
		return err
	}
	return f.withDirectory(ctx, true, func(dir users.Directory) error {
		if err := f.noArguments(); err != nil {
			return err
		}
		keyFiles.usersPath = *f.users
		return checkUsers(ctx, dir, keyFiles, e.stdout, e.stderr)
	})
}

// checkUsers validates dir as serve would load it, with the secret keys
// of keyFiles, and says so.
func checkUsers(ctx context.Context, dir users.Directory, keyFiles secretKeyFiles, stdout, stderr io.Writer) error {
	list, err := dir.List(ctx)
	if err != nil {
		return err
	}
	if err := users.Validate(list); err != nil {
		return err
	}
	keys, _, err := loadSecretKeys(keyFiles) // a missing default key file is no key, as serve has before it makes one
	if err != nil {
		return err
	}
	// Loaded as serve loads it (a users file is read only): its factors are
	// the ones counted.
	if err := dir.Reload(ctx); err != nil {
		return err
	}
	if err := checkSecretKeys(ctx, dir, keys); err != nil {
		return err
	}
	warnSlowHashes("user check", list, stderr)
	fmt.Fprintf(stdout, "%s: %d users, valid\n", dir, len(list))
	return nil
}

// slowHashFactor is how many times slower than the default policy's a
// hash must check before the CLI names it: every failed login waits as
// long as a check against the slowest hash in the directory.
const slowHashFactor = 16

// warnSlowHashes names, on stderr, every user in list whose hash takes
// far longer to check than the default policy's.
func warnSlowHashes(cmd string, list []users.User, stderr io.Writer) {
	dummy, err := password.DefaultHashPolicy().Dummy()
	if err != nil {
		return
	}
	budget := dummy.Work() * slowHashFactor
	for _, u := range list {
		h, err := password.ParseHash(u.PasswordHash)
		if err != nil || h.Work() <= budget {
			continue
		}
		fmt.Fprintf(stderr, "authsvc: %s: warning: user %q: its %s hash takes about %.1f s a check, %.0f times the default policy's; every failed login waits as long until it logs in and is rehashed\n",
			cmd, printable(u.Username), h.Scheme(), h.Work(), h.Work()/dummy.Work())
	}
}
