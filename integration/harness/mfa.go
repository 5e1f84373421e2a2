package harness

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/mfa/mfatest"
	"authsvc/internal/secret"
)

// NewPassphrase is the new password of the password-change tests.
const NewPassphrase = "a brand new passphrase"

// ChangeBody is a password-change body.
func ChangeBody(current, next string) string {
	b, _ := json.Marshal(httpapi.PasswordRequest{CurrentPassword: current, NewPassword: next})
	return string(b)
}

// TOTPCode is oathtool's code of the base32 secret at time at: the codes
// in these tests come from an implementation that shares no code with the
// server's pquerna/otp.
func TOTPCode(t testing.TB, secret32 string, at time.Time) string {
	t.Helper()
	return mfatest.Code32(t, secret32, at)
}

// MFACall sends a JSON request to the running server, with token unless
// it is "", and returns the status and the decoded body (nil for none).
func MFACall(t *testing.T, method, url, token, body string) (int, map[string]any) {
	t.Helper()
	status, _, out := MFACallFrom(t, freshConnClient, method, url, token, body)
	return status, out
}

// freshConnClient opens a connection a request: a POST on a kept-alive
// connection that a stopped server (or another test's, on a reused
// port) closed fails with EOF, and Go does not retry a POST.
var freshConnClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * HealBound()}

// MFACallFrom is MFACall with client (one bound to a source address, say),
// returning the reply's header too.
func MFACallFrom(t *testing.T, client *http.Client, method, url, token, body string) (int, http.Header, map[string]any) {
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

// WriteKeyFile writes a new secret key file at path, as an operator makes
// one for a fleet, and returns its key.
func WriteKeyFile(t *testing.T, path string) secret.Key {
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
