package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"authsvc/internal/throttle"
	"authsvc/internal/users"
)

// codeLockEnv is an env whose per-pair and per-user windows are out of
// the way, so that the code lock alone refuses.
func codeLockEnv(t *testing.T) *testEnv {
	t.Helper()
	return newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.throttle.PairFailures, c.throttle.UserFailures = 1000, 1000
	})
}

// codeEndpoints are the endpoints behind a session that check a code of
// alice's second factor beside her password: each request sends code.
var codeEndpoints = []struct {
	name         string
	recoveryOnly bool // alice's factor is recovery codes alone (enrolment asks a code only then)
	send         func(e *testEnv, session, code string, i int) *httptest.ResponseRecorder
}{
	{"token create", false, func(e *testEnv, session, code string, i int) *httptest.ResponseRecorder {
		return e.mfaDo("POST", "/api/auth/tokens/", session, `{"name":"t`+strconv.Itoa(i)+`","password":"alice-pw","code":"`+code+`"}`)
	}},
	{"totp removal", false, func(e *testEnv, session, code string, _ int) *httptest.ResponseRecorder {
		return e.mfaDo("DELETE", "/api/auth/mfa/totp/", session, `{"password":"alice-pw","code":"`+code+`"}`)
	}},
	{"recovery codes", false, func(e *testEnv, session, code string, _ int) *httptest.ResponseRecorder {
		return e.mfaDo("POST", "/api/auth/mfa/recovery-codes/", session, `{"password":"alice-pw","code":"`+code+`"}`)
	}},
	{"totp enrol", true, func(e *testEnv, session, code string, _ int) *httptest.ResponseRecorder {
		return e.mfaDo("POST", "/api/auth/mfa/totp/", session, `{"password":"alice-pw","code":"`+code+`"}`)
	}},
}

// wrongCode is never a TOTP code, nor (but for 2^-120) a recovery code.
const wrongCode = "aaaaaa-aaaaaa-aaaaaa-aaaaaa"

// TestCodeLockCountsEveryCode: wrong codes sent to token create, factor
// removal, recovery-code replacement and enrolment count toward the 100
// consecutive wrong codes of the code lock, with the login's own (API.md,
// Two-factor authentication; issue 37, point 9). 60 wrong codes at login
// and 40 at the endpoint lock the user: the right code then answers 429
// throttled, at login and at the endpoint alike.
func TestCodeLockCountsEveryCode(t *testing.T) {
	t.Parallel()
	for _, ep := range codeEndpoints {
		t.Run(ep.name, func(t *testing.T) {
			t.Parallel()
			e := codeLockEnv(t)
			session := e.login("alice")
			var right func() string // a right code, new each time
			if ep.recoveryOnly {
				f, codes := recoveryFactors(t, e.keys.Current(), 10)
				if err := e.users.Update(context.Background(), "alice", func(u *users.User) error { u.MFA = f; return nil }); err != nil {
					t.Fatal(err)
				}
				right = func() string { c := codes[0]; codes = codes[1:]; return c }
			} else {
				secret32, _ := e.enrol("alice", session)
				right = func() string { e.clock.Advance(30 * time.Second); return totpCode(t, secret32, e.clock.Now()) }
			}
			const atLogin = 60
			for i := range throttle.MaxCodeFailures {
				var w *httptest.ResponseRecorder
				if i < atLogin {
					w = e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+wrongCode+`"}`)
				} else {
					w = ep.send(e, session, wrongCode, i)
				}
				if w.Code != http.StatusUnauthorized || errorCode(t, w) != "invalid_credentials" {
					t.Fatalf("wrong code %d of %d = %d %s; want 401 invalid_credentials", i+1, throttle.MaxCodeFailures, w.Code, w.Body)
				}
			}
			locked := func(what string, w *httptest.ResponseRecorder) {
				t.Helper()
				if w.Code != http.StatusTooManyRequests || errorCode(t, w) != "throttled" || w.Header().Get("Retry-After") == "" {
					t.Errorf("%s after %d wrong codes at login and %d at %s = %d %s; want 429 throttled with Retry-After",
						what, atLogin, throttle.MaxCodeFailures-atLogin, ep.name, w.Code, w.Body)
				}
			}
			locked("one-step login with the right code", e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+right()+`"}`))
			locked(ep.name+" with the right code", ep.send(e, session, right(), throttle.MaxCodeFailures))
		})
	}
}

// TestCodeLockRightCodeResets: a right code at one of these endpoints
// starts the count again, as a successful second step does: 99 wrong
// codes, a right one there, 99 more, and the right code still logs in.
func TestCodeLockRightCodeResets(t *testing.T) {
	t.Parallel()
	for _, ep := range codeEndpoints {
		if ep.name == "totp removal" || ep.recoveryOnly {
			continue // its success leaves no authenticator to go on with
		}
		t.Run(ep.name, func(t *testing.T) {
			t.Parallel()
			e := codeLockEnv(t)
			session := e.login("alice")
			secret32, _ := e.enrol("alice", session)
			right := func() string { e.clock.Advance(30 * time.Second); return totpCode(t, secret32, e.clock.Now()) }
			wrong := func() {
				t.Helper()
				for i := range throttle.MaxCodeFailures - 1 {
					w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+wrongCode+`"}`)
					if w.Code != http.StatusUnauthorized {
						t.Fatalf("wrong code %d at login = %d %s; want 401", i+1, w.Code, w.Body)
					}
				}
			}
			wrong()
			if w := ep.send(e, session, right(), 0); w.Code/100 != 2 {
				t.Fatalf("%s with the right code after %d wrong ones = %d %s; want success", ep.name, throttle.MaxCodeFailures-1, w.Code, w.Body)
			}
			wrong()
			if w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+right()+`"}`); w.Code != http.StatusOK {
				t.Errorf("one-step login with the right code after 99 wrong, a right one at %s, and 99 wrong = %d %s; want 200: the right code started the count again", ep.name, w.Code, w.Body)
			}
		})
	}
}
