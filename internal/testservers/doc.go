// Package testservers starts throwaway redis-server and PostgreSQL
// processes on free 127.0.0.1 ports for tests, never mocks. Without the
// binaries a test is skipped, or fails when AUTHSVC_REQUIRE_REDIS=1 or
// AUTHSVC_REQUIRE_POSTGRES=1 (as in CI). PostgreSQL tests that never stop
// the server share one cluster per test binary (SharedPostgres). It must
// not be imported outside tests. Under go test -short every server test
// skips.
package testservers
