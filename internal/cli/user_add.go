package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"authsvc/internal/users"
)

// userAddAbout is the start of user add's --help; the password rules follow.
const userAddAbout = `Adds a user, with the password read from stdin. With --no-password
nothing is read: the user has no password (Django's unusable one) and
logs in only once a reset link (user reset-link) has set one.`

// userAdd runs "authsvc user add USERNAME": it adds a user through
// users.Create, as the admin API's POST does, with the password read
// from stdin or, with --no-password, none.
func userAdd(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user add", "USERNAME", userAddAbout)
	admin := f.Bool("admin", false, "make the user an admin")
	name := f.String("name", "", "the user's full `NAME`")
	email := f.String("email", "", "the user's email `ADDRESS`")
	var groups stringList
	f.Var(&groups, "group", "a `GROUP` of the user; repeatable")
	noPassword := f.Bool("no-password", false, "add the user without a password, reading nothing from stdin")
	newPassword := newPasswordFlags(f)
	f.checks = append(f.checks, func() error {
		if !*noPassword {
			return nil
		}
		var hashing error
		f.Visit(func(fl *flag.Flag) {
			if fl.Name == "hash" || fl.Name == "cost" {
				hashing = usagef("user add: --%s does not go with --no-password, which makes no hash", fl.Name)
			}
		})
		return hashing
	})
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		// A profile the rules refuse is a usage error, before any password is read.
		if err := users.CheckProfile(*name, *email, groups); err != nil {
			return usagef("user add: %v", err)
		}
		hash := "" // none: users.Create stores the unusable hash
		if !*noPassword {
			var err error
			if hash, err = newPassword.read(f.Name(), username, e); err != nil {
				return err
			}
		}
		_, err := users.Create(ctx, dir, users.NewUser{Username: username, PasswordHash: hash,
			Name: *name, Email: *email, Groups: groups, Admin: *admin})
		switch {
		case errors.Is(err, users.ErrExists):
			return fmt.Errorf("user add: user %q already exists", username)
		case errors.Is(err, users.ErrInvalid):
			return usagef("user add: %v", err)
		case err != nil:
			return err
		}
		fmt.Fprintf(e.stdout, "added user %q to %s\n", username, dir) // dir names a database without its password
		return nil
	})
}
