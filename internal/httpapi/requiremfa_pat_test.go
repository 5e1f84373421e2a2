package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"authsvc/internal/httpapi"
	"authsvc/internal/users"
)

// TestRequiredSecondFactorPATs: --require-mfa covers personal access
// tokens (API.md, Required second factor; issue 37, point 2). bob, an
// admin without a factor, mints an admin token; the instance restarts
// with --require-mfa admins. From then on, with no user logout, his token
// answers 403 mfa_enrollment_required on every endpoint (the admin API's
// create of a new admin included, which makes no one), introspects as
// inactive, and his session from before the policy mints nothing. Once he
// enrols, the same token works again. alice, whom the policy spares, is
// untouched.
func TestRequiredSecondFactorPATs(t *testing.T) {
	t.Parallel()
	e := requireMFAEnv(t, "none")
	session, enrolment := e.loginReply("bob")
	if enrolment {
		t.Fatal("login(bob) under none: mfa_enrollment_required; want a full token")
	}
	pat := e.mintPAT("bob", session, `"name":"ops","scopes":["admin","info","introspect"]`).Token
	aliceSession, _ := e.loginReply("alice")
	alicePAT := e.mintPAT("alice", aliceSession, `"name":"ci","scopes":["info"]`).Token

	d := e.deps
	d.RequireMFA, _ = users.ParseMFAPolicy("admins")
	e.handler = httpapi.NewServer(d) // the restart with --require-mfa admins

	refusals := append([]struct{ method, path, body string }{
		{"GET", "/api/auth/mfa/", ""},
		{"POST", "/api/auth/mfa/totp/", `{"password":"bob-pw"}`},
		{"POST", "/api/auth/mfa/totp/confirm/", `{"code":"123456"}`},
		{"POST", "/api/auth/logout/", ""},
		{"GET", "/api/admin/users/bob", ""},
		{"POST", "/api/admin/users/", `{"username":"mallory","password":"a long enough password, surely","admin":true}`},
	}, enrolmentOnlyRefusals...)
	for _, r := range refusals {
		w := e.mfaDo(r.method, r.path, pat, r.body)
		if code := errorCode(t, w); w.Code != http.StatusForbidden || code != "mfa_enrollment_required" {
			t.Errorf("%s %s with bob's admin token from before the policy = %d %s; want 403 mfa_enrollment_required", r.method, r.path, w.Code, code)
		}
	}
	if _, err := e.users.Lookup(context.Background(), "mallory"); err == nil {
		t.Error("the admin API made mallory with the token of an admin the policy refuses")
	}
	if got := e.introspect("bob", pat); got != `{"active":false}` {
		t.Errorf("introspection of bob's token = %s; want {\"active\":false}: it opens nothing", got)
	}
	w := e.mfaDo("POST", "/api/auth/tokens/", session, `{"name":"again","scopes":["admin"],"password":"bob-pw"}`)
	if code := errorCode(t, w); w.Code != http.StatusForbidden || code != "mfa_enrollment_required" {
		t.Errorf("POST /api/auth/tokens/ with bob's session from before the policy = %d %s; want 403 mfa_enrollment_required", w.Code, code)
	}
	if got := e.infoStatus(alicePAT); got != http.StatusOK {
		t.Errorf("/info with alice's token (the policy spares her) = %d; want 200", got)
	}
	if got := e.introspect("bob", alicePAT); !strings.Contains(got, `"active":true`) {
		t.Errorf("introspection of alice's token = %s; want active", got)
	}

	enrolSession, enrolment := e.loginReply("bob")
	if !enrolment {
		t.Fatal("login(bob) under admins: a full token; want one for enrolment only")
	}
	secret32, _ := e.enrol("bob", enrolSession)
	if got := e.infoStatus(pat); got != http.StatusOK {
		t.Errorf("/info with bob's token once he has a factor = %d; want 200", got)
	}
	if got := e.introspect("bob", pat); !strings.Contains(got, `"active":true`) {
		t.Errorf("introspection of bob's token once he has a factor = %s; want active", got)
	}
	e.mintPAT("bob", enrolSession, `"name":"again","scopes":["admin"],"code":"`+totpCode(t, secret32, e.clock.Now())+`"`)
}
