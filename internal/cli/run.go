// Package cli is authsvc's commands: serve, user, token, hash and version, each
// with its own flags and help, and Run, which picks one from the command
// line. The root package main only calls Run.
//
// Each command is one function, in a file of its own (serve.go,
// user_add.go, …), and the table in commands lists them all: Run
// dispatches through it, and --help is made from it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"authsvc/internal/password"
)

// An env is what a command is given of the process: its environment and
// its standard streams.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// A command is one of authsvc's commands.
type command struct {
	name    string // as typed: "serve", "user add"
	summary string // one line for the lists of commands
	// hidden commands are left out of the lists, and their errors are
	// their own: the hash worker, which the server starts itself
	// (internal/password/pool.go), names itself in them.
	hidden bool
	// run runs the command with the arguments that follow its name. Its
	// errors are reported as "authsvc: NAME: message".
	run func(ctx context.Context, e *env, args []string) error
}

// commands returns every command, in the order help lists them.
func commands() []command {
	return []command{
		{name: "serve", summary: "run the server (the command when none is given)", run: serve},
		{name: "user add", summary: "add a user", run: userAdd},
		{name: "user edit", summary: "change a user's name, email, groups or admin status", run: userEdit},
		{name: "user passwd", summary: "set a user's password", run: userPasswd},
		{name: "user del", summary: "delete a user", run: userDel},
		{name: "user disable", summary: "disable a user, ending their tokens", run: userDisable},
		{name: "user enable", summary: "enable a disabled user", run: userEnable},
		{name: "user logout", summary: "end every session of a user", run: userLogout},
		{name: "user unlock", summary: "lift a user's lockouts: failed logins and the code lock", run: userUnlock},
		{name: "user reset-mfa", summary: "remove a user's second factors, ending their sessions", run: userResetMFA},
		{name: "user reset-link", summary: "print a one-time password reset link of a user", run: userResetLink},
		{name: "user list", summary: "list the users, without their hashes", run: userList},
		{name: "user import", summary: "add the users of a Django dumpdata file or a users file", run: userImport},
		{name: "user check", summary: "validate the users file or database", run: userCheck},
		{name: "user rekey", summary: "re-seal the authenticator secrets under a new secret key", run: userRekey},
		{name: "token create", summary: "print a new personal access token of a user", run: tokenCreate},
		{name: "token list", summary: "list the live personal access tokens", run: tokenList},
		{name: "token revoke", summary: "revoke a personal access token", run: tokenRevoke},
		{name: "hash", summary: "print the hash of the password on stdin", run: hashCommand},
		{name: "version", summary: "print the version and build information", run: versionCommand},
		{name: password.WorkerCommand, hidden: true, run: hashWorker},
	}
}

// Run is the whole program: args is os.Args, getenv reads the environment,
// and ctx is cancelled on SIGINT or SIGTERM.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := &env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) > 0 {
		args = args[1:]
	}
	switch {
	case len(args) > 0 && isHelp(args[0]):
		fmt.Fprint(stdout, overview())
		return nil
	case len(args) == 0 || strings.HasPrefix(args[0], "-"):
		return runCommand(ctx, lookup("serve"), e, args) // the command when none is given
	case groups()[args[0]] != "":
		return groupCommand(ctx, e, args[0], args[1:]) // "user add", "token list", or help
	}
	c := lookup(args[0])
	if c == nil || strings.Contains(c.name, " ") {
		return usagef("unknown command %q; see authsvc --help", args[0])
	}
	return runCommand(ctx, c, e, args[1:])
}

// groups returns the commands that take a subcommand ("user add"), each
// with what its --help says the group is for.
func groups() map[string]string {
	return map[string]string{
		"user": "Manages the users in the users file or database that --users names.",
		"token": `Manages the personal access tokens of the users in the users file or
database that --users names: long-lived tokens for scripts and services.`,
	}
}

// groupCommand runs "authsvc GROUP SUBCOMMAND ...", or says which
// subcommands group has.
func groupCommand(ctx context.Context, e *env, group string, args []string) error {
	var names []string
	for _, c := range subcommands(group) {
		names = append(names, c.name)
	}
	switch {
	case len(args) == 0:
		return usagef("%s: missing subcommand (%s)", group, strings.Join(names, ", "))
	case isHelp(args[0]):
		fmt.Fprint(e.stdout, groupHelp(group))
		return nil
	case !slices.Contains(names, args[0]):
		return usagef("%s: unknown subcommand %q (%s)", group, args[0], strings.Join(names, ", "))
	}
	return runCommand(ctx, lookup(group+" "+args[0]), e, args[1:])
}

// subcommands returns the commands of group, in the table's order, each
// named as its subcommand ("add").
func subcommands(group string) []command {
	var subs []command
	for _, c := range commands() {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			c.name = sub
			subs = append(subs, c)
		}
	}
	return subs
}

// lookup returns the command named name, or nil.
func lookup(name string) *command {
	list := commands()
	i := slices.IndexFunc(list, func(c command) bool { return c.name == name })
	if i < 0 {
		return nil
	}
	return &list[i]
}

// runCommand runs c with args, its errors named by it.
func runCommand(ctx context.Context, c *command, e *env, args []string) error {
	err := c.run(ctx, e, args)
	if c.hidden {
		return err
	}
	return inCommand(c.name, err)
}

// ExitStatus reports err on stderr in one line and returns the exit status:
// 0 for success, 2 for a usage error, 1 for any other.
func ExitStatus(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelpShown) {
		return 0
	}
	fmt.Fprintf(stderr, "authsvc: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// A commandError is an error of a command, which its message names: every
// command's errors read "authsvc: COMMAND: message", whichever part of the
// program they come from.
type commandError struct {
	cmd string // as typed: "serve", "user add"
	err error
}

func (e *commandError) Error() string { return e.cmd + ": " + e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// inCommand returns err as an error of cmd, unless it is nil, help or
// names cmd already.
func inCommand(cmd string, err error) error {
	if err == nil || errors.Is(err, errHelpShown) || strings.HasPrefix(err.Error(), cmd+": ") {
		return err
	}
	return &commandError{cmd: cmd, err: err}
}

// isHelp reports whether arg asks for help rather than naming a command.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// overview returns the text of authsvc --help: what authsvc is and its
// commands; each command's own --help gives its flags.
func overview() string {
	var b strings.Builder
	b.WriteString(`usage: authsvc [COMMAND] [flags] [arguments]

authsvc is a token authentication service: POST a username and password
to /api/auth/login/ for a token, then present the token to /api/auth/info.
Users live in a users file (or PostgreSQL), tokens in memory (or Redis).

commands:
`)
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(&b, "  %-15s  %s\n", c.name, c.summary)
		}
	}
	b.WriteString("\nRun 'authsvc COMMAND --help' for a command's flags, e.g. authsvc serve --help.\n")
	return b.String()
}

// groupHelp is authsvc GROUP --help.
func groupHelp(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: authsvc %s SUBCOMMAND [flags] [arguments]\n\n%s\n\nsubcommands:\n", group, groups()[group])
	width := 0
	for _, c := range subcommands(group) {
		width = max(width, len(c.name))
	}
	for _, c := range subcommands(group) {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(&b, "\nRun 'authsvc %s SUBCOMMAND --help' for its flags.\n", group)
	return b.String()
}
