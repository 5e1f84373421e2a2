package cli

import (
	"time"

	"authsvc/internal/password"
	"authsvc/internal/servertest"
)

// testConfig is serve's default configuration for a test, with the users
// file at usersPath, generous per-address limits (every test request comes
// from 192.0.2.1), two hasher slots and refusals answered at once.
func testConfig(usersPath string) serveConfig {
	c := defaultServeConfig()
	c.usersPath = usersPath
	c.throttle.AddrRate, c.throttle.AddrBurst = 1000, 1000
	c.passwordSlots, c.passwordQueue, c.passwordWait = 2, 8, 2*time.Second
	c.refusalDelay = 0
	// New hashes as cheap as testUsers' own: no rehash on login, fast password changes.
	c.hashPolicy.Scheme, c.hashPolicy.BcryptCost = password.SchemeBcrypt, servertest.TestCost
	return c
}
