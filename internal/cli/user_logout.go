package cli

import (
	"context"

	"authsvc/internal/users"
)

// userLogout runs "authsvc user logout USERNAME": it ends every token of a
// user (users.Logout).
func userLogout(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user logout", "USERNAME", "Ends every token of a user, on every server reading the same users.")
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		return userChanged(users.Logout(ctx, dir, username), dir, f.Name(), username, "ended every token of", e.stdout)
	})
}
