package cli

import (
	"context"

	"authsvc/internal/users"
)

// userPasswd runs "authsvc user passwd USERNAME": it sets a user's
// password, read from stdin, and ends every token of the user
// (users.SetPassword).
func userPasswd(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user passwd", "USERNAME", "Sets a user's password, read from stdin, and ends every token of the user.")
	newPassword := newPasswordFlags(f)
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		hash, err := newPassword.read(f.Name(), username, e)
		if err != nil {
			return err
		}
		return userChanged(users.SetPassword(ctx, dir, username, hash), dir, f.Name(), username, "changed the password of", e.stdout)
	})
}
