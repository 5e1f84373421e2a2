package cli

import (
	"testing"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/users"

	"golang.org/x/crypto/bcrypt"
)

// testCost keeps bcrypt fast in tests.
const testCost = bcrypt.MinCost

// testUsers: alice (dev), bob (admin), carol (disabled). Each password is
// the username + "-pw".
func testUsers(t testing.TB) []users.User {
	t.Helper()
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), testCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	return []users.User{
		{Username: "alice", PasswordHash: hash("alice-pw"), Name: "Alice", Email: "alice@example.com", Groups: []string{"dev"}},
		{Username: "bob", PasswordHash: hash("bob-pw"), Name: "Bob", Groups: []string{}, Admin: true},
		{Username: "carol", PasswordHash: hash("carol-pw"), Groups: []string{}, Disabled: true},
	}
}

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
	c.hashPolicy.Scheme, c.hashPolicy.BcryptCost = password.SchemeBcrypt, testCost
	return c
}
