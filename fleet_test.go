package main

import (
	"path/filepath"
	"testing"
)

// TestFleetThrottleShared: two instances on one Redis throttle as one:
// failures split across them count together, so the pair's sixth attempt
// is refused on either, the right password included.
func TestFleetThrottleShared(t *testing.T) {
	redisURL, _, _ := startRedis(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := writeUsersFile(usersPath, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	args := []string{"--users", usersPath, "--store", redisURL, "--store-prefix", testPrefix(), "--cost", "4"}
	baseA, _, stopA := startServer(t, nil, args...)
	defer stopA()
	baseB, _, stopB := startServer(t, nil, args...)
	defer stopB()
	wrong := `{"username":"alice","password":"wrong"}`
	for i, base := range []string{baseA, baseB, baseA, baseB, baseA} {
		if resp, body := postJSON(t, base+"/api/auth/login/", wrong); resp.StatusCode != 401 {
			t.Fatalf("wrong password %d = %d %s; want 401", i+1, resp.StatusCode, body)
		}
	}
	for name, base := range map[string]string{"A": baseA, "B": baseB} {
		resp, body := postJSON(t, base+"/api/auth/login/", `{"username":"alice","password":"alice-pw"}`)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("right password on %s after 5 failures split over two instances = %d %s; want 429 with Retry-After", name, resp.StatusCode, body)
		}
	}
}
