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

// TestFleetThrottleShared: two instances on one Redis throttle as one:
// failures split across them count together, so the pair's sixth attempt
// is refused on either, the right password included.
func TestFleetThrottleShared(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	args := []string{"--users", usersPath, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--cost", "4"}
	baseA, _, stopA := harness.StartServer(t, nil, args...)
	defer stopA()
	baseB, _, stopB := harness.StartServer(t, nil, args...)
	defer stopB()
	wrong := `{"username":"alice","password":"wrong"}`
	for i, base := range []string{baseA, baseB, baseA, baseB, baseA} {
		if resp, body := servertest.PostJSON(t, base+"/api/auth/login/", wrong); resp.StatusCode != 401 {
			t.Fatalf("wrong password %d = %d %s; want 401", i+1, resp.StatusCode, body)
		}
	}
	for name, base := range map[string]string{"A": baseA, "B": baseB} {
		resp, body := servertest.PostJSON(t, base+"/api/auth/login/", `{"username":"alice","password":"alice-pw"}`)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("right password on %s after 5 failures split over two instances = %d %s; want 429 with Retry-After", name, resp.StatusCode, body)
		}
	}
}

// TestFleet: two instances on one PostgreSQL and one Redis, as a fleet
// runs (README "Running a fleet"): a user added on the CLI logs in on
// both; a password change on one is in force on the other; failures split
// across them throttle as one; PostgreSQL stopped gives 503 on both within
// API.md's bounds, and its return heals both without a restart.
func TestFleet(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	pgURL, stopPG, restartPG := testservers.Postgres(t)
	dbURL := testservers.NewDatabase(t, pgURL)
	redisURL, _, _ := testservers.Redis(t)
	args := []string{"--users", dbURL, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--cost", "4", "--reload-interval", "200ms"}
	baseA, logA, stopA := harness.StartServer(t, nil, args...)
	defer stopA()
	baseB, logB, stopB := harness.StartServer(t, nil, args...)
	defer stopB()
	// The empty database got its admin from one instance, which alone printed the password.
	if a, b := strings.Contains(logA.String(), "password: "), strings.Contains(logB.String(), "password: "); a == b {
		t.Errorf("bootstrap password printed by A %v, by B %v; want exactly one of them", a, b)
	}

	// A user added on the CLI, against the database, logs in on both.
	if code, _, stderr := harness.RunCLI(t, "a fleet-wide passphrase\n", nil, "user", "add", "--users", dbURL, "--cost", "4", "fay"); code != 0 {
		t.Fatalf("user add fay against PostgreSQL = exit %d, %s", code, stderr)
	}
	tokA := harness.WaitLogin(t, baseA, "fay", "a fleet-wide passphrase")
	tokB := harness.WaitLogin(t, baseB, "fay", "a fleet-wide passphrase")

	// A password change on A: in force on B, and B's earlier token is dead.
	if r := harness.Do(t, "POST", baseA+"/api/auth/password/", tokA, harness.ChangeBody("a fleet-wide passphrase", "another fleet passphrase")); r.Status != 200 {
		t.Fatalf("password change on A = %s; want 200", r)
	}
	harness.WantInvalidTokenWithin(t, "B, fay's token from before the change on A", baseB, tokB)
	harness.WaitLogin(t, baseB, "fay", "another fleet passphrase")

	// Failures split across the two instances throttle as one.
	for i, base := range []string{baseA, baseB, baseA, baseB, baseA} {
		if resp, body := servertest.PostJSON(t, base+"/api/auth/login/", `{"username":"fay","password":"wrong"}`); resp.StatusCode != 401 {
			t.Fatalf("wrong password %d = %d %s; want 401", i+1, resp.StatusCode, body)
		}
	}
	if resp, _ := servertest.PostJSON(t, baseB+"/api/auth/login/", `{"username":"fay","password":"another fleet passphrase"}`); resp.StatusCode != 429 {
		t.Errorf("right password on B after 5 failures split over A and B = %d; want 429", resp.StatusCode)
	}

	// PostgreSQL stopped: login 503 within 5 s, token checks 503 within 5 s
	// more (cached state is trusted for 5 s), /readyz 503; back: healed.
	if stopPG == nil {
		t.Skip("AUTHSVC_TEST_POSTGRES names a server this test cannot stop")
	}
	admin := harness.WaitLogin(t, baseA, "fay", "another fleet passphrase")
	stopPG()
	for _, base := range []string{baseA, baseB} {
		start := time.Now()
		for {
			r := harness.Do(t, "GET", base+"/api/auth/info", admin, "")
			if r.Status == 503 {
				break
			}
			if time.Since(start) > 2*harness.HealBound() {
				t.Fatalf("info on %s with PostgreSQL stopped = %s after %v; want 503 within %v", base, r, time.Since(start), 2*harness.HealBound())
			}
			time.Sleep(100 * time.Millisecond)
		}
		harness.WantUnavailable(t, "login", harness.Do(t, "POST", base+"/api/auth/login/", "", `{"username":"bob","password":"bob-pw"}`), true)
		harness.WantUnavailable(t, "readyz", harness.Do(t, "GET", base+"/readyz", "", ""), true)
	}
	restartPG()
	for _, base := range []string{baseA, baseB} {
		start := time.Now()
		for {
			if r := harness.Do(t, "GET", base+"/api/auth/info", admin, ""); r.Status == 200 {
				break
			}
			if time.Since(start) > harness.HealBound() {
				t.Fatalf("info on %s not healed within %v of PostgreSQL's return", base, harness.HealBound())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestImportFileIntoPostgres: a users file moves into PostgreSQL whole,
// hashes and cut-offs included, and its users log in against the database.
func TestImportFileIntoPostgres(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	pgURL := testservers.SharedPostgres(t)
	dbURL := testservers.NewDatabase(t, pgURL)
	file := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(file, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := harness.RunCLI(t, "", nil, "user", "import", "--users", dbURL, "--from", "file", file)
	if code != 0 || harness.ImportedUsers(stdout, false) != 3 {
		t.Fatalf("user import --from file into PostgreSQL = exit %d, %q, %q; want 0, 3 users", code, stdout, stderr)
	}
	if code, _, _ := harness.RunCLI(t, "", nil, "user", "import", "--users", dbURL, "--from", "file", file); code != 1 {
		t.Errorf("the same import again = exit %d; want 1 (every user already there)", code)
	}
	base, _, stop := harness.StartServer(t, nil, "--users", dbURL, "--cost", "4")
	defer stop()
	servertest.LoginToken(t, base, "alice", "alice-pw")
	if resp, _ := servertest.PostJSON(t, base+"/api/auth/login/", `{"username":"carol","password":"carol-pw"}`); resp.StatusCode != 401 {
		t.Errorf("carol (disabled in the file) logs in against the database = %d; want 401", resp.StatusCode)
	}
}
