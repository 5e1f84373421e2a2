package cli

import (
	"testing"

	"authsvc/internal/testservers"
)

// TestCLITokenPostgres: token create, list and revoke, and user list's
// count, on PostgreSQL as on a users file.
func TestCLITokenPostgres(t *testing.T) {
	t.Parallel()
	pgURL := testservers.SharedPostgres(t)
	testTokenLifecycle(t, testservers.NewDatabase(t, pgURL))
}
