package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"authsvc/internal/mfa"
	"authsvc/internal/secret"
	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
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
	dir, done, err := openCLIDirectory(context.Background(), spec, false, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if err := users.Update(context.Background(), dir, username, func(u *users.User) error { u.MFA = f.Clone(); return nil }); err != nil {
		t.Fatalf("Update(%s, mfa) = %v", username, err)
	}
}

// listUsersIn returns the users of the directory spec names, by name.
func listUsersIn(t *testing.T, spec string) map[string]users.User {
	t.Helper()
	dir, done, err := openCLIDirectory(context.Background(), spec, true, io.Discard)
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
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	testResetMFA(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(`"mfa"`)) {
		t.Errorf("users file after user reset-mfa of every user with factors:\n%s\nwant no \"mfa\"", data)
	}
	servertest.CheckMode(t, path, 0o600)
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
	t.Parallel()
	pgURL := testservers.SharedPostgres(t)
	testResetMFA(t, testservers.NewDatabase(t, pgURL))
}

// TestResetMFAEndsTokens: a token of the user issued before user
// reset-mfa is refused by a running server within 5 s of it.
func TestResetMFAEndsTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	base, _, stop := startServer(t, nil, "--users", usersPath, "--reload-interval", "20ms")
	defer stop()
	// Logged in before the factors are there: the password alone is then
	// enough, whatever the server makes of a second factor.
	alice := servertest.LoginToken(t, base, "alice", "alice-pw")
	bob := servertest.LoginToken(t, base, "bob", "bob-pw")
	key, _ := newKeyFile(t, dir, "factors.key")
	f, _ := testFactors(t, key, "alice", mustSecret(t), nil, 10)
	setFactors(t, usersPath, "alice", f)
	time.Sleep(100 * time.Millisecond) // a few reloads: the factors alone end nothing
	waitInfo(t, base, alice, 200, "after alice's factors were added")

	mustRunCLI(t, "", "user", "reset-mfa", "--users", usersPath, "alice")
	waitInfo(t, base, alice, 401, "after user reset-mfa alice")
	stillDead(t, base, alice, "after user reset-mfa alice")
	if code, body := servertest.GetInfo(t, base, bob, ""); code != 200 {
		t.Errorf("bob's token after user reset-mfa alice: info = %d %s; want 200", code, body)
	}
}

// rekeyFixture is a users file of ada (an authenticator, an unconfirmed
// one and recovery codes under key A) and bob (no factors), with the
// files of keys A and B.
type rekeyFixture struct {
	spec             string // the users file or database
	a, b             secret.Key
	aPath, bPath     string
	totp, pending    []byte   // ada's secrets
	codes            []string // ada's recovery codes
	adaBefore, bobAt users.User
}

func newRekeyFixture(t *testing.T, spec string) *rekeyFixture {
	t.Helper()
	dir := t.TempDir()
	x := &rekeyFixture{spec: spec, totp: mustSecret(t), pending: mustSecret(t)}
	x.a, x.aPath = newKeyFile(t, dir, "a.key")
	x.b, x.bPath = newKeyFile(t, dir, "b.key")
	for _, name := range []string{"ada", "bob"} {
		mustRunCLI(t, "a long enough passphrase\n", "user", "add", "--users", spec, "--cost", "4", name)
	}
	var f *users.Factors
	f, x.codes = testFactors(t, x.a, "ada", x.totp, x.pending, 10)
	setFactors(t, spec, "ada", f)
	before := listUsersIn(t, spec)
	x.adaBefore, x.bobAt = before["ada"], before["bob"]
	return x
}

// checkRekeyed fails t unless ada's secrets are now under key B alone,
// the same secrets, her recovery codes and the rest of her entry as they
// were, and bob untouched.
func (x *rekeyFixture) checkRekeyed(t *testing.T) {
	t.Helper()
	now := listUsersIn(t, x.spec)
	ada := now["ada"]
	if ada.MFA == nil || ada.MFA.TOTP == nil || ada.MFA.PendingTOTP == nil {
		t.Fatalf("ada's factors after user rekey = %+v; want both authenticators", ada.MFA)
	}
	for _, s := range []struct {
		name string
		f    *users.TOTPFactor
		want []byte
	}{{"totp", ada.MFA.TOTP, x.totp}, {"pending_totp", ada.MFA.PendingTOTP, x.pending}} {
		got, stale, err := s.f.Open(secret.NewKeyring(x.b), "ada")
		if err != nil || stale || !bytes.Equal(got.Secret, s.want) {
			t.Errorf("ada's %s after rekey: Open(ring B) = %x, stale %v, %v; want the same secret, not stale", s.name, got.Secret, stale, err)
		}
		if want := mfa.NewTOTP(s.want); err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("ada's %s after rekey = %+v; want %+v", s.name, got, want)
		}
		if _, _, err := s.f.Open(secret.NewKeyring(x.a), "ada"); !errors.Is(err, secret.ErrWrongKey) {
			t.Errorf("ada's %s after rekey: Open(ring A) = %v; want ErrWrongKey", s.name, err)
		}
	}
	for i, c := range []string{x.codes[0], x.codes[9]} {
		if _, ok, err := ada.MFA.MatchRecoveryCode(secret.NewKeyring(x.b, x.a), c); !ok || err != nil {
			t.Errorf("ada's recovery code %d after rekey: MatchRecoveryCode(ring B, A) = %v, %v; want a match", i, ok, err)
		}
		if _, ok, err := ada.MFA.MatchRecoveryCode(secret.NewKeyring(x.b), c); ok || !errors.Is(err, users.ErrRecoveryKey) {
			t.Errorf("ada's recovery code %d after rekey: MatchRecoveryCode(ring B) = %v, %v; want no match, ErrRecoveryKey", i, ok, err)
		}
	}
	want := x.adaBefore
	want.MFA = ada.MFA
	if !reflect.DeepEqual(ada, want) || !reflect.DeepEqual(ada.MFA.RecoveryCodes, x.adaBefore.MFA.RecoveryCodes) || ada.MFA.RecoveryKeyID != x.a.ID() {
		t.Errorf("ada after rekey = %+v; want only the sealed secrets changed from %+v (tokens_after, recovery codes and their key kept)", ada, x.adaBefore)
	}
	if !reflect.DeepEqual(now["bob"], x.bobAt) {
		t.Errorf("bob after rekey = %+v; want %+v", now["bob"], x.bobAt)
	}
}

func TestCLIUserRekey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	x := newRekeyFixture(t, path)
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		if data, _ := os.ReadFile(path); !bytes.Equal(data, original) {
			t.Errorf("%s changed the users file:\n%s\nwant:\n%s", what, data, original)
		}
	}

	// A dry run writes no byte, and says what it would do.
	code, stdout, stderr := runCLI(t, "", nil, "user", "rekey", "--users", path, "--secret-key-file", x.bPath, "--old-secret-key-file", x.aPath, "--dry-run")
	if want := fmt.Sprintf("would re-seal 2 TOTP secrets under key %s in %s; 0 already under it\n", x.b.ID(), path); code != 0 || !strings.HasPrefix(stdout, want) || !strings.HasSuffix(stdout, "dry run: nothing written\n") || stderr != "" {
		t.Errorf("user rekey --dry-run = exit %d, stdout %q, stderr %q; want exit 0, %q… dry run: nothing written", code, stdout, stderr, want)
	}
	unchanged("user rekey --dry-run")

	// A wrong old key opens nothing: exit 1, ada named, nothing written.
	_, cPath := newKeyFile(t, t.TempDir(), "c.key")
	code, stdout, stderr = runCLI(t, "", nil, "user", "rekey", "--users", path, "--secret-key-file", x.bPath, "--old-secret-key-file", cPath)
	if code != 1 || !strings.Contains(stderr, `left user "ada" as it was`) || !strings.Contains(stderr, "sealed under key "+x.a.ID()) || !strings.HasPrefix(stdout, "re-sealed 0 TOTP secrets") {
		t.Errorf("user rekey with a wrong old key = exit %d, stdout %q, stderr %q; want exit 1, ada named with key %s, nothing re-sealed", code, stdout, stderr, x.a.ID())
	}
	unchanged("user rekey with a wrong old key")

	// Keys are never printed, only their IDs.
	for _, k := range []string{x.aPath, x.bPath} {
		data, _ := os.ReadFile(k)
		if key := strings.TrimSpace(string(data)); strings.Contains(stdout+stderr, key[:16]) {
			t.Errorf("user rekey printed key material of %s: %q %q", k, stdout, stderr)
		}
	}

	code, stdout, stderr = runCLI(t, "", nil, "user", "rekey", "--users", path, "--secret-key-file", x.bPath, "--old-secret-key-file", x.aPath)
	want := fmt.Sprintf("re-sealed 2 TOTP secrets under key %s in %s; 0 already under it\n", x.b.ID(), path) +
		fmt.Sprintf("1 user keeps recovery codes hashed under key %s: they work while serve is given that key too (--old-secret-key-file)\n", x.a.ID())
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("user rekey B with A old = exit %d, stdout %q, stderr %q; want exit 0, %q", code, stdout, stderr, want)
	}
	x.checkRekeyed(t)
	servertest.CheckMode(t, path, 0o600)

	// Again: everything is under B already, so nothing is written.
	rekeyed, _ := os.ReadFile(path)
	code, stdout, _ = runCLI(t, "", nil, "user", "rekey", "--users", path, "--secret-key-file", x.bPath)
	if code != 0 || !strings.HasPrefix(stdout, fmt.Sprintf("re-sealed 0 TOTP secrets under key %s in %s; 2 already under it\n", x.b.ID(), path)) {
		t.Errorf("a second user rekey = exit %d, stdout %q; want exit 0, nothing re-sealed, 2 already under B", code, stdout)
	}
	if data, _ := os.ReadFile(path); !bytes.Equal(data, rekeyed) {
		t.Errorf("a second user rekey rewrote the users file")
	}
}

// TestCLIUserRekeyPartial: a user whose secret opens under none of the
// keys is left as it was, and the others are re-sealed.
func TestCLIUserRekeyPartial(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	x := newRekeyFixture(t, path)
	mustRunCLI(t, "a long enough passphrase\n", "user", "add", "--users", path, "--cost", "4", "cy")
	c, _ := secret.Generate()
	f, _ := testFactors(t, c, "cy", mustSecret(t), nil, 0)
	setFactors(t, path, "cy", f)
	cyBefore := mustReadUsers(t, path)["cy"]

	code, stdout, stderr := runCLI(t, "", nil, "user", "rekey", "--users", path, "--secret-key-file", x.bPath, "--old-secret-key-file", x.aPath)
	if code != 1 || !strings.HasPrefix(stdout, "re-sealed 2 TOTP secrets") || strings.Count(stderr, "\n") != 2 || !strings.Contains(stderr, `left user "cy" as it was`) || !strings.Contains(stderr, "1 user left as it was") {
		t.Errorf("user rekey with cy under an unknown key = exit %d, stdout %q, stderr %q; want exit 1, ada's 2 secrets re-sealed, cy named", code, stdout, stderr)
	}
	x.checkRekeyed(t)
	if cy := mustReadUsers(t, path)["cy"]; !reflect.DeepEqual(cy, cyBefore) {
		t.Errorf("cy after a rekey that could not open her secret = %+v; want %+v", cy, cyBefore)
	}
}

// TestCLIUserRekeyNewKeyFile: a missing new key file is created (said on
// stderr), but not by a dry run; --secret-key-file is required.
func TestCLIUserRekeyNewKeyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	x := newRekeyFixture(t, path)
	newPath := filepath.Join(t.TempDir(), "new.key")

	code, _, stderr := runCLI(t, "", nil, "user", "rekey", "--users", path, "--secret-key-file", newPath, "--old-secret-key-file", x.aPath, "--dry-run")
	if _, err := os.Stat(newPath); code != 0 || !strings.Contains(stderr, "would create the secret key file "+newPath) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("user rekey --dry-run to a missing key file = exit %d, stderr %q, stat %v; want exit 0, would create, no file", code, stderr, err)
	}
	code, stdout, stderr := runCLI(t, "", nil, "user", "rekey", "--users", path, "--secret-key-file", newPath, "--old-secret-key-file", x.aPath)
	k, err := secret.Load(newPath)
	if err != nil {
		t.Fatalf("user rekey to a missing key file (exit %d, %q): secret.Load = %v", code, stderr, err)
	}
	if want := fmt.Sprintf("authsvc: user rekey: created the secret key file %s (key %s)\n", newPath, k.ID()); code != 0 || stderr != want || !strings.HasPrefix(stdout, "re-sealed 2 TOTP secrets under key "+k.ID()) {
		t.Errorf("user rekey to a missing key file = exit %d, stdout %q, stderr %q; want exit 0, %q", code, stdout, stderr, want)
	}
	x.b, x.bPath = k, newPath
	x.checkRekeyed(t)

	for _, args := range [][]string{
		{"user", "rekey", "--users", path, "--old-secret-key-file", x.aPath},
		{"user", "rekey", "--users", path, "--secret-key-file", newPath, "extra"},
	} {
		code, stdout, stderr := runCLI(t, "", nil, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("authsvc %s = exit %d, stdout %q, stderr %q; want exit 2, one line", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	// Not from the environment: serve's variable names the old key.
	code, _, stderr = runCLI(t, "", map[string]string{"AUTHSVC_SECRET_KEY_FILE": newPath}, "user", "rekey", "--users", path)
	if code != 2 || !strings.Contains(stderr, "--secret-key-file is required") {
		t.Errorf("AUTHSVC_SECRET_KEY_FILE=… user rekey = exit %d, stderr %q; want exit 2, --secret-key-file is required", code, stderr)
	}
	// A missing old key file is an error, and nothing is written.
	before, _ := os.ReadFile(path)
	unmade := filepath.Join(t.TempDir(), "unmade.key")
	code, _, stderr = runCLI(t, "", nil, "user", "rekey", "--users", path, "--secret-key-file", unmade, "--old-secret-key-file", filepath.Join(t.TempDir(), "none.key"))
	if after, _ := os.ReadFile(path); code != 1 || strings.Count(stderr, "\n") != 1 || !bytes.Equal(after, before) {
		t.Errorf("user rekey with a missing old key file = exit %d, stderr %q, file changed %v; want exit 1, one line, no change", code, stderr, !bytes.Equal(after, before))
	}
	if _, err := os.Stat(unmade); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("user rekey with a missing old key file: stat(new key file) = %v; want not created", err)
	}
	// Nor with a users file that does not exist.
	code, _, _ = runCLI(t, "", nil, "user", "rekey", "--users", filepath.Join(t.TempDir(), "none.json"), "--secret-key-file", unmade)
	if _, err := os.Stat(unmade); code != 1 || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("user rekey of a missing users file = exit %d, stat(new key file) = %v; want exit 1, not created", code, err)
	}
}

func TestCLIUserRekeyPostgres(t *testing.T) {
	t.Parallel()
	pgURL := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, pgURL)
	x := newRekeyFixture(t, db)
	code, stdout, stderr := runCLI(t, "", nil, "user", "rekey", "--users", db, "--secret-key-file", x.bPath, "--old-secret-key-file", x.aPath, "--dry-run")
	if code != 0 || !strings.HasPrefix(stdout, "would re-seal 2 TOTP secrets") {
		t.Errorf("user rekey --dry-run = exit %d, stdout %q, stderr %q; want exit 0, would re-seal 2", code, stdout, stderr)
	}
	if ada := listUsersIn(t, db)["ada"]; !reflect.DeepEqual(ada, x.adaBefore) {
		t.Errorf("ada after user rekey --dry-run = %+v; want %+v", ada, x.adaBefore)
	}
	code, stdout, stderr = runCLI(t, "", nil, "user", "rekey", "--users", db, "--secret-key-file", x.bPath, "--old-secret-key-file", x.aPath)
	if code != 0 || !strings.HasPrefix(stdout, "re-sealed 2 TOTP secrets") {
		t.Errorf("user rekey = exit %d, stdout %q, stderr %q; want exit 0, re-sealed 2", code, stdout, stderr)
	}
	x.checkRekeyed(t)
}

// TestCLIUserRekeyDjangoHashes: the summary counts the users whose Django
// hash fingerprints stay under the old key, which user import needs.
func TestCLIUserRekeyDjangoHashes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	x := newRekeyFixture(t, path)
	dir := usersfile.New(path, slog.New(slog.DiscardHandler))
	for _, name := range []string{"ada", "bob"} {
		err := users.Update(t.Context(), dir, name, func(u *users.User) error {
			u.DjangoHash = users.DjangoHashFingerprint(x.a, "pbkdf2_sha256$1000$salt$"+name)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runCLI(t, "", nil, "user", "rekey", "--users", path, "--secret-key-file", x.bPath, "--old-secret-key-file", x.aPath)
	want := fmt.Sprintf("2 users keep Django hash fingerprints under key %s: user import needs that key's file (--secret-key-file)\n", x.a.ID())
	if code != 0 || !strings.HasSuffix(stdout, want) {
		t.Errorf("user rekey with Django hashes under A = exit %d, stdout %q, stderr %q; want exit 0, ending %q", code, stdout, stderr, want)
	}
}

// TestUserCheckSecretKey (issue 28, point 9): user check runs serve's
// secret-key check. Second factors that its key (--secret-key-file, by
// default authsvc.key beside a users file, none with PostgreSQL) cannot
// open, or that no key file is there for, fail it with the one line serve
// stops with; the old keys of a rotation count as serve's do; and user
// check never creates a key file.
func TestUserCheckSecretKey(t *testing.T) {
	t.Parallel()
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		spec := filepath.Join(dir, "users.json")
		if err := usersfile.Write(spec, servertest.TestUsers(t)); err != nil {
			t.Fatal(err)
		}
		testUserCheckSecretKey(t, spec, filepath.Join(dir, defaultKeyFile))
	})
	t.Run("postgres", func(t *testing.T) {
		pgURL := testservers.SharedPostgres(t)
		spec := testservers.NewDatabase(t, pgURL)
		for _, name := range []string{"alice", "bob"} {
			mustRunCLI(t, "a long enough passphrase\n", "user", "add", "--users", spec, "--cost", "4", name)
		}
		testUserCheckSecretKey(t, spec, "")
	})
}

// testUserCheckSecretKey runs TestUserCheckSecretKey on the directory spec
// names, which holds alice and bob, whose default key file is defaultKey
// ("": none, PostgreSQL's).
func testUserCheckSecretKey(t *testing.T, spec, defaultKey string) {
	keyDir := t.TempDir()
	a, aPath := newKeyFile(t, keyDir, "a.key")
	_, bPath := newKeyFile(t, keyDir, "b.key")
	f, _ := testFactors(t, a, "alice", mustSecret(t), nil, 10)
	setFactors(t, spec, "alice", f)
	check := func(what string, ok bool, env map[string]string, args ...string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, "", env, append([]string{"user", "check", "--users", spec}, args...)...)
		if ok {
			if code != 0 || !strings.Contains(stdout, " users, valid") || stderr != "" {
				t.Errorf("user check with %s = exit %d, %q, %q; want 0, valid", what, code, stdout, stderr)
			}
			return
		}
		// Serve's message, each under its own command's name.
		refusal, ok := strings.CutPrefix(serveRefusal(t, env, append([]string{"--users", spec}, args...)...), "serve: ")
		if !ok {
			t.Fatalf("serve's refusal %q does not open with \"serve: \"", refusal)
		}
		want := "authsvc: user check: " + refusal + "\n"
		if code != 1 || stdout != "" || stderr != want {
			t.Errorf("user check with %s = exit %d, stdout %q, stderr %q; want exit 1 and serve's one line %q", what, code, stdout, stderr, want)
		}
	}
	check("the key that sealed them", true, nil, "--secret-key-file", aPath)
	check("another key", false, nil, "--secret-key-file", bPath)
	check("another key from AUTHSVC_SECRET_KEY_FILE", false, map[string]string{"AUTHSVC_SECRET_KEY_FILE": bPath})
	check("another key, and the one that sealed them as an old key", true, nil, "--secret-key-file", bPath, "--old-secret-key-file", aPath)
	check("no key file", false, nil)
	if defaultKey == "" {
		return
	}
	if _, err := os.Stat(defaultKey); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after user check and serve without a key file: os.Stat(%s) = %v; want no such file: a new key opens none of the factors", defaultKey, err)
		os.Remove(defaultKey)
	}
	if err := secret.Write(defaultKey, a); err != nil {
		t.Fatal(err)
	}
	check("the default key file, the one that sealed them", true, nil)
}

// serveRefusal returns the error serve stops with at start, given args;
// it fails t if serve starts.
func serveRefusal(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := Run(ctx, append([]string{"authsvc", "serve", "--addr", "127.0.0.1:0"}, args...), func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("serve %s = %v, started; want it refused", strings.Join(args, " "), err)
	}
	return err.Error()
}

// TestNoCommandReplacesAKeyFile (issue 28, point 9): a key file that is
// there, good or not, is never replaced: serve, user import, user rekey
// and user check use the key it holds or stop, and leave its bytes as they
// were. A replaced key would lose every factor sealed under it.
func TestNoCommandReplacesAKeyFile(t *testing.T) {
	t.Parallel()
	for _, content := range []string{"", "good", "not a key\n"} {
		dir := t.TempDir()
		usersPath := filepath.Join(dir, "users.json")
		if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
			t.Fatal(err)
		}
		keyPath := filepath.Join(dir, defaultKeyFile)
		if content == "good" {
			newKeyFile(t, dir, defaultKeyFile)
		} else if err := os.WriteFile(keyPath, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(keyPath)
		if err != nil {
			t.Fatal(err)
		}
		unchanged := func(what string) {
			t.Helper()
			if after, err := os.ReadFile(keyPath); err != nil || !bytes.Equal(after, before) {
				t.Errorf("key file %q after %s = %q, %v; want it as it was", content, what, after, err)
			}
		}
		if content == "good" {
			_, _, stop := startServer(t, nil, "--users", usersPath)
			stop()
		} else if err := Run(context.Background(), []string{"authsvc", "serve", "--addr", "127.0.0.1:0", "--users", usersPath}, func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard); err == nil {
			t.Errorf("serve over key file %q started; want it refused", content)
		}
		unchanged("serve")
		runCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "django", djangoFixture)
		unchanged("user import --from django")
		runCLI(t, "", nil, "user", "rekey", "--users", usersPath, "--secret-key-file", keyPath)
		unchanged("user rekey")
		runCLI(t, "", nil, "user", "check", "--users", usersPath)
		unchanged("user check")
	}
}

// waitInfo polls info with token until it answers want, or fails after 5 s
// (API.md: changes reach the server within 5 s).
func waitInfo(t *testing.T, base, token string, want int, why string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := servertest.GetInfo(t, base, token, "")
		if code == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: info = %d %s; want %d within 5 s", why, code, body, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stillDead checks that token stays 401 over a few reload intervals.
func stillDead(t *testing.T, base, token, why string) {
	t.Helper()
	for range 10 {
		if code, body := servertest.GetInfo(t, base, token, ""); code != 401 {
			t.Fatalf("%s: info = %d %s; want 401: dead stays dead", why, code, body)
		}
		time.Sleep(30 * time.Millisecond)
	}
}
