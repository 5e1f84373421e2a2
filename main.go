// Command authsvc is a small token authentication service: POST a username
// and password to /api/auth/login/ for a token, then present the token to
// /api/auth/info. See README.md and docs/API.md.
//
// The commands live in internal/cli; this package only gives them the
// process: its arguments, environment, standard streams and signals.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"authsvc/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitStatus(err, os.Stderr))
}

// run is the whole program, as cli.Run runs it: args is os.Args, getenv
// reads the environment, and ctx is cancelled on SIGINT or SIGTERM.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	return cli.Run(ctx, args, getenv, stdin, stdout, stderr)
}
