package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/cli"
	"authsvc/internal/mfa"
	"authsvc/internal/secret"
	"authsvc/internal/testservers"
	"authsvc/internal/users/postgres"
)

// TestTwoFactorPostgres: with PostgreSQL the secret key is never made up:
// without --secret-key-file serve starts and enrolment answers 503; a
// database that holds second factors then stops start-up with one line;
// with the key given, a user enrols and the factors land in the database,
// sealed, where a second instance reads them.
func TestTwoFactorPostgres(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	pgURL := testservers.SharedPostgres(t)
	dbURL := testservers.NewDatabase(t, pgURL)
	pw := "fay passphrase, long enough"
	if code, _, stderr := harness.RunCLI(t, pw+"\n", nil, "user", "add", "--users", dbURL, "--cost", "4", "fay"); code != 0 {
		t.Fatalf("user add = exit %d, %s", code, stderr)
	}

	base, _, stop := harness.StartServer(t, nil, "--users", dbURL, "--cost", "4")
	token := servertest.LoginToken(t, base, "fay", pw)
	if status, body := harness.MFACall(t, "POST", base+"/api/auth/mfa/totp/", token, fmt.Sprintf(`{"password":%q}`, pw)); status != 503 || body["code"] != "unavailable" {
		t.Errorf("enrol with PostgreSQL and no key = %d %v; want 503 unavailable", status, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	keyPath := filepath.Join(t.TempDir(), "fleet.key")
	key := harness.WriteKeyFile(t, keyPath)
	base, _, stop = harness.StartServer(t, nil, "--users", dbURL, "--cost", "4", "--secret-key-file", keyPath)
	token = servertest.LoginToken(t, base, "fay", pw)
	status, body := harness.MFACall(t, "POST", base+"/api/auth/mfa/totp/", token, fmt.Sprintf(`{"password":%q}`, pw))
	if status != 200 {
		t.Fatalf("enrol with the key = %d %v; want 200", status, body)
	}
	secret32 := body["secret"].(string)
	status, body = harness.MFACall(t, "POST", base+"/api/auth/mfa/totp/confirm/", token, fmt.Sprintf(`{"code":%q}`, harness.TOTPCode(t, secret32, time.Now())))
	if status != 200 {
		t.Fatalf("confirm = %d %v; want 200", status, body)
	}
	// A second instance on the same database and key: the password alone
	// is not enough there either.
	base2, _, stop2 := harness.StartServer(t, nil, "--users", dbURL, "--cost", "4", "--secret-key-file", keyPath)
	if status, body := harness.MFACall(t, "POST", base2+"/api/auth/login/", "", fmt.Sprintf(`{"username":"fay","password":%q}`, pw)); status != 401 || body["code"] != "mfa_required" {
		t.Errorf("login on a second instance = %d %v; want 401 mfa_required", status, body)
	}
	stop2()
	stop()

	dir, err := postgres.OpenExisting(context.Background(), dbURL, 16, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	f, err := dir.Factors(context.Background(), "fay")
	if err != nil || f == nil || f.TOTP == nil || len(f.RecoveryCodes) != mfa.RecoveryCodes {
		t.Fatalf("fay's factors in the database = %+v, %v; want an authenticator and 10 recovery codes", f, err)
	}
	totp, _, err := f.TOTP.Open(secret.NewKeyring(key), "fay")
	if err != nil || mfa.Base32(totp.Secret) != secret32 {
		t.Errorf("the database's sealed secret opens to %v, %v; want the enrolled one", mfa.Base32(totp.Secret) == secret32, err)
	}
	rows, _ := dir.List(context.Background())
	for _, u := range rows {
		if strings.Contains(fmt.Sprint(u.MFA), secret32) {
			t.Errorf("the database holds the secret in clear")
		}
	}

	// Without the key, a database holding secrets stops start-up, one line.
	err = cli.Run(context.Background(), []string{"authsvc", "serve", "--addr", "127.0.0.1:0", "--users", dbURL},
		func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--secret-key-file") || strings.Contains(err.Error(), "passw") {
		t.Errorf("serve over factors without a key = %v; want one line naming --secret-key-file and no password", err)
	}
}
