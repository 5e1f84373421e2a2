package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"path/filepath"
	"strings"
	"testing"

	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// TestMultiInstanceCluster runs two servers on one three-primary Redis
// Cluster (--store redis+cluster://…) and checks that they share tokens and
// revocations as on one Redis (TestMultiInstance's first part): a token
// from either works on the other, and a logout or a logoutall on one is
// refused by the other within revocationBound. The
// cluster's PUBLISH reaches every node, so each instance hears the other's
// invalidations whichever node it subscribed on.
func TestMultiInstanceCluster(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	addrs, _ := testservers.RedisCluster(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	storeURL := "redis+cluster://" + strings.Join(addrs, ",")
	args := []string{"--cost", "4", "--users", usersPath, "--store", storeURL, "--store-prefix", testservers.UniquePrefix()}
	baseA, logA, stopA := harness.StartServer(t, nil, args...)
	baseB, logB, stopB := harness.StartServer(t, nil, args...)
	defer func() {
		if err := stopA(); err != nil {
			t.Errorf("run (A) after stop = %v; want nil", err)
		}
		if err := stopB(); err != nil {
			t.Errorf("run (B) after stop = %v; want nil", err)
		}
		if t.Failed() {
			t.Logf("server A log:\n%s", logA)
			t.Logf("server B log:\n%s", logB)
		}
	}()

	// 1. A token from either server works on the other.
	aliceA := harness.TokenOf(t, "alice on A", harness.Login(t, baseA, "alice"))
	aliceB := harness.TokenOf(t, "alice on B", harness.Login(t, baseB, "alice"))
	harness.WantInfo(t, "A's token on B", baseB, aliceA, harness.AliceInfo)
	harness.WantInfo(t, "B's token on A", baseA, aliceB, harness.AliceInfo)

	// 2. A logout on A: refused on A at once, on B within revocationBound
	// (B cached the token above); alice's other token lives on.
	if r := harness.Do(t, "POST", baseA+"/api/auth/logout/", aliceA, ""); r.Status != 204 {
		t.Fatalf("logout on A = %v; want 204", r)
	}
	harness.WantInvalidTokenWithin(t, "token logged out on A, on B", baseB, aliceA)
	harness.WantInvalidToken(t, "token logged out on A, on A", baseA, aliceA)
	harness.WantInfo(t, "alice's other token after a logout, on A", baseA, aliceB, harness.AliceInfo)

	// 3. A logoutall on B ends alice's tokens everywhere, not bob's.
	bobA := harness.TokenOf(t, "bob on A", harness.Login(t, baseA, "bob"))
	alice2A := harness.TokenOf(t, "second alice on A", harness.Login(t, baseA, "alice"))
	harness.WantInfo(t, "second alice on A, on A", baseA, alice2A, harness.AliceInfo)
	if r := harness.Do(t, "POST", baseB+"/api/auth/logoutall/", aliceB, ""); r.Status != 204 {
		t.Fatalf("logoutall on B = %v; want 204", r)
	}
	harness.WantInvalidTokenWithin(t, "alice's token after logoutall on B, on A", baseA, alice2A)
	harness.WantInvalidToken(t, "alice's token after logoutall on B, on B", baseB, aliceB)
	harness.WantInfo(t, "bob's token after alice's logoutall, on B", baseB, bobA, harness.BobInfo)
}

// TestImportDjangoTokensCluster: user import --store redis+cluster:// puts
// the fixture's DRF keys on the cluster, where a server on the same URL
// finds them; importing again refreshes them, and a key logged out since
// stays dead (an import never brings a dead token back).
func TestImportDjangoTokensCluster(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	addrs, _ := testservers.RedisCluster(t)
	storeURL := "redis+cluster://" + strings.Join(addrs, ",")
	prefix := testservers.UniquePrefix()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	importArgs := []string{"user", "import", "--users", usersPath, "--from", "django", "--store", storeURL, "--store-prefix", prefix, harness.Django42Fixture}
	code, stdout, stderr := harness.RunCLI(t, "", nil, importArgs...)
	if code != 1 { // bill's record and adi's device are skipped, as in TestImportDjangoTokens
		t.Errorf("user import --store %s = exit %d, stderr:\n%s\nwant exit 1", storeURL, code, stderr)
	}
	harness.WantTokenTally(t, "user import --store redis+cluster://", stdout, false, harness.ImportTally{Imported: 15, Skipped: 1})

	base, _, stop := harness.StartServer(t, nil, "--cost", "4", "--users", usersPath, "--store", storeURL, "--store-prefix", prefix)
	defer stop()
	ada := harness.Django42Tokens["ada"]
	if r := harness.Do(t, "GET", base+"/api/auth/info", ada, ""); r.Status != 200 || !strings.Contains(r.Body, `"username":"ada"`) {
		t.Fatalf("info with ada's imported DRF key = %v; want 200 as ada", r)
	}
	if r := harness.Do(t, "POST", base+"/api/auth/logout/", ada, ""); r.Status != 204 {
		t.Fatalf("logout with ada's imported DRF key = %v; want 204", r)
	}
	harness.RunCLI(t, "", nil, importArgs...)
	harness.WantInvalidToken(t, "ada's DRF key logged out, then imported again", base, ada)
}
