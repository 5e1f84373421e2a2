// Package cli is authsvc's commands: serve, user, hash and version, each
// with its own flags and help, and Run, which picks one from the command
// line. The root package main only calls Run.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"authsvc/internal/password"
)

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
	line := func(name, summary string) { fmt.Fprintf(&b, "  %-14s  %s\n", name, summary) }
	line("serve", "run the server (the command when none is given)")
	for _, c := range userSubcommands {
		line("user "+c.name, c.summary)
	}
	line("hash", "print the hash of the password on stdin")
	line("version", "print the version and build information")
	b.WriteString("\nRun 'authsvc COMMAND --help' for a command's flags, e.g. authsvc serve --help.\n")
	return b.String()
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

// Run is the whole program: args is os.Args, getenv reads the environment,
// and ctx is cancelled on SIGINT or SIGTERM.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		args = args[1:]
	}
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, overview())
		return nil
	}
	if len(args) == 0 || (len(args[0]) > 0 && args[0][0] == '-') {
		return inCommand("serve", serve(ctx, args, getenv, stdout, stderr))
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return inCommand("serve", serve(ctx, rest, getenv, stdout, stderr))
	case "user":
		return userCommand(rest, getenv, stdin, stdout, stderr) // "user SUBCOMMAND: …", by itself
	case "hash":
		return inCommand("hash", hashCommand(rest, getenv, stdin, stdout, stderr))
	case "version":
		return inCommand("version", versionCommand(rest, getenv, stdout))
	case password.WorkerCommand: // started by the server itself (internal/password/pool.go); not in --help
		return password.RunWorker(stdin, stdout)
	case "help":
		fmt.Fprint(stdout, overview())
		return nil
	}
	return usagef("unknown command %q; see authsvc --help", cmd)
}
