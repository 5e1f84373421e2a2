package integration

import (
	"authsvc/integration/harness"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// TestLoginAfterRehashElsewhere: a login with the right password on an
// instance whose copy of the users file is behind succeeds, even when,
// since that copy, another instance rehashed the user's password (a
// rehash changes neither the password nor the stamp) and a user command
// moved the user's stamp (user reset-mfa), which the store was told of.
// The store refuses the login's token (ErrSuperseded); the login must
// then be decided again on the directory as it is now, where the user
// still has the password just checked (docs/design/tokens.md, "A token
// an instance issues on a state the directory has already left").
//
// Found by TestModelFleet (file+redis, seed 2, under load): afresh
// compared the stored hash strings, not the password, and answered 401
// invalid_credentials to the right password.
func TestLoginAfterRehashElsewhere(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	harness.RequireBinary(t)
	redisURL, _, _ := testservers.Redis(t)
	dir := t.TempDir()
	users := filepath.Join(dir, "users.json")
	const pw = "carol-rehash-race-passphrase"
	harness.AddUser(t, users, "carol", pw) // at cost 4: serve's policy (5) rehashes it at the first login
	harness.WriteKeyFile(t, filepath.Join(dir, "fleet.key"))
	common := []string{"--users", users, "--secret-key-file", filepath.Join(dir, "fleet.key"), "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--cost", "5"}
	baseA, _, stopA := harness.ServeBinary(t, nil, append(common, "--reload-interval", "50ms")...)
	defer stopA()
	// B reloads only when a check makes it (Recheck): its copy stays behind.
	baseB, _, stopB := harness.ServeBinary(t, nil, append(common, "--reload-interval", "1h")...)
	defer stopB()
	login := fmt.Sprintf(`{"username":"carol","password":%q}`, pw)

	// On A: a login, whose rehash rewrites carol's hash, and an enrolment
	// left pending, for reset-mfa to remove.
	before := harness.MustReadUsers(t, users)["carol"].PasswordHash
	tok := harness.TokenOf(t, "carol's login on A", harness.Do(t, "POST", baseA+"/api/auth/login/", "", login))
	for deadline := time.Now().Add(5 * time.Second); harness.MustReadUsers(t, users)["carol"].PasswordHash == before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("carol's hash not rehashed within 5 s of her login on A")
		}
	}
	if r := harness.Do(t, "POST", baseA+"/api/auth/mfa/totp/", tok, fmt.Sprintf(`{"password":%q}`, pw)); r.Status != 200 {
		t.Fatalf("enrolment on A = %v; want 200", r)
	}
	// The operator resets her second factors: her stamp moves; A reloads
	// and tells the store.
	harness.MustRunCLI(t, "", "user", "reset-mfa", "--users", users, "carol")
	harness.WaitInfo(t, baseA, tok, 401, "carol's token on A after user reset-mfa")

	// B, whose copy has the old hash and the old stamp, checks the right
	// password there; the store refuses its token; B must decide again on
	// the directory, where carol still has that password.
	if r := harness.Do(t, "POST", baseB+"/api/auth/login/", "", login); r.Status != 200 {
		t.Errorf("carol's login on B with her password, after a rehash on A and user reset-mfa = %v; want 200", r)
	}
}
