package django

import (
	"authsvc/integration/harness"
	"authsvc/internal/mfa/mfatest"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDjangoOTPLogin: the django-otp users of the Django fixture, imported,
// log in to a running server with their Django password and a code
// computed from their device's key (the fixture's README), each as
// django-otp would take it: whitfield's used steps stay used, martin's
// drift is kept, ralph's 60-second 8-digit device works, whitfield's
// static tokens are recovery codes, and adi's unconfirmed device is none.
func TestDjangoOTPLogin(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	code, stdout, stderr := harness.RunCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "django", harness.Django42Fixture)
	if code != 1 || !strings.HasSuffix(stdout, "; factors 4 imported, 0 updated, 0 unchanged, 1 skipped\n") {
		t.Fatalf("user import = exit %d, %q; want 1 (bill and adi's device skipped), 4 devices imported\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = harness.RunCLI(t, "", nil, "user", "import", "--update", "--users", usersPath, "--from", "django", harness.Django42Fixture)
	if code != 1 || !strings.HasSuffix(stdout, "; factors 0 imported, 0 updated, 4 unchanged, 1 skipped\n") {
		t.Fatalf("user import --update again = exit %d, %q; want 1, the 4 devices unchanged\n%s", code, stdout, stderr)
	}
	base, log, stop := harness.ServeBinary(t, nil, "--users", usersPath, "--cost", "4")
	defer func() {
		stop()
		if t.Failed() {
			t.Logf("server log:\n%s", log)
		}
	}()
	login := func(username, password, otp string) (int, map[string]any) {
		t.Helper()
		body := fmt.Sprintf(`{"username":%q,"password":%q}`, username, password)
		if otp != "" {
			body = fmt.Sprintf(`{"username":%q,"password":%q,"otp":%q}`, username, password, otp)
		}
		return harness.MFACall(t, "POST", base+"/api/auth/login/", "", body)
	}
	now := time.Now()
	const (
		whitfieldKey = "4a2291bf0f094f38a9972b8b325af3da6af6f5d2"
		martinKey    = "f1279cb945aeb214a7cdef23c00d92c23750a1b82884d2425ee8641f1d795b21"
		ralphKey     = "dbfddd91635aa1ef46ddeb97512e3bfb3b7ab605"
		whitfieldPW  = "key-exchange-1976"
	)

	// whitfield: the password alone asks for the code; the second step
	// takes one of his device.
	status, body := login("whitfield", whitfieldPW, "")
	mfaTok, _ := body["mfa_token"].(string)
	if status != 401 || body["code"] != "mfa_required" || mfaTok == "" {
		t.Fatalf("whitfield's password alone = %d %v; want 401 mfa_required", status, body)
	}
	usedStep := time.Unix(59851953*30, 0) // his device's last_t: used in Django
	if status, body := harness.MFACall(t, "POST", base+"/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+mfatest.Code(t, whitfieldKey, 6, 30*time.Second, usedStep)+`"}`); status != 401 {
		t.Errorf("whitfield's code of the step Django last took = %d %v; want 401", status, body)
	}
	if status, body := harness.MFACall(t, "POST", base+"/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+mfatest.Code(t, whitfieldKey, 6, 30*time.Second, now)+`"}`); status != 200 {
		t.Errorf("whitfield's second step with his device's code = %d %v; want 200", status, body)
	}
	if status, body := login("whitfield", "wrong password", mfatest.Code(t, whitfieldKey, 6, 30*time.Second, now.Add(30*time.Second))); status != 401 || body["code"] != "invalid_credentials" {
		t.Errorf("whitfield, wrong password and a right code = %d %v; want 401 invalid_credentials", status, body)
	}
	// His static tokens are recovery codes, once each.
	if status, body := login("whitfield", whitfieldPW, "yueigqds"); status != 200 {
		t.Errorf("whitfield with static token yueigqds = %d %v; want 200", status, body)
	}
	if status, _ := login("whitfield", whitfieldPW, "yueigqds"); status != 401 {
		t.Errorf("whitfield with static token yueigqds again = %d; want 401", status)
	}
	if status, body := login("whitfield", whitfieldPW, "4LK6-3KOS"); status != 200 {
		t.Errorf("whitfield with static token 4lk63kos typed as 4LK6-3KOS = %d %v; want 200", status, body)
	}

	// martin: drift 1, so the step after now is the centre of his window;
	// the step before now is two off it.
	martinPW := "trapdoor-knapsack-1978"
	if status, body := login("martin", martinPW, mfatest.Code(t, martinKey, 6, 30*time.Second, now.Add(-30*time.Second))); status != 401 {
		t.Errorf("martin with the previous step's code = %d %v; want 401 (his drift of 1 kept)", status, body)
	}
	if status, body := login("martin", martinPW, mfatest.Code(t, martinKey, 6, 30*time.Second, now.Add(60*time.Second))); status != 200 {
		t.Errorf("martin with the code two steps ahead = %d %v; want 200 (his drift of 1 kept)", status, body)
	}

	// ralph: 60-second steps, 8 digits.
	if status, body := login("ralph", "merkle-puzzles-1974", mfatest.Code(t, ralphKey, 8, 60*time.Second, now)); status != 200 {
		t.Errorf("ralph with his 8-digit code = %d %v; want 200", status, body)
	}
	if status, body := login("ralph", "merkle-puzzles-1974", ""); status != 401 || body["code"] != "mfa_required" {
		t.Errorf("ralph's password alone = %d %v; want 401 mfa_required", status, body)
	}

	// adi: her device was never confirmed, so it was not imported.
	if status, body := login("adi", "secret-sharing-1979", ""); status != 200 {
		t.Errorf("adi's password alone = %d %v; want 200 (no second factor)", status, body)
	}
}
