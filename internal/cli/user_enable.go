package cli

import (
	"context"

	"authsvc/internal/users"
)

// userEnable runs "authsvc user enable USERNAME": it enables a disabled
// user (users.Enable); the tokens the disable ended stay dead.
func userEnable(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user enable", "USERNAME", "Enables a disabled user. Tokens ended by the disable stay dead.")
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		return userChanged(users.Enable(ctx, dir, username), dir, f.Name(), username, "enabled", e.stdout)
	})
}
