// Package passwordtest holds password fixtures for the tests of the
// packages above internal/password: fast hashes, made and checked the way
// the server makes and checks them. It must not be imported outside tests.
package passwordtest

import (
	"testing"

	"authsvc/internal/password"

	"golang.org/x/crypto/bcrypt"
)

// Hash is bcrypt("pw") at cost 4.
const Hash = "$2a$04$V8Q8Epg2X6wrj9o4CB/dsOsmSNtQq0PjAZGGWfx2E7GlYRFT2lXVK"

// Cost is the bcrypt cost tests hash at: the cheapest there is.
const Cost = bcrypt.MinCost

// MustHash returns the bcrypt hash of pw at cost, failing t if it cannot.
func MustHash(t testing.TB, pw string, cost int) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// Verify checks a password on the caller's goroutine, as a nil pool does.
var Verify = (*password.Pool)(nil).Verify
