package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// fleetRaceFlags are the flags of both instances of a password race on
// one Redis: a throttle and a per-user limit that stay out of the way of
// four clients logging in as fast as they can.
func fleetRaceFlags(usersPath, redisURL, prefix, reloadInterval string) []string {
	return []string{"--users", usersPath, "--store", redisURL, "--store-prefix", prefix,
		"--reload-interval", reloadInterval, "--max-tokens-per-user", "0",
		"--login-failures", "1000", "--user-failures", "1000", "--login-rate", "1000", "--login-burst", "1000",
		"--password-slots", "4", "--cost", "4"}
}

// A raceLogin is one login of a racing client: when it was sent, what it
// got, and the token when it got 200.
type raceLogin struct {
	sent  time.Time
	code  int
	token string
}

// racingLogins starts 4 clients that log in as alice with her old password
// on base, as fast as they can. snapshot returns the logins made so far;
// stop stops the clients (once: later calls only return) and returns every
// login they made.
func racingLogins(t *testing.T, base string) (snapshot, stop func() []raceLogin) {
	done := make(chan struct{})
	var (
		mu     sync.Mutex // guards logins
		logins []raceLogin
	)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				sent := time.Now()
				r := harness.Do(t, "POST", base+"/api/auth/login/", "", `{"username":"alice","password":"alice-pw"}`)
				l := raceLogin{sent: sent, code: r.Status}
				if r.Status == 200 {
					var reply struct{ Token string }
					json.Unmarshal([]byte(r.Body), &reply)
					l.token = reply.Token
				}
				mu.Lock()
				logins = append(logins, l)
				mu.Unlock()
			}
		})
	}
	snapshot = func() []raceLogin {
		mu.Lock()
		defer mu.Unlock()
		return append([]raceLogin(nil), logins...)
	}
	stop = sync.OnceValue(func() []raceLogin {
		close(done)
		wg.Wait()
		return snapshot()
	})
	return snapshot, stop
}

// awaitTokens waits until logins have handed out at least one token, so
// that the change that follows races logins that succeed, however slowly
// the machine runs them (under -race and the whole suite's load a login
// took up to 2 s).
func awaitTokens(t *testing.T, snapshot func() []raceLogin) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, all := issuedBefore(snapshot(), time.Now()); all > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no login with the old password got a token within 30 s (%d logins)", len(snapshot()))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// issuedBefore returns how many of logins got a token before at, and how
// many logins in all got one.
func issuedBefore(logins []raceLogin, at time.Time) (before, all int) {
	for _, l := range logins {
		if l.token != "" {
			all++
			if l.sent.Before(at) {
				before++
			}
		}
	}
	return before, all
}

// TestPasswordChangeEndsRacingLoginsFleet: two instances on one Redis and
// one users file; B never reloads during the test. Four clients log in
// with alice's old password on B while she changes it through A. Once A
// has answered 200, every token a login on B handed out is refused at once
// on both instances (no wait for B's reload), and every later login on B
// with the old password is 401 invalid_credentials; a login with the new
// password on A works at once (issue 19, point 1: the token store itself
// refuses sessions of a superseded password). Before, B accepted the
// tokens of logins that checked the old password during the change, and
// took new logins on it, until it reloaded.
func TestPasswordChangeEndsRacingLoginsFleet(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	usersPath := harness.WriteTestUsers(t)
	prefix := testservers.UniquePrefix()
	baseA, logA, stopA := harness.StartServer(t, nil, fleetRaceFlags(usersPath, redisURL, prefix, "1h")...)
	defer stopA()
	baseB, logB, stopB := harness.StartServer(t, nil, fleetRaceFlags(usersPath, redisURL, prefix, "1h")...)
	defer stopB()
	defer func() {
		if t.Failed() {
			t.Logf("server A log:\n%s", logA)
			t.Logf("server B log:\n%s", logB)
		}
	}()
	owner := harness.TokenOf(t, "alice on A", harness.Login(t, baseA, "alice"))

	snapshot, stop := racingLogins(t, baseB)
	defer stop()
	awaitTokens(t, snapshot)
	change := harness.Do(t, "POST", baseA+"/api/auth/password/", owner, harness.ChangeBody("alice-pw", harness.NewPassphrase))
	answered := time.Now()
	if change.Status != 200 {
		t.Fatalf("password change on A = %v; want 200", change)
	}
	// At once, to the bound another instance's token cache allows (API.md,
	// Operations): the tokens handed out so far are dead on B, which has
	// not seen the change.
	for _, l := range snapshot() {
		if l.token != "" {
			harness.WantInvalidTokenWithin(t, "a token of the old password from B, on B, right after the change answered", baseB, l.token)
		}
	}
	// A fresh login with the new password on the instance that answered.
	fresh := harness.TokenOf(t, "alice on A with the new password, right after the change", harness.Do(t, "POST", baseA+"/api/auth/login/", "", `{"username":"alice","password":"`+harness.NewPassphrase+`"}`))
	harness.WantInfo(t, "the change's own token on A", baseA, harness.TokenOf(t, "the change's reply", change), harness.AliceInfo)
	harness.WantInfo(t, "a new-password token on A", baseA, fresh, harness.AliceInfo)
	time.Sleep(200 * time.Millisecond) // logins on B go on after the change
	logins := stop()

	before, all := issuedBefore(logins, answered)
	if before == 0 {
		t.Fatalf("no login on B with the old password got a token before the change answered (%d logins); the race was not run", len(logins))
	}
	t.Logf("%d logins on B, %d tokens issued on the old password, %d of them sent before the change answered", len(logins), all, before)
	for _, l := range logins {
		switch {
		case l.token != "":
			harness.WantInvalidToken(t, "a token of the old password from B, on A", baseA, l.token)
			harness.WantInvalidToken(t, "a token of the old password from B, on B", baseB, l.token)
		case l.code != 401:
			t.Errorf("a login on B with the old password = %d; want 200 before the change, else 401", l.code)
		}
		if !l.sent.Before(answered) && l.code != 401 {
			t.Errorf("a login on B with the old password, sent after the change answered = %d; want 401", l.code)
		}
	}
	if r := harness.Do(t, "POST", baseB+"/api/auth/login/", "", `{"username":"alice","password":"alice-pw"}`); r.Status != 401 || r.Code() != "invalid_credentials" {
		t.Errorf("a login on B with the old password after the change = %v; want 401 invalid_credentials", r)
	}
}

// TestCLIPasswdEndsRacingLoginsFleet: two instances on one Redis and one
// users file; A reloads every 100 ms, B never during the test. Four
// clients log in with alice's old password on B while user passwd changes
// it. Once A has reloaded, the store refuses the old password's tokens for
// the fleet: every token those logins handed out is refused on A and on
// B, which still has the old password, and B's logins with it are 401,
// within 5 s of passwd's exit (issue 19, point 1). Before, B went on
// issuing and accepting them until its own reload.
func TestCLIPasswdEndsRacingLoginsFleet(t *testing.T) {
	harness.Long(t)
	redisURL, _, _ := testservers.Redis(t)
	usersPath := harness.WriteTestUsers(t)
	prefix := testservers.UniquePrefix()
	baseA, logA, stopA := harness.StartServer(t, nil, fleetRaceFlags(usersPath, redisURL, prefix, "100ms")...)
	defer stopA()
	baseB, logB, stopB := harness.StartServer(t, nil, fleetRaceFlags(usersPath, redisURL, prefix, "1h")...)
	defer stopB()
	defer func() {
		if t.Failed() {
			t.Logf("server A log:\n%s", logA)
			t.Logf("server B log:\n%s", logB)
		}
	}()

	snapshot, stop := racingLogins(t, baseB)
	defer stop()
	awaitTokens(t, snapshot)
	harness.MustRunCLI(t, harness.NewPassphrase+"\n", "user", "passwd", "--users", usersPath, "--cost", "4", "alice")
	exited := time.Now()
	// B has not reloaded: it still checks the old password, and only the
	// store, told by A's reload, can refuse the login.
	var refused time.Time
	for refused.IsZero() {
		r := harness.Do(t, "POST", baseB+"/api/auth/login/", "", `{"username":"alice","password":"alice-pw"}`)
		switch {
		case r.Status == 401 && r.Code() == "invalid_credentials":
			refused = time.Now()
		case r.Status != 200:
			t.Fatalf("a login on B with the old password after user passwd = %v; want 200 until A has reloaded, then 401", r)
		case time.Since(exited) > harness.HealBound():
			t.Fatalf("B still took the old password %v after user passwd exited; want 401 within %v", time.Since(exited), harness.HealBound())
		}
	}
	t.Logf("B refused the old password %v after user passwd exited", refused.Sub(exited))
	logins := stop()
	before, all := issuedBefore(logins, exited)
	if before == 0 {
		t.Fatalf("no login on B with the old password got a token before user passwd exited (%d logins); the race was not run", len(logins))
	}
	t.Logf("%d logins on B, %d tokens issued on the old password, %d of them sent before user passwd exited", len(logins), all, before)
	for _, l := range logins {
		if l.token != "" {
			harness.WantInvalidToken(t, "a token of the old password from B, on A", baseA, l.token)
			harness.WantInvalidToken(t, "a token of the old password from B, on B (not reloaded)", baseB, l.token)
		}
		if l.sent.After(refused) && l.code != 401 {
			t.Errorf("a login on B with the old password, sent after B first refused it = %d; want 401", l.code)
		}
	}
	harness.WantInfo(t, "a new-password token from A, on A", baseA, harness.TokenOf(t, "alice on A with the new password", harness.Do(t, "POST", baseA+"/api/auth/login/", "", `{"username":"alice","password":"`+harness.NewPassphrase+`"}`)), harness.AliceInfo)
}

// hupAndWait sends the process a SIGHUP and waits for the server whose log
// is log to reload.
func hupAndWait(t *testing.T, log *servertest.LineLog) {
	t.Helper()
	reloads := strings.Count(log.String(), "users file reloaded")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); strings.Count(log.String(), "users file reloaded") == reloads; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no reload within 10 s of SIGHUP; log:\n%s", log)
		}
	}
}

// TestUserAddedAgainLogsIn: the token store forgets the password stamp of
// a deleted user, so a user added again under the name (whose password
// generation starts over) logs in, whether the server sees the deletion
// and the addition apart or in one reload.
func TestUserAddedAgainLogsIn(t *testing.T) {
	harness.Long(t)
	redisURL, _, _ := testservers.Redis(t)
	for _, apart := range []bool{true, false} {
		t.Run(fmt.Sprint("apart=", apart), func(t *testing.T) {
			path := harness.WriteTestUsers(t)
			base, log, stop := harness.StartServer(t, nil, "--users", path, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--cost", "4", "--reload-interval", "1h")
			defer stop()
			owner := harness.TokenOf(t, "alice", harness.Login(t, base, "alice"))
			if r := harness.Do(t, "POST", base+"/api/auth/password/", owner, harness.ChangeBody("alice-pw", harness.NewPassphrase)); r.Status != 200 {
				t.Fatalf("password change = %v; want 200", r)
			}
			harness.MustRunCLI(t, "", "user", "del", "--users", path, "alice")
			if apart {
				hupAndWait(t, log)
			}
			harness.AddUser(t, path, "alice", "alice-again")
			hupAndWait(t, log)
			r := harness.Do(t, "POST", base+"/api/auth/login/", "", `{"username":"alice","password":"alice-again"}`)
			harness.WantInfo(t, "the new alice's token", base, harness.TokenOf(t, "the new alice", r), `{"username":"alice","name":"","email":"","groups":[],"admin":false}`)
		})
	}
}

// TestCopyBackAfterPasswordChange: an older users file put back after a
// password change restores the old password, and the token store follows
// the directory: the old password logs in again (its tokens from before the
// change stay dead, by the cut-off kept outside the file), and the new one
// no longer does. Before the reload hook told the store of a password
// generation that moved back, the store kept refusing the restored
// password's logins.
func TestCopyBackAfterPasswordChange(t *testing.T) {
	harness.Long(t)
	redisURL, _, _ := testservers.Redis(t)
	path := harness.WriteTestUsers(t)
	base, log, stop := harness.StartServer(t, nil, "--users", path, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--cost", "4", "--reload-interval", "1h")
	defer stop()
	older, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before := harness.TokenOf(t, "alice", harness.Login(t, base, "alice"))
	if r := harness.Do(t, "POST", base+"/api/auth/password/", before, harness.ChangeBody("alice-pw", harness.NewPassphrase)); r.Status != 200 {
		t.Fatalf("password change = %v; want 200", r)
	}
	if err := os.WriteFile(path, older, 0o600); err != nil {
		t.Fatal(err)
	}
	hupAndWait(t, log)
	harness.WantInfo(t, "a login on the restored password", base, harness.TokenOf(t, "alice on the restored password", harness.Login(t, base, "alice")), harness.AliceInfo)
	harness.WantInvalidToken(t, "a token from before the change", base, before)
	if r := harness.Do(t, "POST", base+"/api/auth/login/", "", `{"username":"alice","password":"`+harness.NewPassphrase+`"}`); r.Status != 401 {
		t.Errorf("a login on the password the older file took back = %v; want 401", r)
	}
}
