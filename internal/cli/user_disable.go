package cli

import (
	"context"

	"authsvc/internal/users"
)

// userDisable runs "authsvc user disable USERNAME": it disables a user,
// and every token of the user ends (users.Disable).
func userDisable(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user disable", "USERNAME", "Disables a user: no login, and every token of the user ends.")
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		return userChanged(users.Disable(ctx, dir, username), dir, f.Name(), username, "disabled", e.stdout)
	})
}
