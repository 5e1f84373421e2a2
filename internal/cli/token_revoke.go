package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"authsvc/internal/users"
)

// tokenRevokeAbout is token revoke's --help.
const tokenRevokeAbout = `Revokes the live personal access token ID (as token list shows it), of
whichever user holds it: the token is refused from then on, and nothing
brings it back.`

// tokenRevoke runs "authsvc token revoke ID": it removes the personal
// access token from its user's record.
func tokenRevoke(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("token revoke", "ID", tokenRevokeAbout)
	if err := f.parse(e, args); err != nil {
		return err
	}
	return f.withDirectory(ctx, false, func(dir users.Directory) error {
		if f.NArg() != 1 {
			return usagef("token revoke: want exactly one ID")
		}
		id := f.Arg(0)
		list, err := dir.List(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		username, err := users.FindAccessToken(list, id, now)
		if err == nil {
			var gone users.AccessToken
			gone, err = users.RevokeAccessToken(ctx, dir, username, id, now)
			if err == nil {
				fmt.Fprintf(e.stdout, "revoked personal access token %s (%q) of user %q in %s\n", printable(id), gone.Name, username, dir)
				return nil
			}
		}
		if errors.Is(err, users.ErrNotFound) { // no such token, or its user gone since
			return fmt.Errorf("token revoke: no such personal access token %q", id)
		}
		return err
	})
}
