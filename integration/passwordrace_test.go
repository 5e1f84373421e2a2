package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"testing"
	"time"
)

// TestCLIPasswdEndsRacingLogins: after authsvc user passwd exits, every
// token that a running server issued on the old password (it checks the
// old hash until it reloads the file) is refused within 5 s and never
// accepted again (issue 19, point 1: 15 such tokens survived).
func TestCLIPasswdEndsRacingLogins(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	path := harness.WriteTestUsers(t)
	base, _, stop := harness.StartServer(t, nil, "--users", path, "--reload-interval", "200ms", "--login-failures", "1000", "--user-failures", "1000", "--login-rate", "1000", "--login-burst", "1000", "--password-slots", "4", "--cost", "4")
	defer stop()
	snapshot, stopLogins := racingLogins(t, base)
	awaitTokens(t, snapshot)
	code, _, stderr := harness.RunCLI(t, harness.NewPassphrase+"\n", map[string]string{"AUTHSVC_PASSWORD_MIN_LENGTH": ""}, "user", "passwd", "--users", path, "--cost", "4", "alice")
	passwdExited := time.Now()
	time.Sleep(500 * time.Millisecond) // logins go on until the server has reloaded
	logins := stopLogins()
	if code != 0 {
		t.Fatalf("user passwd = exit %d, %s", code, stderr)
	}
	time.Sleep(time.Until(passwdExited.Add(5 * time.Second)))
	var issued []string
	for _, l := range logins {
		if l.token != "" {
			issued = append(issued, l.token)
		}
	}
	for _, tok := range issued {
		if code, body := servertest.GetInfo(t, base, tok, ""); code != 401 {
			t.Errorf("info with a token of the old password, 5 s after user passwd exited = %d %s; want 401 (%d tokens issued)", code, body, len(issued))
		}
	}
	t.Logf("%d tokens issued on the old password", len(issued))
}
