package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"authsvc/internal/cli"
	"authsvc/internal/secret"
)

// TestTwoFactorEndToEnd runs the whole program: serve creates the secret
// key beside the users file, a user enrols and logs in with codes from
// oathtool, nothing secret reaches the log, and a restart under another
// key stops with one line unless the old key is given too (a rotation).
func TestTwoFactorEndToEnd(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	env := map[string]string{"AUTHSVC_USERS": usersPath}
	base, log, stop := harness.StartServer(t, env, "--cost", "4")
	m := log.WaitFor(t, regexp.MustCompile(`password: (\S+)$`))
	adminPW := m[1]

	keyPath := filepath.Join(dir, "authsvc.key")
	fi, err := os.Stat(keyPath)
	if err != nil {
		t.Fatalf("serve with a users file made no secret key beside it: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode = %v; want 0600", keyPath, fi.Mode().Perm())
	}
	keyText, _ := os.ReadFile(keyPath)
	if !regexp.MustCompile(`^[0-9a-f]{64}\n?$`).Match(keyText) {
		t.Errorf("%s = %q; want 64 hex characters", keyPath, keyText)
	}

	token := servertest.LoginToken(t, base, "admin", adminPW)
	status, body := harness.MFACall(t, "POST", base+"/api/auth/mfa/totp/", token, fmt.Sprintf(`{"password":%q}`, adminPW))
	if status != 200 {
		t.Fatalf("enrol = %d %v; want 200", status, body)
	}
	secret32 := body["secret"].(string)
	confirmedAt := time.Now()
	status, body = harness.MFACall(t, "POST", base+"/api/auth/mfa/totp/confirm/", token, `{"code":"`+harness.TOTPCode(t, secret32, confirmedAt)+`"}`)
	if status != 200 {
		t.Fatalf("confirm = %d %v; want 200", status, body)
	}
	var codes []string
	for _, c := range body["recovery_codes"].([]any) {
		codes = append(codes, c.(string))
	}
	// The next step's code is in the window now, and above the one the
	// confirmation used.
	next := harness.TOTPCode(t, secret32, confirmedAt.Add(30*time.Second))
	status, body = harness.MFACall(t, "POST", base+"/api/auth/login/", "", fmt.Sprintf(`{"username":"admin","password":%q}`, adminPW))
	if status != 401 || body["code"] != "mfa_required" {
		t.Fatalf("login with the password alone = %d %v; want 401 mfa_required", status, body)
	}
	mfaTok := body["mfa_token"].(string)
	status, body = harness.MFACall(t, "POST", base+"/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+next+`"}`)
	if status != 200 {
		t.Fatalf("second step = %d %v; want 200", status, body)
	}
	if st, _ := servertest.GetInfo(t, base, body["token"].(string), ""); st != 200 {
		t.Errorf("/info with the second step's token = %d; want 200", st)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	logged := log.String()
	for _, s := range append([]string{secret32, mfaTok, strings.TrimSpace(string(keyText)), next}, codes...) {
		if strings.Contains(logged, s) {
			t.Errorf("the log holds a secret, code, key or mfa_token (%.8s…)", s)
		}
	}
	for _, line := range []string{`msg=login outcome=mfa_required username=admin`, `msg="login mfa" outcome=success username=admin`, `msg="mfa confirm" outcome=success username=admin`} {
		if !strings.Contains(logged, line) {
			t.Errorf("no audit line %s in the log", line)
		}
	}

	// Another key: one line, no start.
	newKey := filepath.Join(dir, "new.key")
	k, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := secret.Write(newKey, k); err != nil {
		t.Fatal(err)
	}
	err = cli.Run(context.Background(), []string{"authsvc", "serve", "--addr", "127.0.0.1:0", "--users", usersPath, "--secret-key-file", newKey},
		func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "second factors of 1 users") {
		t.Fatalf("serve under another key = %v; want one line saying whose second factors it cannot open", err)
	}
	// With the old key beside it, the factors open: a rotation in progress.
	base, _, stop = harness.StartServer(t, nil, "--cost", "4", "--users", usersPath, "--secret-key-file", newKey, "--old-secret-key-file", keyPath)
	// The authenticator opens (a wrong TOTP code is 401, not 503), and a
	// recovery code hashed under the old key matches.
	status, body = harness.MFACall(t, "POST", base+"/api/auth/login/", "", fmt.Sprintf(`{"username":"admin","password":%q,"otp":"000000"}`, adminPW))
	if status != 401 {
		t.Errorf("one-step login with a wrong code under the old key kept in the ring = %d %v; want 401", status, body)
	}
	status, body = harness.MFACall(t, "POST", base+"/api/auth/login/", "", fmt.Sprintf(`{"username":"admin","password":%q,"otp":%q}`, adminPW, codes[0]))
	if status != 200 {
		t.Errorf("one-step login with a recovery code hashed under the old key = %d %v; want 200", status, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
}
