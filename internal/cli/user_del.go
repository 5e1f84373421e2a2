package cli

import (
	"context"
	"fmt"

	"authsvc/internal/users"
)

// userDel runs "authsvc user del USERNAME": it deletes a user
// (Directory.Delete), whose tombstone keeps every token of the name dead.
func userDel(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user del", "USERNAME", "Deletes a user; their tokens die with them.")
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		if err := dir.Delete(ctx, username); err != nil {
			return userError(f.Name(), username, err)
		}
		fmt.Fprintf(e.stdout, "deleted user %q from %s\n", username, dir)
		return nil
	})
}
