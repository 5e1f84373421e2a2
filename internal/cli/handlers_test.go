package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/users"

	"golang.org/x/crypto/bcrypt"
)

// testCost keeps bcrypt fast in tests.
const testCost = bcrypt.MinCost

// testEnv is a handler that buildDeps wired, to send requests to. The
// handler tests, on a test env of their own, are in internal/httpapi.
type testEnv struct {
	t       *testing.T
	handler http.Handler
}

// testUsers: alice (dev), bob (admin), carol (disabled). Each password is
// the username + "-pw".
func testUsers(t testing.TB) []users.User {
	t.Helper()
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), testCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	return []users.User{
		{Username: "alice", PasswordHash: hash("alice-pw"), Name: "Alice", Email: "alice@example.com", Groups: []string{"dev"}},
		{Username: "bob", PasswordHash: hash("bob-pw"), Name: "Bob", Groups: []string{}, Admin: true},
		{Username: "carol", PasswordHash: hash("carol-pw"), Groups: []string{}, Disabled: true},
	}
}

// testConfig is serve's default configuration for a test, with the users
// file at usersPath, generous per-address limits (every test request comes
// from 192.0.2.1), two hasher slots and refusals answered at once.
func testConfig(usersPath string) serveConfig {
	c := defaultServeConfig()
	c.usersPath = usersPath
	c.throttle.AddrRate, c.throttle.AddrBurst = 1000, 1000
	c.passwordSlots, c.passwordQueue, c.passwordWait = 2, 8, 2*time.Second
	c.refusalDelay = 0
	// New hashes as cheap as testUsers' own: no rehash on login, fast password changes.
	c.hashPolicy.Scheme, c.hashPolicy.BcryptCost = password.SchemeBcrypt, testCost
	return c
}

// do sends a request through the handler; header is "Name: value" lines.
func (e *testEnv) do(method, path, body string, header ...string) *httptest.ResponseRecorder {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	for _, h := range header {
		name, value, _ := strings.Cut(h, ": ")
		req.Header.Add(name, value)
	}
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, req)
	return w
}

// login returns a fresh token for username, failing the test otherwise.
func (e *testEnv) login(username string) string {
	e.t.Helper()
	w := e.do("POST", "/api/auth/login/", `{"username":"`+username+`","password":"`+username+`-pw"}`, "Content-Type: application/json")
	if w.Code != http.StatusOK {
		e.t.Fatalf("login(%s) = %d %s; want 200", username, w.Code, w.Body)
	}
	var reply struct{ Token string }
	if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
		e.t.Fatal(err)
	}
	return reply.Token
}

// errorCode returns the code of an error body, failing unless it is one.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q; want application/json", ct)
	}
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("error body %q is not JSON: %v", w.Body, err)
	}
	detail, _ := body["detail"].(string)
	code, _ := body["code"].(string)
	if detail == "" || code == "" || len(body) != 2 {
		t.Errorf("error body = %s; want {detail, code}", w.Body)
	}
	return code
}

const jsonCT = "Content-Type: application/json"
