package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/users"
)

// requireMFAEnv is a test env whose --require-mfa is policy.
func requireMFAEnv(t *testing.T, policy string) *testEnv {
	t.Helper()
	p, err := users.ParseMFAPolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	return newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL, c.maxPerUser, c.requireMFA = time.Hour, 100, p
	})
}

// loginReply logs username in with the password alone and returns the
// token and whether the reply says it is for enrolment only.
func (e *testEnv) loginReply(username string) (token string, enrolment bool) {
	e.t.Helper()
	w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"`+username+`","password":"`+username+`-pw"}`)
	body := reply(e.t, w)
	if w.Code != http.StatusOK {
		e.t.Fatalf("login(%s) = %d %s; want 200", username, w.Code, w.Body)
	}
	v, present := body["mfa_enrollment_required"]
	if present && v != true {
		e.t.Fatalf("login(%s): mfa_enrollment_required = %v; want true or absent", username, v)
	}
	token, _ = body["token"].(string)
	return token, present
}

// enrolmentOnlyRefusals are requests every endpoint but enrolment's and
// logout's answers an enrolment session 403 mfa_enrollment_required.
var enrolmentOnlyRefusals = []struct{ method, path, body string }{
	{"GET", "/api/auth/info", ""},
	{"GET", "/api/auth/info?username=alice", ""},
	{"POST", "/api/auth/logoutall/", ""},
	{"POST", "/api/auth/password/", `{"current_password":"x","new_password":"a much better password"}`},
	{"GET", "/api/auth/sessions/", ""},
	{"DELETE", "/api/auth/sessions/abc", ""},
	{"POST", "/api/auth/tokens/", `{"name":"ci","scopes":["info"],"password":"x"}`},
	{"GET", "/api/auth/tokens/", ""},
	{"DELETE", "/api/auth/tokens/abc", ""},
	{"POST", "/api/auth/introspect/", `{"token":"x"}`},
	{"DELETE", "/api/auth/mfa/totp/", `{"password":"x","code":"123456"}`},
	{"POST", "/api/auth/mfa/recovery-codes/", `{"password":"x","code":"123456"}`},
	{"GET", "/api/admin/users/", ""},
	{"POST", "/api/admin/users/alice/logout", ""},
}

// TestRequiredSecondFactorJourney walks API.md's "Required second factor"
// through the real handler and users file: which users the policy
// covers, the enrolment token's one door, enrolment turning it into a
// full token, the next login asking for the factor, and reset-mfa
// putting the user back to enrolment.
func TestRequiredSecondFactorJourney(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy          string
		covered, spared string // users of servertest.TestUsers: bob is the admin, alice in group dev
	}{
		{"admins", "bob", "alice"},
		{"group:dev", "alice", "bob"},
		{"group:ops,group:dev", "alice", "bob"},
		{"all", "alice", ""},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			t.Parallel()
			e := requireMFAEnv(t, tc.policy)
			if tc.spared != "" {
				if tok, enrolment := e.loginReply(tc.spared); enrolment || e.infoStatus(tok) != http.StatusOK {
					t.Fatalf("login(%s) under %s: enrolment %v; want a full token", tc.spared, tc.policy, enrolment)
				}
			}
			tok, enrolment := e.loginReply(tc.covered)
			if !enrolment {
				t.Fatalf("login(%s) under %s: no mfa_enrollment_required; want true", tc.covered, tc.policy)
			}
			for _, r := range enrolmentOnlyRefusals {
				w := e.mfaDo(r.method, r.path, tok, r.body)
				if code := errorCode(t, w); w.Code != http.StatusForbidden || code != "mfa_enrollment_required" {
					t.Errorf("%s %s with an enrolment token = %d %s; want 403 mfa_enrollment_required", r.method, r.path, w.Code, code)
				}
			}
			if got := e.introspect(tc.covered, tok); got != `{"active":false}` {
				t.Errorf("introspection of an enrolment token = %s; want {\"active\":false}: it authenticates no one to a service", got)
			}
			if w := e.mfaDo("GET", "/api/auth/mfa/", tok, ""); w.Code != http.StatusOK {
				t.Fatalf("GET /api/auth/mfa/ with an enrolment token = %d %s; want 200", w.Code, w.Body)
			}
			secret32, _ := e.enrol(tc.covered, tok)
			if got := e.infoStatus(tok); got != http.StatusOK {
				t.Fatalf("/info with the enrolment token after confirming = %d; want 200: a full token", got)
			}
			if w := e.mfaDo("GET", "/api/auth/sessions/", tok, ""); w.Code != http.StatusOK {
				t.Errorf("GET /api/auth/sessions/ after confirming = %d %s; want 200", w.Code, w.Body)
			}
			if got := e.introspect(tc.covered, tok); !strings.Contains(got, `"active":true`) {
				t.Errorf("introspection of the token made full = %s; want active", got)
			}
			e.mfaToken(tc.covered) // the next login asks for the factor
			w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"`+tc.covered+`","password":"`+tc.covered+`-pw","otp":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
			if body := reply(t, w); w.Code != http.StatusOK || body["mfa_enrollment_required"] != nil {
				t.Fatalf("one-step login with a code = %d %s; want 200 without mfa_enrollment_required", w.Code, w.Body)
			}

			if _, _, err := users.ResetFactors(context.Background(), e.users, tc.covered); err != nil {
				t.Fatal(err)
			}
			if _, enrolment := e.loginReply(tc.covered); !enrolment {
				t.Errorf("login(%s) after reset-mfa: a full token; want one for enrolment only", tc.covered)
			}
		})
	}
}

// TestRequiredSecondFactorAppliesAtLogin: a policy turned on applies to
// the next login, never to a live session (API.md; the README says how an
// operator ends those).
func TestRequiredSecondFactorAppliesAtLogin(t *testing.T) {
	t.Parallel()
	e := requireMFAEnv(t, "none")
	before, enrolment := e.loginReply("alice")
	if enrolment {
		t.Fatal("login under none: mfa_enrollment_required; want a full token")
	}
	d := e.deps
	d.RequireMFA, _ = users.ParseMFAPolicy("all")
	e.handler = httpapi.NewServer(d) // the restart with --require-mfa all
	if got := e.infoStatus(before); got != http.StatusOK {
		t.Errorf("/info with a session from before the policy = %d; want 200", got)
	}
	after, enrolment := e.loginReply("alice")
	if !enrolment || e.infoStatus(after) != http.StatusForbidden {
		t.Errorf("login under all: enrolment %v; want a token for enrolment only", enrolment)
	}
}

// TestRemovingTheRequiredFactor: a covered user who removes their only
// factor keeps the presenting token, for enrolment only; the other
// tokens die as with any factor change.
func TestRemovingTheRequiredFactor(t *testing.T) {
	t.Parallel()
	e := requireMFAEnv(t, "all")
	tok, _ := e.loginReply("alice")
	secret32, _ := e.enrol("alice", tok)
	w := e.mfaDo("DELETE", "/api/auth/mfa/totp/", tok, `{"password":"alice-pw","code":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
	if w.Code != http.StatusNoContent {
		t.Fatalf("DELETE /api/auth/mfa/totp/ = %d %s; want 204", w.Code, w.Body)
	}
	w = e.mfaDo("GET", "/api/auth/info", tok, "")
	if code := errorCode(t, w); w.Code != http.StatusForbidden || code != "mfa_enrollment_required" {
		t.Errorf("/info after removing the required factor = %d %s; want 403 mfa_enrollment_required", w.Code, code)
	}
	if w := e.mfaDo("POST", "/api/auth/mfa/totp/", tok, `{"password":"alice-pw"}`); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "otpauth://") {
		t.Errorf("POST /api/auth/mfa/totp/ after removal = %d %s; want 200 with a new secret", w.Code, w.Body)
	}
}

// introspect returns the introspection answer for token, asked with a
// personal access token of the introspect scope that spared (a user
// other than covered, whom the policy spares or who is enrolled) mints.
func (e *testEnv) introspect(covered, token string) string {
	e.t.Helper()
	asker := "bob"
	if covered == "bob" {
		asker = "alice"
	}
	if e.introspector == "" {
		tok, enrolment := e.loginReply(asker)
		extra := `"name":"introspect","scopes":["introspect"]`
		if enrolment { // under "all": the asker enrols, and mints with a code
			secret32, _ := e.enrol(asker, tok)
			extra += `,"code":"` + totpCode(e.t, secret32, e.clock.Now()) + `"`
		}
		e.introspector = e.mintPAT(asker, tok, extra).Token
	}
	w := e.do("POST", "/api/auth/introspect/", "token="+token, "Content-Type: application/x-www-form-urlencoded", "Authorization: Bearer "+e.introspector)
	if w.Code != http.StatusOK {
		e.t.Fatalf("POST /api/auth/introspect/ = %d %s; want 200", w.Code, w.Body)
	}
	return strings.TrimSpace(w.Body.String())
}
