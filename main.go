// Command authsvc is a small token authentication service: POST a username
// and password to /api/auth/login/ for a token, then present the token to
// /api/auth/info. See README.md and API.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"authsvc/internal/password"
)

// usage returns the text of --help; serve's settings come from serveSettings.
func usage() string {
	var b strings.Builder
	b.WriteString("usage:\n  authsvc [serve] [flags]          run the server (the default command)\n")
	writeServeUsage(&b)
	b.WriteString(commandsUsage)
	return b.String()
}

// commandsUsage is the part of --help after serve's settings.
const commandsUsage = `  authsvc user add    [--users F] [--admin] [--name N] [--email E] [--group G]... [--hash S] [--cost C] USERNAME
  authsvc user passwd [--users F] [--hash S] [--cost C] USERNAME
  authsvc user del    [--users F] USERNAME
  authsvc user disable|enable [--users F] USERNAME
  authsvc user logout [--users F] USERNAME   end every token of USERNAME
  authsvc user list   [--users F]
  authsvc user import [--users F] --from django DUMP.json | --from file USERS.json
  authsvc user check  [--users F]  validate the users file, exit 0 or 1
  authsvc hash [--hash S] [--cost C]  print the hash of the password on stdin
  authsvc version                  print the version and build information

Passwords are read from stdin (the first line), never from a flag; on a
terminal without echo. --users defaults to $AUTHSVC_USERS, else users.json.
New hashes are argon2id (m=19 MiB, t=2, p=1) unless --hash bcrypt or
--cost C (bcrypt at cost C, 4-16; default 12). New passwords need at least
$AUTHSVC_PASSWORD_MIN_LENGTH (default 12) characters, must not be the
username or a common password.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitStatus(err, os.Stderr))
}

// exitStatus reports err on stderr in one line and returns the exit status:
// 0 for success, 2 for a usage error, 1 for any other.
func exitStatus(err error, stderr io.Writer) int {
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

// run is the whole program: args is os.Args, getenv reads the environment,
// and ctx is cancelled on SIGINT or SIGTERM.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		args = args[1:]
	}
	if len(args) == 0 || (len(args[0]) > 0 && args[0][0] == '-') {
		return serve(ctx, args, getenv, stdout, stderr)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "serve":
		return serve(ctx, rest, getenv, stdout, stderr)
	case "user":
		return userCommand(rest, getenv, stdin, stdout, stderr)
	case "hash":
		return hashCommand(rest, getenv, stdin, stdout, stderr)
	case "version":
		return versionCommand(rest, getenv, stdout)
	case password.WorkerCommand: // started by the server itself (internal/password/pool.go); not in --help
		return password.RunWorker(stdin, stdout)
	case "help":
		fmt.Fprint(stdout, usage())
		return nil
	}
	return usagef("unknown command %q; see authsvc --help", cmd)
}
