package cli

import (
	"context"

	"authsvc/internal/users"
)

// userUnlockAbout is user unlock's --help.
const userUnlockAbout = `Lifts the login throttle's lockout of a user: the failed logins of that
user recorded before now no longer count, per user and per (user, client),
on every server reading the same users (within 5 s); nor do the wrong
second-factor codes that, at 100 in a row, refuse every second step of the
user until this command. A password reset's confirm lifts the first, never
the second: only this command (or the admin API's unlock) and a successful
second step do. A client address's own limit over all usernames is left
as it is.`

// userUnlock runs "authsvc user unlock USERNAME": it lifts the login
// throttle's lockout of a user and their code lock (users.Unlock).
func userUnlock(ctx context.Context, e *env, args []string) error {
	return changeUser(ctx, e, args, "user unlock", userUnlockAbout, users.Unlock, "lifted the lockout of")
}
