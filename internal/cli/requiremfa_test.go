package cli

import (
	"io"
	"path/filepath"
	"strings"
	"testing"

	"authsvc/internal/secret"
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
