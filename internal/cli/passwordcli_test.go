package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"authsvc/internal/password"
)

// TestCLIPasswordPolicy: user add and user passwd refuse a password the
// policy refuses, with exit 1, one line naming the rule and never the
// password, and the users file untouched.
func TestCLIPasswordPolicy(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	policyEnv := map[string]string{"AUTHSVC_PASSWORD_MIN_LENGTH": ""} // the default, 12
	if code, _, stderr := runCLI(t, "correct horse battery\n", policyEnv, "user", "add", "--users", path, "--cost", "4", "alice"); code != 0 {
		t.Fatalf("user add alice with a good password = exit %d, %s", code, stderr)
	}
	before, _ := os.ReadFile(path)
	for _, tt := range []struct {
		args     []string
		password string
		rule     string
	}{
		{[]string{"user", "add", "bob"}, "short-pw", "shorter than 12 characters"},
		{[]string{"user", "add", "bob"}, "Password1234", "common passwords"},
		{[]string{"user", "add", "bobbybobbybob"}, "BobbyBobbyBob", "same as the username"},
		{[]string{"user", "passwd", "alice"}, "qwertyuiop123", "common passwords"},
		{[]string{"user", "passwd", "alice"}, "elevenchars", "shorter than 12"},
	} {
		args := append(tt.args, "--users", path, "--cost", "4")
		code, _, stderr := runCLI(t, tt.password+"\n", policyEnv, args...)
		if code != 1 || !strings.Contains(stderr, tt.rule) || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, tt.password) {
			t.Errorf("authsvc %s with %q = exit %d, stderr %q; want exit 1, one line naming %q, not the password", strings.Join(tt.args, " "), tt.password, code, stderr, tt.rule)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Errorf("authsvc %s with a refused password changed the users file", strings.Join(tt.args, " "))
		}
	}
	// The environment sets the minimum, as it does for serve; the flag wins.
	if code, _, stderr := runCLI(t, "tiny-ok\n", map[string]string{"AUTHSVC_PASSWORD_MIN_LENGTH": "6"}, "user", "add", "--users", path, "--cost", "4", "carol"); code != 0 {
		t.Errorf("user add with AUTHSVC_PASSWORD_MIN_LENGTH=6 and 7 characters = exit %d, %s; want 0", code, stderr)
	}
	if code, _, stderr := runCLI(t, "tiny-ok\n", map[string]string{"AUTHSVC_PASSWORD_MIN_LENGTH": "6"}, "user", "add", "--users", path, "--cost", "4", "--password-min-length", "8", "dave"); code != 1 || !strings.Contains(stderr, "shorter than 8") {
		t.Errorf("user add --password-min-length 8 with 7 characters = exit %d, %q; want exit 1, shorter than 8", code, stderr)
	}
	for _, bad := range []string{"0", "1025"} {
		code, _, stderr := runCLI(t, "long-enough-pw\n", nil, "user", "passwd", "--users", path, "--cost", "4", "--password-min-length", bad, "carol")
		if code != 2 || !strings.Contains(stderr, "--password-min-length "+bad) {
			t.Errorf("user passwd --password-min-length %s = exit %d, %q; want exit 2 naming the flag", bad, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "long-enough-pw\n", map[string]string{"AUTHSVC_PASSWORD_MIN_LENGTH": "twelve"}, "user", "passwd", "--users", path, "--cost", "4", "carol"); code != 2 || !strings.Contains(stderr, "AUTHSVC_PASSWORD_MIN_LENGTH") {
		t.Errorf("AUTHSVC_PASSWORD_MIN_LENGTH=twelve user passwd = exit %d, %q; want exit 2 naming the variable", code, stderr)
	}
}

// TestCLIHashPolicy: argon2id by default, bcrypt with --hash bcrypt or
// --cost alone, and --hash argon2id --cost is a usage error.
func TestCLIHashPolicy(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		flags  []string
		scheme string
		cost   int
	}{
		{nil, password.SchemeArgon2id, 0},
		{[]string{"--cost", "5"}, password.SchemeBcrypt, 5},
		{[]string{"--hash", "bcrypt", "--cost", "4"}, password.SchemeBcrypt, 4},
		{[]string{"--hash", "argon2id"}, password.SchemeArgon2id, 0},
	} {
		code, stdout, stderr := runCLI(t, "a fine long password\n", nil, append([]string{"hash"}, tt.flags...)...)
		if code != 0 {
			t.Errorf("hash %v = exit %d, %s", tt.flags, code, stderr)
			continue
		}
		h, err := password.ParseHash(strings.TrimSpace(stdout))
		if err != nil || h.Scheme() != tt.scheme || h.Cost != tt.cost {
			t.Errorf("hash %v = %q, %v; want %s (cost %d)", tt.flags, stdout, err, tt.scheme, tt.cost)
			continue
		}
		if tt.scheme == password.SchemeArgon2id && (h.MemoryKiB != 19*1024 || h.Time != 2 || h.Threads != 1) {
			t.Errorf("hash %v = m=%d t=%d p=%d; want OWASP's m=19456 t=2 p=1", tt.flags, h.MemoryKiB, h.Time, h.Threads)
		}
		if !h.Verify([]byte("a fine long password")) {
			t.Errorf("hash %v does not verify its password", tt.flags)
		}
	}
	for _, flags := range [][]string{{"--hash", "argon2id", "--cost", "12"}, {"--hash", "md5"}, {"--cost", "3"}} {
		if code, _, stderr := runCLI(t, "a fine long password\n", nil, append([]string{"hash"}, flags...)...); code != 2 {
			t.Errorf("hash %v = exit %d, %s; want 2, a usage error", flags, code, stderr)
		}
	}
	// Under bcrypt, a password over 72 bytes is refused.
	if code, _, stderr := runCLI(t, strings.Repeat("x", 73)+"\n", nil, "hash", "--hash", "bcrypt", "--cost", "4"); code != 1 || !strings.Contains(stderr, "72") {
		t.Errorf("hash --hash bcrypt of 73 bytes = exit %d, %s; want 1 naming bcrypt's 72 bytes", code, stderr)
	}
}

// TestServeHashFlags: serve takes the same rules, from flags or variables.
func TestServeHashFlags(t *testing.T) {
	t.Parallel()
	noenv := func(string) string { return "" }
	for _, tt := range []struct {
		args   []string
		scheme string
		cost   int
	}{
		{nil, password.SchemeArgon2id, 12},
		{[]string{"--cost", "11"}, password.SchemeBcrypt, 11},
		{[]string{"--hash", "bcrypt"}, password.SchemeBcrypt, 12},
	} {
		c, err := parseServeFlags(tt.args, noenv, nil)
		if err != nil || c.hashPolicy.Scheme != tt.scheme || c.hashPolicy.BcryptCost != tt.cost {
			t.Errorf("parseServeFlags(%v).hashPolicy = %+v, %v; want %s, cost %d", tt.args, c.hashPolicy, err, tt.scheme, tt.cost)
		}
	}
	env := func(k string) string { return map[string]string{"AUTHSVC_HASH": "argon2id", "AUTHSVC_COST": "10"}[k] }
	if _, err := parseServeFlags(nil, env, nil); err == nil {
		t.Errorf("AUTHSVC_HASH=argon2id AUTHSVC_COST=10: no error; want a usage error")
	}
}
