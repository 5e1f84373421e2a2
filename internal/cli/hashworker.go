package cli

import (
	"context"

	"authsvc/internal/password"
)

// hashWorker runs "authsvc hash-worker", which only the server starts: a
// process of its password hasher pool (internal/password/pool.go), which
// checks the passwords sent on stdin and answers on stdout. It is not in
// --help.
func hashWorker(_ context.Context, e *env, _ []string) error {
	return password.RunWorker(e.stdin, e.stdout)
}
