package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"authsvc/internal/mfa"
	"authsvc/internal/secret"
	"authsvc/internal/testservers"
	"authsvc/internal/users"
)

// newKeyFile writes a new secret key to a file in dir and returns the key
// and the file's path.
func newKeyFile(t *testing.T, dir, name string) (secret.Key, string) {
	t.Helper()
	k, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := secret.Write(path, k); err != nil {
		t.Fatal(err)
	}
	return k, path
}

// testFactors returns second factors of username under key: an
// authenticator of secret sec when totp, an unconfirmed one of pending
// when it is not nil, and codes recovery codes (the codes returned).
func testFactors(t *testing.T, key secret.Key, username string, sec []byte, pending []byte, codes int) (*users.Factors, []string) {
	t.Helper()
	ring := secret.NewKeyring(key)
	f := new(users.Factors)
	var err error
	if sec != nil {
		if f.TOTP, err = users.SealTOTP(ring, username, mfa.NewTOTP(sec)); err != nil {
			t.Fatal(err)
		}
	}
	if pending != nil {
		if f.PendingTOTP, err = users.SealTOTP(ring, username, mfa.NewTOTP(pending)); err != nil {
			t.Fatal(err)
		}
	}
	var list []string
	if codes > 0 {
		if list, err = mfa.NewRecoveryCodes(codes); err != nil {
			t.Fatal(err)
		}
		if err := f.SetRecoveryCodes(key, list); err != nil {
			t.Fatal(err)
		}
	}
	return f, list
}

// setFactors gives username the second factors f in the directory spec
// names (a users file or a postgres:// URL), as enrolment will.
func setFactors(t *testing.T, spec, username string, f *users.Factors) {
	t.Helper()
	dir, done, err := openCLIDirectory(context.Background(), spec, false)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if err := dir.Update(context.Background(), username, func(u *users.User) error { u.MFA = f.Clone(); return nil }); err != nil {
		t.Fatalf("Update(%s, mfa) = %v", username, err)
	}
}

// listUsersIn returns the users of the directory spec names, by name.
func listUsersIn(t *testing.T, spec string) map[string]users.User {
	t.Helper()
	dir, done, err := openCLIDirectory(context.Background(), spec, true)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	list, err := dir.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]users.User)
	for _, u := range list {
		m[u.Username] = u
	}
	return m
}

func mustSecret(t *testing.T) []byte {
	t.Helper()
	s, err := mfa.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testResetMFA runs user reset-mfa against the directory spec names: a
// file or a database, which already holds no users.
func testResetMFA(t *testing.T, spec string) {
	key, _ := newKeyFile(t, t.TempDir(), "a.key")
	for _, name := range []string{"ada", "bob", "cy"} {
		mustRunCLI(t, "a long enough passphrase\n", "user", "add", "--users", spec, "--cost", "4", name)
	}
	full, _ := testFactors(t, key, "ada", mustSecret(t), mustSecret(t), 10)
	setFactors(t, spec, "ada", full)
	pending, _ := testFactors(t, key, "cy", nil, mustSecret(t), 0)
	setFactors(t, spec, "cy", pending)
	before := listUsersIn(t, spec)

	code, stdout, stderr := runCLI(t, "", nil, "user", "reset-mfa", "--users", spec, "ada")
	if want := fmt.Sprintf("removed the second factors of user %q in ", "ada"); code != 0 || !strings.HasPrefix(stdout, want) || strings.Count(stdout, "\n") != 1 || stderr != "" {
		t.Errorf("user reset-mfa ada = exit %d, stdout %q, stderr %q; want exit 0, one line starting %q", code, stdout, stderr, want)
	}
	after := listUsersIn(t, spec)
	ada, was := after["ada"], before["ada"]
	if ada.MFA != nil || ada.HasSecondFactor() {
		t.Errorf("after user reset-mfa ada: mfa = %+v; want none", ada.MFA)
	}
	if !ada.TokensAfter.After(was.TokensAfter) {
		t.Errorf("after user reset-mfa ada: tokens_after %v, before %v; want it moved on (every earlier token dies)", ada.TokensAfter, was.TokensAfter)
	}
	if ada.PasswordGeneration != was.PasswordGeneration+1 {
		t.Errorf("after user reset-mfa ada: password_generation %d, before %d; want one more (sessions of logins in flight die)", ada.PasswordGeneration, was.PasswordGeneration)
	}
	want := was
	want.MFA, want.TokensAfter, want.PasswordGeneration = nil, ada.TokensAfter, ada.PasswordGeneration
	if !reflect.DeepEqual(ada, want) {
		t.Errorf("after user reset-mfa ada: %+v; want only mfa, tokens_after and password_generation changed from %+v", ada, was)
	}
	if !reflect.DeepEqual(after["bob"], before["bob"]) || !reflect.DeepEqual(after["cy"], before["cy"]) {
		t.Errorf("user reset-mfa ada changed another user: %+v; want %+v", after, before)
	}

	// Without a second factor: success, saying so, and nothing changed,
	// the cut-off included (a reset run twice ends no session twice).
	for _, name := range []string{"bob", "ada"} {
		code, stdout, stderr = runCLI(t, "", nil, "user", "reset-mfa", "--users", spec, name)
		if want := fmt.Sprintf("user %q has no second factor in ", name); code != 0 || !strings.HasPrefix(stdout, want) || !strings.HasSuffix(stdout, "; nothing changed\n") || stderr != "" {
			t.Errorf("user reset-mfa %s without factors = exit %d, stdout %q, stderr %q; want exit 0, %q…; nothing changed", name, code, stdout, stderr, want)
		}
	}
	if now := listUsersIn(t, spec); !reflect.DeepEqual(now, after) {
		t.Errorf("user reset-mfa of users without factors changed them: %+v; want %+v", now, after)
	}

	// An unconfirmed enrolment alone is no second factor, but is removed:
	// whoever started it held a token, and the reset ends it too.
	code, stdout, _ = runCLI(t, "", nil, "user", "reset-mfa", "--users", spec, "cy")
	if cy := listUsersIn(t, spec)["cy"]; code != 0 || cy.MFA != nil || !cy.TokensAfter.After(before["cy"].TokensAfter) ||
		!strings.HasPrefix(stdout, fmt.Sprintf("removed the unconfirmed enrolment of user %q", "cy")) {
		t.Errorf("user reset-mfa cy (an enrolment alone) = exit %d, stdout %q, mfa %+v, tokens_after %v; want 0, the enrolment removed, the cut-off moved", code, stdout, cy.MFA, cy.TokensAfter)
	}

	code, stdout, stderr = runCLI(t, "", nil, "user", "reset-mfa", "--users", spec, "zed")
	if want := `authsvc: user reset-mfa: no user "zed"` + "\n"; code != 1 || stdout != "" || stderr != want {
		t.Errorf("user reset-mfa zed = exit %d, stdout %q, stderr %q; want exit 1, %q", code, stdout, stderr, want)
	}
}

func TestCLIUserResetMFA(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	testResetMFA(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(`"mfa"`)) {
		t.Errorf("users file after user reset-mfa of every user with factors:\n%s\nwant no \"mfa\"", data)
	}
	checkMode(t, path, 0o600)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"user", "reset-mfa", "--users", path}, "want exactly one USERNAME"},
		{[]string{"user", "reset-mfa", "--users", path, "ada", "bob"}, "want exactly one USERNAME"},
		{[]string{"user", "reset-mfa", "--users", path, "--dry-run", "ada"}, "flag provided but not defined: -dry-run"},
		{[]string{"user", "reset-mfa", "--users", path, "bad name"}, `username "bad name"`},
	} {
		code, stdout, stderr := runCLI(t, "", nil, tt.args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("authsvc %s = exit %d, stdout %q, stderr %q; want exit 2, one line with %q", strings.Join(tt.args, " "), code, stdout, stderr, tt.want)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, data) {
		t.Errorf("usage errors of user reset-mfa changed the users file")
	}
}

func TestCLIUserResetMFAPostgres(t *testing.T) {
	pgURL, _, _ := testservers.Postgres(t)
	testResetMFA(t, testservers.NewDatabase(t, pgURL))
}

// TestResetMFAEndsTokens: a token of the user issued before user
// reset-mfa is refused by a running server within 5 s of it.
func TestResetMFAEndsTokens(t *testing.T) {
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	if err := users.WriteFile(usersPath, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	base, _, stop := startServer(t, nil, "--users", usersPath, "--reload-interval", "20ms")
	defer stop()
	// Logged in before the factors are there: the password alone is then
	// enough, whatever the server makes of a second factor.
	alice := loginToken(t, base, "alice", "alice-pw")
	bob := loginToken(t, base, "bob", "bob-pw")
	key, _ := newKeyFile(t, dir, "authsvc.key")
	f, _ := testFactors(t, key, "alice", mustSecret(t), nil, 10)
	setFactors(t, usersPath, "alice", f)
	time.Sleep(100 * time.Millisecond) // a few reloads: the factors alone end nothing
	waitInfo(t, base, alice, 200, "after alice's factors were added")

	mustRunCLI(t, "", "user", "reset-mfa", "--users", usersPath, "alice")
	waitInfo(t, base, alice, 401, "after user reset-mfa alice")
	stillDead(t, base, alice, "after user reset-mfa alice")
	if code, body := getInfo(t, base, bob, ""); code != 200 {
		t.Errorf("bob's token after user reset-mfa alice: info = %d %s; want 200", code, body)
	}
}
