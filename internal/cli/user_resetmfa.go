package cli

import (
	"context"
	"fmt"

	"authsvc/internal/users"
)

// userResetMFAAbout is user reset-mfa's --help.
const userResetMFAAbout = `Removes a user's second factors: the authenticator, an enrolment not yet
confirmed and the recovery codes; and ends every token of the user, as
user passwd does, on every server reading the same users (within 5 s).
The user then logs in with the password alone, and may enrol again. A
user without any prints so and is left as it was.`

// userResetMFA runs "authsvc user reset-mfa USERNAME": it removes a user's
// second factors, ending their tokens (users.ResetFactors), and says what
// it removed.
func userResetMFA(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user reset-mfa", "USERNAME", userResetMFAAbout)
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		removed, pendingOnly, err := users.ResetFactors(ctx, dir, username)
		switch {
		case err != nil:
			return userError(f.Name(), username, err)
		case !removed:
			fmt.Fprintf(e.stdout, "user %q has no second factor in %s; nothing changed\n", username, dir)
		case pendingOnly:
			fmt.Fprintf(e.stdout, "removed the unconfirmed enrolment of user %q in %s, and ended its tokens\n", username, dir)
		default:
			fmt.Fprintf(e.stdout, "removed the second factors of user %q in %s, and ended its tokens\n", username, dir)
		}
		return nil
	})
}
