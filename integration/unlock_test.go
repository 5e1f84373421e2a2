package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// TestUserUnlock: `authsvc user unlock` lifts a lockout, per (user,
// client) and per user, on every instance reading the same users, within
// 5 s; the throttle counts afresh after it, and other users stay locked
// (issue 19, point 10).
func TestUserUnlock(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	for _, tt := range []struct {
		name   string
		limits []string // the limit that locks alice after three failures
	}{
		{"per user and client", []string{"--login-failures", "3", "--login-max-backoff", "1h", "--login-backoff", "1h"}},
		{"per user", []string{"--user-failures", "3"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := harness.WriteTestUsers(t)
			args := append([]string{"--users", path, "--cost", "4", "--reload-interval", "100ms", "--login-rate", "1000", "--login-burst", "1000"}, tt.limits...)
			base, _, stop := harness.StartServer(t, nil, args...)
			defer stop()
			testUnlock(t, path, base)
		})
	}
	t.Run("two instances on one Redis throttle", func(t *testing.T) {
		t.Parallel()
		redisURL, _, _ := testservers.Redis(t)
		path := filepath.Join(t.TempDir(), "users.json")
		if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
			t.Fatal(err)
		}
		args := []string{"--users", path, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--cost", "4",
			"--reload-interval", "100ms", "--login-rate", "1000", "--login-burst", "1000", "--user-failures", "3"}
		baseA, _, stopA := harness.StartServer(t, nil, args...)
		defer stopA()
		baseB, _, stopB := harness.StartServer(t, nil, args...)
		defer stopB()
		testUnlock(t, path, baseA, baseB)
	})
}

// testUnlock locks alice and bob out with three wrong passwords each,
// sent to the instances at bases in turn, unlocks alice with the CLI, and
// checks what each instance then answers.
func testUnlock(t *testing.T, path string, bases ...string) {
	t.Helper()
	login := func(base, username, password string) int {
		resp, _ := servertest.PostJSON(t, base+"/api/auth/login/", `{"username":"`+username+`","password":"`+password+`"}`)
		return resp.StatusCode
	}
	for _, name := range []string{"alice", "bob"} {
		for i := range 3 {
			if code := login(bases[i%len(bases)], name, "wrong"); code != http.StatusUnauthorized {
				t.Fatalf("wrong password %d for %s = %d; want 401", i+1, name, code)
			}
		}
		for _, base := range bases {
			if code := login(base, name, name+"-pw"); code != http.StatusTooManyRequests {
				t.Fatalf("right password for %s after 3 failures = %d; want 429 (locked out)", name, code)
			}
		}
	}
	harness.MustRunCLI(t, "", "user", "unlock", "--users", path, "alice")
	for _, base := range bases {
		deadline := time.Now().Add(5 * time.Second)
		for login(base, "alice", "alice-pw") != http.StatusOK {
			if time.Now().After(deadline) {
				t.Fatalf("right password for alice 5 s after `user unlock alice` still refused on %s; want 200 within 5 s", base)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code := login(base, "bob", "bob-pw"); code != http.StatusTooManyRequests {
			t.Errorf("right password for bob after `user unlock alice` = %d; want 429 (bob is still locked out)", code)
		}
	}
	// The throttle counts alice's failures afresh: three more lock her out again.
	for i := range 3 {
		if code := login(bases[i%len(bases)], "alice", "wrong"); code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d for alice after the unlock = %d; want 401", i+1, code)
		}
	}
	for _, base := range bases {
		if code := login(base, "alice", "alice-pw"); code != http.StatusTooManyRequests {
			t.Errorf("right password for alice after 3 new failures = %d; want 429", code)
		}
	}
}
