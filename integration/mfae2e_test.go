package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"authsvc/internal/cli"
	"authsvc/internal/secret"
)

// mfaCall sends a JSON request to the running server, with token unless
// it is "", and returns the status and the decoded body (nil for none).
func mfaCall(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	status, _, out := mfaCallFrom(t, http.DefaultClient, method, url, token, body)
	return status, out
}

// mfaCallFrom is mfaCall with client (one bound to a source address, say),
// returning the reply's header too.
func mfaCallFrom(t *testing.T, client *http.Client, method, url, token, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: body %q is not JSON", method, url, raw)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// TestTwoFactorEndToEnd runs the whole program: serve creates the secret
// key beside the users file, a user enrols and logs in with codes from
// oathtool, nothing secret reaches the log, and a restart under another
// key stops with one line unless the old key is given too (a rotation).
func TestTwoFactorEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	env := map[string]string{"AUTHSVC_USERS": usersPath}
	base, log, stop := startServer(t, env)
	m := log.waitFor(t, regexp.MustCompile(`password: (\S+)$`))
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

	token := loginToken(t, base, "admin", adminPW)
	status, body := mfaCall(t, "POST", base+"/api/auth/mfa/totp/", token, fmt.Sprintf(`{"password":%q}`, adminPW))
	if status != 200 {
		t.Fatalf("enrol = %d %v; want 200", status, body)
	}
	secret32 := body["secret"].(string)
	confirmedAt := time.Now()
	status, body = mfaCall(t, "POST", base+"/api/auth/mfa/totp/confirm/", token, `{"code":"`+totpCode(t, secret32, confirmedAt)+`"}`)
	if status != 200 {
		t.Fatalf("confirm = %d %v; want 200", status, body)
	}
	var codes []string
	for _, c := range body["recovery_codes"].([]any) {
		codes = append(codes, c.(string))
	}
	// The next step's code is in the window now, and above the one the
	// confirmation used.
	next := totpCode(t, secret32, confirmedAt.Add(30*time.Second))
	status, body = mfaCall(t, "POST", base+"/api/auth/login/", "", fmt.Sprintf(`{"username":"admin","password":%q}`, adminPW))
	if status != 401 || body["code"] != "mfa_required" {
		t.Fatalf("login with the password alone = %d %v; want 401 mfa_required", status, body)
	}
	mfaTok := body["mfa_token"].(string)
	status, body = mfaCall(t, "POST", base+"/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+next+`"}`)
	if status != 200 {
		t.Fatalf("second step = %d %v; want 200", status, body)
	}
	if st, _ := getInfo(t, base, body["token"].(string), ""); st != 200 {
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
	base, _, stop = startServer(t, nil, "--users", usersPath, "--secret-key-file", newKey, "--old-secret-key-file", keyPath)
	// The authenticator opens (a wrong TOTP code is 401, not 503), and a
	// recovery code hashed under the old key matches.
	status, body = mfaCall(t, "POST", base+"/api/auth/login/", "", fmt.Sprintf(`{"username":"admin","password":%q,"otp":"000000"}`, adminPW))
	if status != 401 {
		t.Errorf("one-step login with a wrong code under the old key kept in the ring = %d %v; want 401", status, body)
	}
	status, body = mfaCall(t, "POST", base+"/api/auth/login/", "", fmt.Sprintf(`{"username":"admin","password":%q,"otp":%q}`, adminPW, codes[0]))
	if status != 200 {
		t.Errorf("one-step login with a recovery code hashed under the old key = %d %v; want 200", status, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// writeKeyFile writes a new secret key file at path, as an operator makes
// one for a fleet, and returns its key.
func writeKeyFile(t *testing.T, path string) secret.Key {
	t.Helper()
	k, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := secret.Write(path, k); err != nil {
		t.Fatal(err)
	}
	return k
}
