package integration

import (
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
	t.Parallel()
	addrs, _ := testservers.RedisCluster(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	storeURL := "redis+cluster://" + strings.Join(addrs, ",")
	args := []string{"--users", usersPath, "--store", storeURL, "--store-prefix", testservers.UniquePrefix()}
	baseA, logA, stopA := startServer(t, nil, args...)
	baseB, logB, stopB := startServer(t, nil, args...)
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
	aliceA := tokenOf(t, "alice on A", miLogin(t, baseA, "alice"))
	aliceB := tokenOf(t, "alice on B", miLogin(t, baseB, "alice"))
	wantInfo(t, "A's token on B", baseB, aliceA, aliceInfo)
	wantInfo(t, "B's token on A", baseA, aliceB, aliceInfo)

	// 2. A logout on A: refused on A at once, on B within revocationBound
	// (B cached the token above); alice's other token lives on.
	if r := miDo(t, "POST", baseA+"/api/auth/logout/", aliceA, ""); r.status != 204 {
		t.Fatalf("logout on A = %v; want 204", r)
	}
	wantInvalidTokenWithin(t, "token logged out on A, on B", baseB, aliceA)
	wantInvalidToken(t, "token logged out on A, on A", baseA, aliceA)
	wantInfo(t, "alice's other token after a logout, on A", baseA, aliceB, aliceInfo)

	// 3. A logoutall on B ends alice's tokens everywhere, not bob's.
	bobA := tokenOf(t, "bob on A", miLogin(t, baseA, "bob"))
	alice2A := tokenOf(t, "second alice on A", miLogin(t, baseA, "alice"))
	wantInfo(t, "second alice on A, on A", baseA, alice2A, aliceInfo)
	if r := miDo(t, "POST", baseB+"/api/auth/logoutall/", aliceB, ""); r.status != 204 {
		t.Fatalf("logoutall on B = %v; want 204", r)
	}
	wantInvalidTokenWithin(t, "alice's token after logoutall on B, on A", baseA, alice2A)
	wantInvalidToken(t, "alice's token after logoutall on B, on B", baseB, aliceB)
	wantInfo(t, "bob's token after alice's logoutall, on B", baseB, bobA, bobInfo)
}

// TestImportDjangoTokensCluster: user import --store redis+cluster:// puts
// the fixture's DRF keys on the cluster, where a server on the same URL
// finds them; importing again refreshes them, and a key logged out since
// stays dead (an import never brings a dead token back).
func TestImportDjangoTokensCluster(t *testing.T) {
	t.Parallel()
	addrs, _ := testservers.RedisCluster(t)
	storeURL := "redis+cluster://" + strings.Join(addrs, ",")
	prefix := testservers.UniquePrefix()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	importArgs := []string{"user", "import", "--users", usersPath, "--from", "django", "--store", storeURL, "--store-prefix", prefix, django42Fixture}
	code, stdout, stderr := runCLI(t, "", nil, importArgs...)
	if code != 1 { // bill's record and adi's device are skipped, as in TestImportDjangoTokens
		t.Errorf("user import --store %s = exit %d, stderr:\n%s\nwant exit 1", storeURL, code, stderr)
	}
	wantTokenTally(t, "user import --store redis+cluster://", stdout, false, importTally{imported: 15, skipped: 1})

	base, _, stop := startServer(t, nil, "--users", usersPath, "--store", storeURL, "--store-prefix", prefix)
	defer stop()
	ada := django42Tokens["ada"]
	if r := miDo(t, "GET", base+"/api/auth/info", ada, ""); r.status != 200 || !strings.Contains(r.body, `"username":"ada"`) {
		t.Fatalf("info with ada's imported DRF key = %v; want 200 as ada", r)
	}
	if r := miDo(t, "POST", base+"/api/auth/logout/", ada, ""); r.status != 204 {
		t.Fatalf("logout with ada's imported DRF key = %v; want 204", r)
	}
	runCLI(t, "", nil, importArgs...)
	wantInvalidToken(t, "ada's DRF key logged out, then imported again", base, ada)
}
