package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// requiredBound is how long this test waits for what the directory alone
// carries to reach an instance (API.md: changes reach every instance
// reading the users file within 5 s), and for a token re-bound on one
// instance to be answered as such by another (API.md, Tokens: "that
// answer may take up to the 5 s reload bound").
const requiredBound = 5 * time.Second

// TestRequiredSecondFactorFleet walks API.md's "Required second factor"
// over real `authsvc serve` instances sharing one users file, one secret
// key and one Redis token store, as a fleet runs (issue 32): a covered
// user (an admin without a factor, under --require-mfa admins) logs in on
// A to a token that only enrols, on A and on B alike; enrols on B and
// confirms on A, after which the same token is full on both; the next
// login asks for the factor; `authsvc user reset-mfa` puts the user back
// to enrolment; a third instance with another policy shows that a policy
// applies at login, never to live sessions; authsvc_mfa_enrollment_pending
// and `authsvc user list --require-mfa` count and name the covered users
// without a factor.
func TestRequiredSecondFactorFleet(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	f := newRequiredFleet(t, redisURL)
	// Under admins: bob and dave are covered and have no factor; erin is
	// an admin but disabled, alice is no admin.
	a := f.start(t, "A", "admins")
	b := f.start(t, "B", "admins")
	f.wantPending(t, a, 2)
	f.wantPending(t, b, 2)
	f.wantListed(t, "before any enrolment", map[string]string{"alice": "-", "bob": "required", "carol": "-", "dave": "required", "erin": "-"})

	// 1. bob's login on A only enrols, on A and on B.
	enrolment := f.enrolmentLogin(t, a, "bob")
	f.wantRestricted(t, "bob's enrolment token from A", a, enrolment)
	f.wantRestricted(t, "bob's enrolment token from A", b, enrolment)

	// 2. Enrol on B, confirm on A.
	status, body := harness.MFACall(t, "POST", b.base+"/api/auth/mfa/totp/", enrolment, `{"password":"bob-pw"}`)
	enrolled := time.Now()
	secret32, _ := body["secret"].(string)
	if status != 200 || secret32 == "" {
		t.Fatalf("POST /api/auth/mfa/totp/ on B with bob's enrolment token = %d %v; want 200 with a secret", status, body)
	}
	recovery := f.confirmOn(t, a, enrolment, secret32, enrolled)
	confirmed := time.Now()

	// 3. The same token is now full: on A at once, on B within the bound.
	harness.WantInfo(t, "bob's token on A, after the confirm on A", a.base, enrolment, harness.BobInfo)
	f.waitStatus(t, "GET /api/auth/info with bob's token, after the confirm on A", b, "GET", "/api/auth/info", enrolment, 200, "", confirmed)
	harness.WantInfo(t, "bob's token on B, after the confirm on A", b.base, enrolment, harness.BobInfo)
	for _, s := range []*requiredServer{a, b} {
		if status, body := harness.MFACall(t, "GET", s.base+"/api/admin/users/", enrolment, ""); status != 200 {
			t.Errorf("GET /api/admin/users/ on %s with bob's confirmed token = %d %v; want 200", s.name, status, body)
		}
	}
	f.wantPending(t, a, 1)
	f.wantPending(t, b, 1)
	f.wantListed(t, "after bob's confirm", map[string]string{"bob": "totp+codes(10)", "dave": "required"})

	// 4. bob's next login asks for the factor, on either instance; alice,
	// whom admins does not cover, logs in as ever.
	f.waitStatus(t, "bob's next login", a, "POST", "/api/auth/login/", "", 401, "mfa_required", confirmed, `{"username":"bob","password":"bob-pw"}`)
	f.waitStatus(t, "bob's next login", b, "POST", "/api/auth/login/", "", 401, "mfa_required", confirmed, `{"username":"bob","password":"bob-pw"}`)
	status, body = harness.MFACall(t, "POST", b.base+"/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTokenOn(t, b.base, "bob")+`","code":"`+recovery[0]+`"}`)
	if _, present := body["mfa_enrollment_required"]; status != 200 || present {
		t.Errorf("bob's second step on B with a recovery code = %d %v; want 200 without mfa_enrollment_required", status, body)
	}
	if tok, _ := body["token"].(string); tok != "" {
		harness.WantInfo(t, "bob's token from his second step on B, on A", a.base, tok, harness.BobInfo)
	}
	alice := f.fullLogin(t, a, "alice")
	f.fullLogin(t, b, "alice")
	daveEnrolment := f.enrolmentLogin(t, b, "dave")

	// 5. The operator's reset-mfa: bob's tokens end, and his next login
	// only enrols again, on both.
	if code, stdout, stderr := harness.RunCLIProgram(t, "", "user", "reset-mfa", "--users", f.usersPath, "bob"); code != 0 {
		t.Fatalf("authsvc user reset-mfa bob = exit %d, stdout %q, stderr %q; want exit 0", code, stdout, stderr)
	}
	reset := time.Now()
	for _, s := range []*requiredServer{a, b} {
		f.waitStatus(t, "bob's token after reset-mfa", s, "GET", "/api/auth/info", enrolment, 401, "invalid_token", reset)
		f.wantRestricted(t, "bob's enrolment token after reset-mfa", s, f.waitEnrolmentLogin(t, s, "bob", reset))
	}
	f.wantPending(t, a, 2)
	f.wantPending(t, b, 2)
	f.wantListed(t, "after bob's reset-mfa", map[string]string{"bob": "required", "dave": "required"})

	// 6. A policy applies at login, never to live sessions: C, on the
	// same users file and store, requires a factor of group dev alone.
	c := f.start(t, "C", "group:dev")
	f.wantPending(t, c, 1) // alice
	f.wantRestricted(t, "dave's enrolment token from B (admins), on C (group:dev)", c, daveEnrolment)
	harness.WantInfo(t, "alice's full token from A (admins), on C (group:dev)", c.base, alice, harness.AliceInfo)
	aliceEnrolment := f.enrolmentLogin(t, c, "alice")
	f.wantRestricted(t, "alice's enrolment token from C (group:dev)", c, aliceEnrolment)
	f.wantRestricted(t, "alice's enrolment token from C (group:dev), on A (admins)", a, aliceEnrolment)
	dave := f.fullLogin(t, c, "dave")
	harness.WantInfo(t, "dave's full token from C (group:dev), on A (admins)", a.base, dave, daveInfo)
	f.enrolmentLogin(t, a, "dave") // A's own policy is unchanged
	// An enrolment token may log out, wherever it was issued.
	if status, body := harness.MFACall(t, "POST", c.base+"/api/auth/logout/", daveEnrolment, ""); status != 204 {
		t.Errorf("POST /api/auth/logout/ on C with dave's enrolment token from B = %d %v; want 204", status, body)
	}
	harness.WantInvalidTokenWithin(t, "dave's enrolment token from B, after its logout on C", b.base, daveEnrolment)
}

// daveInfo is dave's info reply as newRequiredFleet adds him.
const daveInfo = `{"username":"dave","name":"","email":"","groups":[],"admin":true}`

// A requiredFleet is what the instances of TestRequiredSecondFactorFleet
// share: a users file (servertest.TestUsers, plus dave, an admin, and
// erin, a disabled admin), a secret key and a Redis store under one
// prefix.
type requiredFleet struct {
	usersPath string
	args      []string // every instance's flags but --require-mfa
}

// A requiredServer is one instance of a requiredFleet.
type requiredServer struct {
	name, base string
}

// newRequiredFleet writes the fleet's users file and key for store.
func newRequiredFleet(t *testing.T, store string) *requiredFleet {
	t.Helper()
	dir := t.TempDir()
	f := &requiredFleet{usersPath: filepath.Join(dir, "users.json")}
	if err := usersfile.Write(f.usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	harness.AddUser(t, f.usersPath, "dave", "dave-pw", "--admin")
	harness.AddUser(t, f.usersPath, "erin", "erin-pw", "--admin")
	harness.MustRunCLI(t, "", "user", "disable", "--users", f.usersPath, "erin")
	harness.WriteKeyFile(t, filepath.Join(dir, "fleet.key"))
	f.args = []string{"--cost", "4", "--users", f.usersPath, "--store", store, "--store-prefix", testservers.UniquePrefix(),
		"--secret-key-file", filepath.Join(dir, "fleet.key"), "--reload-interval", "50ms", "--refusal-delay", "0",
		"--login-failures", "100", "--user-failures", "100", "--login-burst", "1000", "--login-rate", "1000"}
	return f
}

// start runs an instance of the fleet named name with --require-mfa
// policy until the test ends; its log is printed if the test fails.
func (f *requiredFleet) start(t *testing.T, name, policy string) *requiredServer {
	t.Helper()
	base, log, stop := harness.StartServer(t, nil, append(f.args, "--require-mfa", policy)...)
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("%s (--require-mfa %s):\n%s", name, policy, harness.Tail(log.String(), 60))
		}
	})
	return &requiredServer{name: name, base: base}
}

// loginBody is the login body of a user of the fleet, whose password is
// the username followed by "-pw".
func loginBody(username string) string {
	return fmt.Sprintf(`{"username":%q,"password":%q}`, username, username+"-pw")
}

// enrolmentLogin logs username in on s and returns the token, failing t
// unless the reply is 200 with "mfa_enrollment_required": true.
func (f *requiredFleet) enrolmentLogin(t *testing.T, s *requiredServer, username string) string {
	t.Helper()
	status, body := harness.MFACall(t, "POST", s.base+"/api/auth/login/", "", loginBody(username))
	tok, _ := body["token"].(string)
	if status != 200 || body["mfa_enrollment_required"] != true || tok == "" {
		t.Fatalf("login(%s) on %s = %d %v; want 200 with a token and mfa_enrollment_required: true", username, s.name, status, body)
	}
	return tok
}

// waitEnrolmentLogin is enrolmentLogin once s has seen a change made
// at since in the directory: it logs in until the reply is an enrolment
// one, within requiredBound.
func (f *requiredFleet) waitEnrolmentLogin(t *testing.T, s *requiredServer, username string, since time.Time) string {
	t.Helper()
	for {
		status, body := harness.MFACall(t, "POST", s.base+"/api/auth/login/", "", loginBody(username))
		if tok, _ := body["token"].(string); status == 200 && body["mfa_enrollment_required"] == true && tok != "" {
			t.Logf("login(%s) on %s: an enrolment token %v after the change", username, s.name, time.Since(since).Round(time.Millisecond))
			return tok
		}
		if time.Since(since) > requiredBound {
			t.Fatalf("login(%s) on %s %v after the change = %d %v; want 200 with mfa_enrollment_required: true within %v", username, s.name, time.Since(since).Round(time.Millisecond), status, body, requiredBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fullLogin logs username in on s and returns the token, failing t
// unless the reply is 200 without an mfa_enrollment_required key and the
// token answers /api/auth/info.
func (f *requiredFleet) fullLogin(t *testing.T, s *requiredServer, username string) string {
	t.Helper()
	status, body := harness.MFACall(t, "POST", s.base+"/api/auth/login/", "", loginBody(username))
	tok, _ := body["token"].(string)
	if _, present := body["mfa_enrollment_required"]; status != 200 || present || tok == "" {
		t.Fatalf("login(%s) on %s = %d %v; want 200 with a token and no mfa_enrollment_required", username, s.name, status, body)
	}
	if status, body := harness.MFACall(t, "GET", s.base+"/api/auth/info", tok, ""); status != 200 {
		t.Errorf("GET /api/auth/info on %s with %s's full token = %d %v; want 200", s.name, username, status, body)
	}
	return tok
}

// wantRestricted checks that token may only enrol on s: /api/auth/info
// and the admin API answer 403 mfa_enrollment_required, the second
// factor's status 200.
func (f *requiredFleet) wantRestricted(t *testing.T, what string, s *requiredServer, token string) {
	t.Helper()
	for _, path := range []string{"/api/auth/info", "/api/admin/users/"} {
		if status, body := harness.MFACall(t, "GET", s.base+path, token, ""); status != 403 || body["code"] != "mfa_enrollment_required" {
			t.Errorf("GET %s on %s with %s = %d %v; want 403 mfa_enrollment_required", path, s.name, what, status, body)
		}
	}
	if status, body := harness.MFACall(t, "GET", s.base+"/api/auth/mfa/", token, ""); status != 200 || body["totp"] != false {
		t.Errorf("GET /api/auth/mfa/ on %s with %s = %d %v; want 200 with totp false", s.name, what, status, body)
	}
}

// waitStatus sends method path (with body, if any) to s with token until
// the reply has status and, for an error, code; it fails t unless that
// happens within requiredBound of since, and logs how long it took.
func (f *requiredFleet) waitStatus(t *testing.T, what string, s *requiredServer, method, path, token string, status int, code string, since time.Time, body ...string) {
	t.Helper()
	req := ""
	if len(body) > 0 {
		req = body[0]
	}
	first := ""
	for {
		got, reply := harness.MFACall(t, method, s.base+path, token, req)
		if got == status && (code == "" || reply["code"] == code) {
			if first != "" {
				t.Logf("%s on %s: %d %v after the change (answered %s before)", what, s.name, got, time.Since(since).Round(time.Millisecond), first)
			}
			return
		}
		if first == "" {
			first = fmt.Sprint(got, " ", reply["code"])
		}
		if time.Since(since) > requiredBound {
			t.Fatalf("%s on %s %v after the change = %d %v; want %d %s within %v", what, s.name, time.Since(since).Round(time.Millisecond), got, reply, status, code, requiredBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// confirmOn confirms the authenticator of secret32, whose enrolment
// another instance began at enrolled, on s with token, and wants it to
// succeed at once: s has not reloaded the users file since the
// enrolment, and must ask the file before it refuses a confirm for want
// of a pending enrolment.
func (f *requiredFleet) confirmOn(t *testing.T, s *requiredServer, token, secret32 string, enrolled time.Time) (recovery []string) {
	t.Helper()
	status, body := harness.MFACall(t, "POST", s.base+"/api/auth/mfa/totp/confirm/", token, `{"code":"`+harness.TOTPCode(t, secret32, time.Now())+`"}`)
	codes, _ := body["recovery_codes"].([]any)
	if status != 200 || len(codes) != 10 {
		t.Fatalf("POST /api/auth/mfa/totp/confirm/ on %s %v after the enrolment on another instance = %d %v; want 200 with ten recovery codes at once", s.name, time.Since(enrolled).Round(time.Millisecond), status, body)
	}
	for _, c := range codes {
		recovery = append(recovery, fmt.Sprint(c))
	}
	return recovery
}

// wantListed runs `authsvc user list --require-mfa admins` on the
// fleet's users file and checks the MFA column of the users in want:
// "required" for a user the policy covers who has no second factor.
func (f *requiredFleet) wantListed(t *testing.T, when string, want map[string]string) {
	t.Helper()
	code, stdout, stderr := harness.RunCLIProgram(t, "", "user", "list", "--require-mfa", "admins", "--users", f.usersPath)
	if code != 0 {
		t.Fatalf("authsvc user list --require-mfa admins %s = exit %d, stderr %q; want exit 0", when, code, stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(stdout, "\n")[1:] { // below the header
		if cols := strings.Fields(line); len(cols) > 3 { // USERNAME ADMIN DISABLED MFA ...
			got[cols[0]] = cols[3]
		}
	}
	for name, mfa := range want {
		if got[name] != mfa {
			t.Errorf("authsvc user list --require-mfa admins %s: MFA of %s = %q; want %q\n%s", when, name, got[name], mfa, stdout)
		}
	}
}

// pendingGauge matches the gauge of the users --require-mfa covers who
// have no second factor.
var pendingGauge = regexp.MustCompile(`(?m)^authsvc_mfa_enrollment_pending (\S+)$`)

// wantPending polls s's /metrics until authsvc_mfa_enrollment_pending is
// want, and fails t after requiredBound.
func (f *requiredFleet) wantPending(t *testing.T, s *requiredServer, want int) {
	t.Helper()
	start := time.Now()
	for {
		r := harness.Do(t, "GET", s.base+"/metrics", "", "")
		m := pendingGauge.FindStringSubmatch(r.Body)
		if r.Status == 200 && m != nil && m[1] == fmt.Sprint(want) {
			return
		}
		if time.Since(start) > requiredBound {
			got := "absent"
			if m != nil {
				got = m[1]
			}
			t.Errorf("authsvc_mfa_enrollment_pending on %s = %s (status %d); want %d within %v", s.name, got, r.Status, want, requiredBound)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
