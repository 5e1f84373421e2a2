package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"authsvc/internal/users"
)

// A userFlags is the FlagSet of a user command, with the flag every user
// command takes, --users, and the command's help.
type userFlags struct {
	*flag.FlagSet
	users   *string  // --users
	fromEnv []string // the flags whose AUTHSVC_* variables give their defaults
	help    help
	stderr  io.Writer // the command's, once parsed
	// checks check the flags, once parsed, before the directory is
	// opened: a usage error connects to nothing.
	checks []func() error
}

// newUserFlags returns the flags of the user command name ("user add"),
// whose synopsis ends in args (what follows the flags) and whose --help
// says about.
func newUserFlags(name, args, about string) *userFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	h := help{synopsis: "authsvc " + name + " [flags]", about: about}
	if args != "" {
		h.synopsis += " " + args
	}
	usersPath := fs.String("users", defaultUsersPath, "the users `FILE`, or a postgres:// URL")
	return &userFlags{FlagSet: fs, users: usersPath, fromEnv: []string{"users"}, help: h}
}

// parse parses args into f, then checks them.
func (f *userFlags) parse(e *env, args []string) error {
	f.stderr = e.stderr
	if err := parseFlags(f.FlagSet, f.help, args, e.getenv, f.fromEnv, e.stdout); err != nil {
		return err
	}
	for _, check := range f.checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// withDirectory runs do on the directory --users names, opened for do
// alone; readOnly as openCLIDirectory's.
func (f *userFlags) withDirectory(ctx context.Context, readOnly bool, do func(users.Directory) error) error {
	dir, done, err := openCLIDirectory(ctx, *f.users, readOnly, f.stderr)
	if err != nil {
		return err
	}
	defer done()
	return do(dir)
}

// withUser parses args into f, and runs do on the directory and the user
// the command is on, the one USERNAME of args, as Django would store it.
func (f *userFlags) withUser(ctx context.Context, e *env, args []string, do func(dir users.Directory, username string) error) error {
	if err := f.parse(e, args); err != nil {
		return err
	}
	// The arguments are checked once the directory is open, as they
	// always were: with PostgreSQL, a connection that fails says so first.
	return f.withDirectory(ctx, false, func(dir users.Directory) error {
		if f.NArg() != 1 {
			return usagef("%s: want exactly one USERNAME", f.Name())
		}
		username := users.NormalizeUsername(f.Arg(0)) // as Django does on create
		if err := users.CheckUsername(username); err != nil {
			return usagef("%s: %v", f.Name(), err)
		}
		return do(dir, username)
	})
}

// noArguments returns a usage error when the command line holds an
// argument beside the flags.
func (f *userFlags) noArguments() error {
	if f.NArg() != 0 {
		return usagef("%s: unexpected argument %q", f.Name(), f.Arg(0))
	}
	return nil
}

// userChanged reports the outcome err of the command cmd on the user
// username in dir: done (what was done to the user) on stdout, or the
// error in one line.
func userChanged(err error, dir users.Directory, cmd, username, done string, stdout io.Writer) error {
	if err != nil {
		return userError(cmd, username, err)
	}
	fmt.Fprintf(stdout, "%s user %q in %s\n", done, username, dir)
	return nil
}

// userError words a directory error of the command cmd in one line.
func userError(cmd, username string, err error) error {
	if errors.Is(err, users.ErrNotFound) {
		return fmt.Errorf("%s: no user %q", cmd, username)
	}
	return err
}

// printable returns s with every rune that is not graphic escaped as \x..,
// \u.... or \U........, and every byte of invalid UTF-8 as \x..: control
// characters (terminal escapes, line breaks, tabs) and also format ones
// such as U+202E, which reverses the text after it.
func printable(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsGraphic(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unicode.IsGraphic(r):
			b.WriteString(s[:size])
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		s = s[size:]
	}
	return b.String()
}
