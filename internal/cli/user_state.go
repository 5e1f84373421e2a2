package cli

import (
	"context"

	"authsvc/internal/users"
)

// userDisable runs "authsvc user disable USERNAME": it disables a user,
// and every token of the user ends (users.Disable).
func userDisable(ctx context.Context, e *env, args []string) error {
	return changeUser(ctx, e, args, "user disable",
		"Disables a user: no login, and every token of the user ends.",
		users.Disable, "disabled")
}

// userEnable runs "authsvc user enable USERNAME": it enables a disabled
// user (users.Enable); the tokens the disable ended stay dead.
func userEnable(ctx context.Context, e *env, args []string) error {
	return changeUser(ctx, e, args, "user enable",
		"Enables a disabled user. Tokens ended by the disable stay dead.",
		users.Enable, "enabled")
}

// userLogout runs "authsvc user logout USERNAME": it ends every token of a
// user (users.Logout).
func userLogout(ctx context.Context, e *env, args []string) error {
	return changeUser(ctx, e, args, "user logout",
		"Ends every token of a user, and their pending password reset link, on every\nserver reading the same users.",
		users.Logout, "ended every token of")
}

// changeUser runs the user command name, whose --help is about: it applies
// change to the user named on the command line and prints
// "DONE user "NAME" in DIRECTORY". The commands that only change a
// user's state differ in these alone.
func changeUser(ctx context.Context, e *env, args []string, name, about string,
	change func(context.Context, users.Directory, string) error, done string) error {
	f := newUserFlags(name, "USERNAME", about)
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		return userChanged(change(ctx, dir, username), dir, f.Name(), username, done, e.stdout)
	})
}
