package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/users"
)

// TestTwoFactorFleet runs two servers on one users file, one secret key
// and one Redis: a TOTP code accepted on one is refused on the other, an
// mfa_token's 5 attempts hold across both even when 30 codes are sent at
// once, and a logoutall on one ends an mfa_token the other handed out.
func TestTwoFactorFleet(t *testing.T) {
	redisURL, _, _ := testservers.Redis(t)
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	if err := users.WriteFile(usersPath, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	args := []string{"--users", usersPath, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(),
		"--secret-key-file", filepath.Join(dir, "fleet.key"), "--reload-interval", "50ms",
		"--login-failures", "100", "--user-failures", "100", "--login-burst", "1000", "--login-rate", "1000"}
	// The key file must exist for --secret-key-file: the first instance
	// would not create it. Give it as an operator would.
	writeKeyFile(t, filepath.Join(dir, "fleet.key"))
	baseA, logA, stopA := startServer(t, nil, args...)
	baseB, logB, stopB := startServer(t, nil, args...)
	defer func() {
		stopA()
		stopB()
		if t.Failed() {
			t.Logf("A:\n%s\nB:\n%s", logA, logB)
		}
	}()

	token := tokenOf(t, "alice on A", miLogin(t, baseA, "alice"))
	status, body := mfaCall(t, "POST", baseA+"/api/auth/mfa/totp/", token, `{"password":"alice-pw"}`)
	if status != 200 {
		t.Fatalf("enrol on A = %d %v", status, body)
	}
	secret32 := body["secret"].(string)
	confirmedAt := time.Now()
	status, body = mfaCall(t, "POST", baseA+"/api/auth/mfa/totp/confirm/", token, `{"code":"`+totpCode(t, secret32, confirmedAt)+`"}`)
	if status != 200 {
		t.Fatalf("confirm on A = %d %v", status, body)
	}
	recovery := body["recovery_codes"].([]any)
	// B sees the factors once it has reloaded the file.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if status, _ = mfaCall(t, "POST", baseB+"/api/auth/login/", "", `{"username":"alice","password":"alice-pw"}`); status == 401 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	next := totpCode(t, secret32, confirmedAt.Add(30*time.Second))
	login := func(base, code string) int {
		status, _ := mfaCall(t, "POST", base+"/api/auth/login/", "", fmt.Sprintf(`{"username":"alice","password":"alice-pw","otp":%q}`, code))
		return status
	}
	if got := login(baseA, next); got != 200 {
		t.Fatalf("one-step login on A with the next code = %d; want 200", got)
	}
	if got := login(baseB, next); got != 401 {
		t.Errorf("the same code on B = %d; want 401: each code works once in the fleet", got)
	}
	if got := login(baseA, next); got != 401 {
		t.Errorf("the same code again on A = %d; want 401", got)
	}

	// 30 codes at once for one mfa_token, half to each instance.
	_, body = mfaCall(t, "POST", baseA+"/api/auth/login/", "", `{"username":"alice","password":"alice-pw"}`)
	mfaTok, _ := body["mfa_token"].(string)
	var wg sync.WaitGroup
	var mu sync.Mutex // guards counts
	counts := map[string]int{}
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := baseA
			if i%2 == 1 {
				base = baseB
			}
			status, body := mfaCall(t, "POST", base+"/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+strconv.Itoa(200000+i)+`"}`)
			mu.Lock()
			counts[fmt.Sprint(status, " ", body["code"])]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if counts["401 invalid_credentials"] > 5 || counts["401 invalid_credentials"]+counts["401 invalid_token"] != 30 {
		t.Errorf("30 parallel codes for one mfa_token on two instances = %v; want at most 5 checked (invalid_credentials), the rest invalid_token", counts)
	}

	// An mfa_token from A dies with a logoutall on B.
	_, body = mfaCall(t, "POST", baseA+"/api/auth/login/", "", `{"username":"alice","password":"alice-pw"}`)
	mfaTok, _ = body["mfa_token"].(string)
	if st, _ := mfaCall(t, "POST", baseB+"/api/auth/logoutall/", token, ""); st != 204 {
		t.Fatalf("logoutall on B = %d; want 204", st)
	}
	if st, body := mfaCall(t, "POST", baseA+"/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+recovery[0].(string)+`"}`); st != 401 || body["code"] != "invalid_token" {
		t.Errorf("second step on A after logoutall on B = %d %v; want 401 invalid_token", st, body)
	}
}
