package testservers

import "testing"

// skipShort skips t under go test -short: a test that starts a server is
// not for the edit-and-test loop, and make test (which .ci/run runs) never
// passes -short. It comes before the AUTHSVC_REQUIRE_* checks, which turn
// a missing server's skip into a failure: -short is asked for.
func skipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: starts %s; make test runs it", what)
	}
}
