package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// freshTokenFleet is one topology of TestFreshTokenLivesEverywhere: the
// flags of two instances sharing a directory and a token store, and how a
// user gets into that directory.
type freshTokenFleet struct {
	name  string
	start func(t *testing.T) (args []string)
}

// freshTokenFleets are API.md's shared-store topologies: a users file and
// one Redis, PostgreSQL and one Redis, a users file and a Redis Cluster.
// Each instance reloads the directory at the default interval, as users
// run it: the second instance is behind the first for about a second
// after every change.
func freshTokenFleets() []freshTokenFleet {
	fileUsers := func(t *testing.T, dir string) string {
		path := filepath.Join(dir, "users.json")
		if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return []freshTokenFleet{
		{"file+redis", func(t *testing.T) []string {
			dir := t.TempDir()
			redisURL, _, _ := testservers.Redis(t)
			harness.WriteKeyFile(t, filepath.Join(dir, "fleet.key"))
			return []string{"--users", fileUsers(t, dir), "--store", redisURL, "--store-prefix", testservers.UniquePrefix(),
				"--secret-key-file", filepath.Join(dir, "fleet.key")}
		}},
		{"postgres+redis", func(t *testing.T) []string {
			dir := t.TempDir()
			pgURL := testservers.SharedPostgres(t)
			dbURL := testservers.NewDatabase(t, pgURL)
			redisURL, _, _ := testservers.Redis(t)
			harness.WriteKeyFile(t, filepath.Join(dir, "fleet.key"))
			if code, _, stderr := harness.RunCLI(t, "alice-pw\n", nil, "user", "add", "--users", dbURL, "--cost", "4", "alice"); code != 0 {
				t.Fatalf("user add alice = exit %d, %s", code, stderr)
			}
			return []string{"--users", dbURL, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(),
				"--secret-key-file", filepath.Join(dir, "fleet.key")}
		}},
		{"file+cluster", func(t *testing.T) []string {
			dir := t.TempDir()
			addrs, _ := testservers.RedisCluster(t)
			harness.WriteKeyFile(t, filepath.Join(dir, "fleet.key"))
			return []string{"--users", fileUsers(t, dir), "--store", "redis+cluster://" + strings.Join(addrs, ","),
				"--store-prefix", testservers.UniquePrefix(), "--secret-key-file", filepath.Join(dir, "fleet.key")}
		}},
	}
}

// TestFreshTokenLivesEverywhere: a token that one instance hands out on
// the user's newest state (a password change's reply, the token re-bound
// by a second-factor confirm or removal) answers 200 on the other
// instance before and after that one has seen the change, and on the first
// too (API.md, Tokens: a live token is live on every instance). Before
// the rule, the lagging instance took the newer stamp for a dead one and
// revoked the token for the whole fleet.
func TestFreshTokenLivesEverywhere(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	for _, fleet := range freshTokenFleets() {
		t.Run(fleet.name, func(t *testing.T) {
			t.Parallel()
			args := append(fleet.start(t), "--cost", "4", "--login-failures", "100", "--user-failures", "100")
			baseA, logA, stopA := harness.StartServer(t, nil, args...)
			baseB, logB, stopB := harness.StartServer(t, nil, args...)
			defer func() {
				stopA()
				stopB()
				if t.Failed() {
					t.Logf("A:\n%s\nB:\n%s", logA, logB)
				}
			}()
			// liveEverywhere asks both instances, the lagging one first, for
			// about two reload intervals: every answer must be 200.
			liveEverywhere := func(what, token string) {
				t.Helper()
				for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); {
					for _, b := range []struct{ name, base string }{{"B", baseB}, {"A", baseA}} {
						if r := harness.Do(t, "GET", b.base+"/api/auth/info", token, ""); r.Status != 200 {
							t.Fatalf("%s: info on %s = %v; want 200 on every instance", what, b.name, r)
						}
					}
					time.Sleep(100 * time.Millisecond)
				}
			}

			// Both instances know alice's first password.
			harness.WaitLogin(t, baseB, "alice", "alice-pw")
			token := harness.TokenOf(t, "login on A", harness.Login(t, baseA, "alice"))
			r := harness.Do(t, "POST", baseA+"/api/auth/password/", token, harness.ChangeBody("alice-pw", "a brand new passphrase"))
			fresh := harness.TokenOf(t, "password change on A", r)
			liveEverywhere("the password change's token", fresh)

			// A second factor confirmed on A: the presenting token is re-bound.
			status, body := harness.MFACall(t, "POST", baseA+"/api/auth/mfa/totp/", fresh, `{"password":"a brand new passphrase"}`)
			if status != 200 {
				t.Fatalf("enrol on A = %d %v", status, body)
			}
			secret32 := body["secret"].(string)
			confirmedAt := time.Now()
			if status, body = harness.MFACall(t, "POST", baseA+"/api/auth/mfa/totp/confirm/", fresh, `{"code":"`+harness.TOTPCode(t, secret32, confirmedAt)+`"}`); status != 200 {
				t.Fatalf("confirm on A = %d %v", status, body)
			}
			recovery := body["recovery_codes"].([]any)
			liveEverywhere("the token that confirmed an authenticator", fresh)

			// Removed on A, with a recovery code: the token is re-bound again.
			if status, body = harness.MFACall(t, "DELETE", baseA+"/api/auth/mfa/totp/", fresh, `{"password":"a brand new passphrase","code":"`+recovery[0].(string)+`"}`); status != 204 {
				t.Fatalf("removal on A = %d %v", status, body)
			}
			liveEverywhere("the token that removed the authenticator", fresh)
		})
	}
}

// TestLaggingInstanceLogsIn: after a second factor is confirmed and removed
// on one instance (the password generation moves twice, the password and
// the factors end as they were), the right password logs in on an instance
// that has not reloaded yet: the store refuses the stamp of its copy, and
// the instance answers from the directory as it is now instead of 401
// invalid_credentials, which neither the old state nor the new one gives.
func TestLaggingInstanceLogsIn(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	harness.WriteKeyFile(t, filepath.Join(dir, "fleet.key"))
	args := []string{"--users", path, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--cost", "4",
		"--secret-key-file", filepath.Join(dir, "fleet.key")}
	baseA, _, stopA := harness.StartServer(t, nil, append(args, "--reload-interval", "100ms")...)
	defer stopA()
	baseB, _, stopB := harness.StartServer(t, nil, append(args, "--reload-interval", "1h")...)
	defer stopB()

	token := harness.TokenOf(t, "alice on A", harness.Login(t, baseA, "alice"))
	status, body := harness.MFACall(t, "POST", baseA+"/api/auth/mfa/totp/", token, `{"password":"alice-pw"}`)
	if status != 200 {
		t.Fatalf("enrol on A = %d %v", status, body)
	}
	secret32 := body["secret"].(string)
	if status, body = harness.MFACall(t, "POST", baseA+"/api/auth/mfa/totp/confirm/", token, `{"code":"`+harness.TOTPCode(t, secret32, time.Now())+`"}`); status != 200 {
		t.Fatalf("confirm on A = %d %v", status, body)
	}
	recovery := body["recovery_codes"].([]any)
	if status, body = harness.MFACall(t, "DELETE", baseA+"/api/auth/mfa/totp/", token, `{"password":"alice-pw","code":"`+recovery[0].(string)+`"}`); status != 204 {
		t.Fatalf("removal on A = %d %v", status, body)
	}
	// B has not reloaded (1h): its copy has alice's first generation.
	fresh := harness.TokenOf(t, "alice on B, behind two factor changes", harness.Login(t, baseB, "alice"))
	harness.WantInfo(t, "B's token, on A", baseA, fresh, harness.AliceInfo)
	harness.WantInfo(t, "B's token, on B", baseB, fresh, harness.AliceInfo)
	harness.WantInfo(t, "the re-bound token, on B", baseB, token, harness.AliceInfo)
}

// TestLaggingInstanceFollowsFactors: a login on an instance that has not
// seen a second factor come or go answers as the directory now has the
// user: mfa_required after a confirm on another instance, a token after a
// `user reset-mfa`, never 401 invalid_credentials for the right password
// (found by the model-based test: reset-mfa, then a login on a lagging
// instance).
func TestLaggingInstanceFollowsFactors(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "fleet.key")
	harness.WriteKeyFile(t, key)
	args := []string{"--users", path, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--cost", "4", "--secret-key-file", key}
	baseA, _, stopA := harness.StartServer(t, nil, append(args, "--reload-interval", "100ms")...)
	defer stopA()
	baseB, _, stopB := harness.StartServer(t, nil, append(args, "--reload-interval", "1h")...)
	defer stopB()
	confirm := func(base, user string) {
		t.Helper()
		token := harness.TokenOf(t, user+" on "+base, harness.Login(t, base, user))
		status, body := harness.MFACall(t, "POST", base+"/api/auth/mfa/totp/", token, `{"password":"`+user+`-pw"}`)
		if status != 200 {
			t.Fatalf("enrol %s = %d %v", user, status, body)
		}
		if status, body = harness.MFACall(t, "POST", base+"/api/auth/mfa/totp/confirm/", token, `{"code":"`+harness.TOTPCode(t, body["secret"].(string), time.Now())+`"}`); status != 200 {
			t.Fatalf("confirm %s = %d %v", user, status, body)
		}
	}

	// alice confirms an authenticator on A; B, behind, still has none for her.
	confirm(baseA, "alice")
	if r := harness.Login(t, baseB, "alice"); r.Status != 401 || r.Code() != "mfa_required" {
		t.Errorf("alice's password on B after a confirm on A = %v; want 401 mfa_required", r)
	}
	// bob confirms on B (B knows his factor), then user reset-mfa removes it.
	confirm(baseB, "bob")
	harness.MustRunCLI(t, "", "user", "reset-mfa", "--users", path, "bob")
	deadline := time.Now().Add(5 * time.Second)
	for {
		// A reloads within 100 ms and tells the store; B never reloads.
		r := harness.Login(t, baseB, "bob")
		if r.Status == 200 {
			break
		}
		if r.Code() != "mfa_required" || time.Now().After(deadline) {
			t.Fatalf("bob's password on B after user reset-mfa = %v; want mfa_required until the store hears of it, then 200", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
