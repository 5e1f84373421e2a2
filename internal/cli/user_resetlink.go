package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"authsvc/internal/users"
)

// userResetLinkAbout is user reset-link's --help.
const userResetLinkAbout = `Makes a one-time password reset link of USERNAME and prints it on stdout,
alone on one line, for an operator to hand over: --reset-url with {uid}
and {token} filled in. Only the token's SHA-256 is kept, with the user.
The link sets a new password once, until --ttl has passed; a newer link,
a password change or a reset makes it dead. A disabled user gets none.
One line on stderr says until when the link works. Without --ttl, the
link works for AUTHSVC_RESET_TTL when set, as serve's links do.`

// defaultResetURL is --reset-url's default: the link's parts alone, for a
// client that builds its own page's address from them.
const defaultResetURL = "{uid}/{token}"

// resetLinkFlags are user reset-link's flags but --users.
type resetLinkFlags struct {
	ttl      shortDurationFlag
	resetURL *string
}

// userResetLink runs "authsvc user reset-link USERNAME": it gives the user
// a new reset link, which replaces any older one, and prints it.
func userResetLink(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user reset-link", "USERNAME", userResetLinkAbout)
	r := &resetLinkFlags{ttl: shortDurationFlag(users.DefaultResetTTL)}
	f.Var(&r.ttl, "ttl", "how long the link works: a `DURATION` above 0, as serve's --reset-ttl")
	r.resetURL = f.String("reset-url", defaultResetURL, "the link's `PATTERN`, with {uid} and {token}, as serve's")
	f.fromEnv = append(f.fromEnv, "reset-url")
	f.checks = append(f.checks, func() error { return r.ttlFromEnv(f.FlagSet, e.getenv) }, r.check)
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		now := time.Now()
		uid, token, err := users.NewResetLink(ctx, dir, username, time.Duration(r.ttl), now)
		if errors.Is(err, users.ErrDisabled) {
			return fmt.Errorf("user %q is disabled; enable it first", username)
		}
		if err != nil {
			return userError(f.Name(), username, err)
		}
		fmt.Fprintln(e.stdout, users.FormatResetURL(*r.resetURL, uid, token))
		// The token is on stdout alone: stderr may go to a log.
		fmt.Fprintf(e.stderr, "reset link for %q in %s, valid until %s; it works once\n",
			username, dir, now.Add(time.Duration(r.ttl)).UTC().Format(time.RFC3339))
		return nil
	})
}

// resetTTLEnv is serve's --reset-ttl variable, which user reset-link's
// --ttl reads too: one setting for every link an installation hands out.
const resetTTLEnv = "AUTHSVC_RESET_TTL"

// ttlFromEnv gives --ttl, when it is not on the command line, the value
// of resetTTLEnv, if set.
func (r *resetLinkFlags) ttlFromEnv(fs *flag.FlagSet, getenv func(string) string) error {
	v := getenv(resetTTLEnv)
	if v == "" {
		return nil
	}
	onCommandLine := false
	fs.Visit(func(f *flag.Flag) { onCommandLine = onCommandLine || f.Name == "ttl" })
	if onCommandLine {
		return nil
	}
	if err := r.ttl.Set(v); err != nil {
		return usagef("%s: invalid value %q for %s: %v", fs.Name(), v, resetTTLEnv, err)
	}
	return nil
}

// check checks the flags before the directory is opened. A pointer
// receiver: the method value is taken before the flags are parsed.
func (r *resetLinkFlags) check() error {
	if r.ttl <= 0 {
		return usagef("user reset-link: --ttl %s: want a duration above 0", r.ttl.String())
	}
	return checkResetURL("user reset-link", *r.resetURL)
}

// checkResetURL returns a usage error of the command cmd unless pattern
// is a --reset-url: one line, with {uid} and {token}.
func checkResetURL(cmd, pattern string) error {
	if !strings.Contains(pattern, "{uid}") || !strings.Contains(pattern, "{token}") {
		return usagef("%s: --reset-url %q: want a pattern with {uid} and {token}, e.g. https://app.example.com/reset/{uid}/{token}", cmd, pattern)
	}
	if strings.ContainsFunc(pattern, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return usagef("%s: --reset-url %q: a control character; want one line", cmd, pattern)
	}
	return nil
}
