package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"authsvc/internal/secret"
	"authsvc/internal/servertest"
	"authsvc/internal/users/usersfile"
)

// mfaColumns runs user list on path with args and env, and returns each
// user's MFA column by username.
func mfaColumns(t *testing.T, path string, env map[string]string, args ...string) map[string]string {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", env, append([]string{"user", "list", "--users", path}, args...)...)
	if code != 0 || stderr != "" {
		t.Fatalf("user list %q = exit %d, stderr %q; want 0, nothing", args, code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if head := strings.Fields(lines[0]); len(head) < 4 || head[3] != "MFA" {
		t.Fatalf("user list %q: header %q; want MFA fourth", args, lines[0])
	}
	cols := make(map[string]string)
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		cols[f[0]] = f[3]
	}
	return cols
}

// TestCLIUserListRequireMFA: with --require-mfa (or AUTHSVC_REQUIRE_MFA,
// which the flag overrides), user list's MFA column says required for
// exactly the enabled users the policy covers who have no second factor
// (an unconfirmed enrolment is none); without it, nobody is required.
func TestCLIUserListRequireMFA(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "ada", "pw", "--admin")                  // an admin with an authenticator
	addUser(t, path, "bob", "pw", "--admin")                  // an admin with none
	addUser(t, path, "cy", "pw", "--admin", "--group", "ops") // an admin, disabled, with none
	addUser(t, path, "dee", "pw", "--group", "ops")           // in ops, an enrolment not confirmed
	addUser(t, path, "eve", "pw", "--group", "dev")           // in dev, recovery codes alone
	addUser(t, path, "fay", "pw")                             // nobody in particular
	mustRunCLI(t, "", "user", "disable", "--users", path, "cy")
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ada, _ := testFactors(t, key, "ada", mustSecret(t), nil, 0)
	setFactors(t, path, "ada", ada)
	dee, _ := testFactors(t, key, "dee", nil, mustSecret(t), 0)
	setFactors(t, path, "dee", dee)
	eve, _ := testFactors(t, key, "eve", nil, nil, 2)
	setFactors(t, path, "eve", eve)

	all := map[string]string{"ada": "totp", "bob": "required", "cy": "-", "dee": "required", "eve": "codes(2)", "fay": "required"}
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want map[string]string
	}{
		{nil, nil, map[string]string{"ada": "totp", "bob": "-", "cy": "-", "dee": "-", "eve": "codes(2)", "fay": "-"}},
		{[]string{"--require-mfa", "none"}, map[string]string{"AUTHSVC_REQUIRE_MFA": "all"}, map[string]string{"ada": "totp", "bob": "-", "cy": "-", "dee": "-", "eve": "codes(2)", "fay": "-"}},
		{[]string{"--require-mfa", "admins"}, nil, map[string]string{"ada": "totp", "bob": "required", "cy": "-", "dee": "-", "eve": "codes(2)", "fay": "-"}},
		{[]string{"--require-mfa=group:ops,group:dev"}, nil, map[string]string{"ada": "totp", "bob": "-", "cy": "-", "dee": "required", "eve": "codes(2)", "fay": "-"}},
		{nil, map[string]string{"AUTHSVC_REQUIRE_MFA": "all"}, all},
	} {
		if got := mfaColumns(t, path, tt.env, tt.args...); !equalMaps(got, tt.want) {
			t.Errorf("user list %q with %v: MFA column = %v; want %v", tt.args, tt.env, got, tt.want)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestCLIRequireMFARefused: a value --require-mfa does not spell, on the
// command line or in AUTHSVC_REQUIRE_MFA, is a usage error (exit 2) of
// one line for serve and user list alike, before anything is opened.
func TestCLIRequireMFARefused(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-dir", "users.json") // opening it would be another error
	for _, tt := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"serve", "--require-mfa", "admin"}, "", `serve: --require-mfa "admin": want none, admins, all`},
		{[]string{"serve"}, "group:", `serve: --require-mfa "group:": want`},
		{[]string{"serve", "--require-mfa", "group:ops,admins"}, "", `serve: --require-mfa "group:ops,admins": want`},
		{[]string{"serve", "--require-mfa", "group:a\nb"}, "", `serve: --require-mfa group "a\nb"`},
		{[]string{"user", "list", "--require-mfa", "everyone"}, "", `user list: --require-mfa "everyone": want`},
		{[]string{"user", "list"}, "Admins", `user list: --require-mfa "Admins": want`},
	} {
		env := map[string]string{"AUTHSVC_USERS": missing}
		if tt.env != "" {
			env["AUTHSVC_REQUIRE_MFA"] = tt.env
		}
		code, stdout, stderr := runCLI(t, "", env, tt.args...)
		if code != 2 || stdout != "" || !strings.HasPrefix(stderr, "authsvc: "+tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("authsvc %q with AUTHSVC_REQUIRE_MFA=%q = exit %d, stdout %q, stderr %q; want 2, one line starting %q", tt.args, tt.env, code, stdout, stderr, tt.want)
		}
	}
	c, err := parseServeFlags([]string{"--require-mfa", "group:ops,group:dev,group:ops"}, func(string) string { return "" }, io.Discard)
	if err != nil || c.requireMFA.String() != "group:dev,group:ops" {
		t.Errorf("parseServeFlags(--require-mfa group:ops,group:dev,group:ops) = %v, %v; want group:dev,group:ops", c.requireMFA, err)
	}
	if c := defaultServeConfig(); !c.requireMFA.None() {
		t.Errorf("serve's default --require-mfa = %v; want none", c.requireMFA)
	}
}

// waitMetric polls base's /metrics until the line of name reads want,
// and fails t if it never does.
func waitMetric(t *testing.T, base, name, want string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		last = regexp.MustCompile(`(?m)^` + name + ` .*$`).FindString(string(body))
		if last == name+" "+want {
			return
		}
	}
	t.Fatalf("/metrics: %q; want %s %s", last, name, want)
}

// enrolmentRequired logs username in on base with password and reports
// whether the reply says the session may only enrol a second factor.
func enrolmentRequired(t *testing.T, base, username, password string) bool {
	t.Helper()
	resp, body := servertest.PostJSON(t, base+"/api/auth/login/", fmt.Sprintf(`{"username":%q,"password":%q}`, username, password))
	var reply struct {
		Token    string
		Required *bool `json:"mfa_enrollment_required"`
	}
	if err := json.Unmarshal([]byte(body), &reply); resp.StatusCode != 200 || err != nil || reply.Token == "" {
		t.Fatalf("login(%s) = %d %s; want 200 with a token", username, resp.StatusCode, body)
	}
	if reply.Required != nil && !*reply.Required {
		t.Errorf("login(%s) = %s; want mfa_enrollment_required true or absent", username, body)
	}
	return reply.Required != nil
}

// TestServeRequireMFA: serve's --require-mfa reaches the server (a
// covered user without a second factor logs in to enrolment only), and
// authsvc_mfa_enrollment_pending counts the enabled users it covers who
// have none, following the users as they change.
func TestServeRequireMFA(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil { // alice (dev), bob (admin), carol (disabled)
		t.Fatal(err)
	}
	base, log, _ := startServer(t, map[string]string{"AUTHSVC_USERS": path, "AUTHSVC_RELOAD_INTERVAL": "50ms"}, "--cost", "4", "--require-mfa", "admins")
	log.WaitFor(t, regexp.MustCompile(`msg="second factor required" require_mfa=admins`))
	waitMetric(t, base, "authsvc_mfa_enrollment_pending", "1")
	if !enrolmentRequired(t, base, "bob", "bob-pw") {
		t.Errorf("login(bob, an admin without a second factor) under --require-mfa admins: no mfa_enrollment_required; want it true")
	}
	if enrolmentRequired(t, base, "alice", "alice-pw") {
		t.Errorf("login(alice, no admin) under --require-mfa admins: mfa_enrollment_required; want it absent")
	}
	addUser(t, path, "dave", "dave-pw", "--admin")
	waitMetric(t, base, "authsvc_mfa_enrollment_pending", "2")
	mustRunCLI(t, "", "user", "disable", "--users", path, "bob")
	waitMetric(t, base, "authsvc_mfa_enrollment_pending", "1")

	// Without the flag, nobody is pending and nobody is held to enrolment.
	other := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(other, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	base, log, _ = startServer(t, map[string]string{"AUTHSVC_USERS": other}, "--cost", "4")
	if enrolmentRequired(t, base, "bob", "bob-pw") {
		t.Errorf("login(bob) without --require-mfa: mfa_enrollment_required; want it absent")
	}
	waitMetric(t, base, "authsvc_mfa_enrollment_pending", "0")
	if strings.Contains(log.String(), "second factor required") {
		t.Errorf("serve without --require-mfa logged that a second factor is required:\n%s", log)
	}
}
