package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"authsvc/internal/users"
)

// userAdd runs "authsvc user add USERNAME": it adds a user, with the
// password read from stdin.
func userAdd(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user add", "USERNAME", "Adds a user, with the password read from stdin.")
	admin := f.Bool("admin", false, "make the user an admin")
	name := f.String("name", "", "the user's full `NAME`")
	email := f.String("email", "", "the user's email `ADDRESS`")
	var groups stringList
	f.Var(&groups, "group", "a `GROUP` of the user; repeatable")
	newPassword := newPasswordFlags(f)
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		if err := users.CheckProfile(*name, *email, groups); err != nil {
			return usagef("user add: %v", err)
		}
		hash, err := newPassword.read(f.Name(), username, e)
		if err != nil {
			return err
		}
		if groups == nil {
			groups = stringList{}
		}
		// A cut-off from the start: tokens of an earlier user of that name stay dead.
		err = dir.Add(ctx, users.User{Username: username, PasswordHash: hash, Name: *name, Email: *email, Groups: groups, Admin: *admin, TokensAfter: time.Now().UTC()})
		if errors.Is(err, users.ErrExists) {
			return fmt.Errorf("user add: user %q already exists", username)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "added user %q to %s\n", username, dir) // dir names a database without its password
		return nil
	})
}
