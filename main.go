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
	"syscall"
)

const usage = `usage:
  authsvc [serve] [flags]          run the server (the default command)
    --addr ADDR                 listen address (default 127.0.0.1:8080; env AUTHSVC_ADDR)
    --users FILE                users file (default users.json; env AUTHSVC_USERS)
    --token-ttl DURATION        token lifetime, 0 = never (default 24h; env AUTHSVC_TOKEN_TTL)
    --store STORE               token store: memory | redis://[user:pass@]host:port/db | rediss://...
                                (default memory; env AUTHSVC_STORE)
    --store-prefix PREFIX       key prefix in a shared Redis (default authsvc:; env AUTHSVC_STORE_PREFIX)
    --max-tokens-per-user N     live tokens per user; the oldest is evicted, 0 = no limit
                                (default 100; env AUTHSVC_MAX_TOKENS_PER_USER)
    --reload-interval DURATION  how often to check the users file for changes
                                (default 1s; env AUTHSVC_RELOAD_INTERVAL)
    --log-format text|json      log format (default text; env AUTHSVC_LOG_FORMAT)
    --access-log BOOL           one log line per request (default true; env AUTHSVC_ACCESS_LOG)
    --metrics-addr ADDR         serve /metrics there instead of on --addr (env AUTHSVC_METRICS_ADDR)
    --cors-origin ORIGIN        let pages from ORIGIN call the API; repeatable (env AUTHSVC_CORS_ORIGIN)
    --trusted-proxy CIDR        believe X-Forwarded-For from these proxies; repeatable
                                (env AUTHSVC_TRUSTED_PROXY)
  login throttling (env AUTHSVC_<FLAG>, e.g. AUTHSVC_LOGIN_FAILURES):
    --login-failures N          failures per (username, client) before backoff (default 5)
    --login-backoff DURATION    first backoff, doubled per further failure (default 1s)
    --login-max-backoff DURATION  backoff cap (default 5m)
    --login-window DURATION     a failure streak is forgotten after this long (default 15m)
    --user-failures N           failures per username over all clients before it is refused (default 100)
    --login-rate R              login attempts per second per client address (default 1)
    --login-burst N             ... at once (default 10)
    --throttle-entries N        cap on each throttle table (default 100000)
  password checking (env AUTHSVC_<FLAG>):
    --bcrypt-slots N            checks at once (default GOMAXPROCS)
    --bcrypt-queue N            checks waiting for a slot (default 4 x slots)
    --bcrypt-wait DURATION      longest wait for a slot before 503 (default 2s)
    --refusal-delay DURATION    hold a refused login this long before replying (default 250ms)
  authsvc user add    [--users F] [--admin] [--name N] [--email E] [--group G]... [--cost C] USERNAME
  authsvc user passwd [--users F] [--cost C] USERNAME
  authsvc user del    [--users F] USERNAME
  authsvc user disable|enable [--users F] USERNAME
  authsvc user list   [--users F]
  authsvc hash [--cost C]          print the bcrypt hash of the password on stdin
  authsvc version                  print the version and build information

Passwords are read from stdin (the first line), never from a flag; on a
terminal without echo. --users defaults to $AUTHSVC_USERS, else users.json.
--cost defaults to 12.
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
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usagef("unknown command %q; see authsvc --help", cmd)
}
