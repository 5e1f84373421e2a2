package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/secret"
	"authsvc/internal/servertest"
	"authsvc/internal/throttle"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"

	"golang.org/x/crypto/bcrypt"
)

var update = flag.Bool("update", false, "rewrite golden files")

// runCLI runs the program in-process with args (without the program name),
// stdin, and an environment of env alone; it returns the exit status and
// what was written to stdout and stderr. Unless env says otherwise,
// AUTHSVC_PASSWORD_MIN_LENGTH is 1, so that tests about other things may
// use short passwords (TestCLIPasswordPolicy tests the policy itself).
func runCLI(t *testing.T, stdin string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(key string) string {
		if v, ok := env[key]; ok || key != "AUTHSVC_PASSWORD_MIN_LENGTH" {
			return v
		}
		return "1"
	}
	err := Run(t.Context(), append([]string{"authsvc"}, args...), getenv, strings.NewReader(stdin), &out, &errOut)
	code = ExitStatus(err, &errOut)
	return code, out.String(), errOut.String()
}

// withoutWarning returns stderr without the low-cost warning that --cost 4 prints.
func withoutWarning(stderr string) string {
	var kept []string
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(line, "authsvc: warning: bcrypt cost ") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}

// mustRunCLI runs the program and fails t unless it succeeds.
func mustRunCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCLI(t, stdin, nil, args...)
	if code != 0 {
		t.Fatalf("authsvc %s = exit %d, stderr %q; want exit 0", strings.Join(args, " "), code, stderr)
	}
	return stdout
}

// addUser adds username with password to the users file at path.
func addUser(t *testing.T, path, username, password string, flags ...string) {
	t.Helper()
	mustRunCLI(t, password+"\n", append([]string{"user", "add", "--users", path, "--cost", "4", username}, flags...)...)
}

// mustReadUsers returns the users in the file at path, by name.
func mustReadUsers(t *testing.T, path string) map[string]users.User {
	t.Helper()
	list, err := usersfile.Read(path)
	if err != nil {
		t.Fatalf("usersfile.Read(%q) = %v", path, err)
	}
	m := make(map[string]users.User)
	for _, u := range list {
		m[u.Username] = u
	}
	return m
}

// checkPassword fails t unless hash is (or, with want false, is not) the hash of password.
func checkPassword(t *testing.T, hash, password string, want bool) {
	t.Helper()
	err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password))
	if (err == nil) != want {
		t.Errorf("bcrypt.CompareHashAndPassword(%q, %q) = %v; want match %v", hash, password, err, want)
	}
}

func TestCLIUserAdd(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	code, stdout, stderr := runCLI(t, "pw1\nsecond line\n", nil,
		"user", "add", "--users", path, "--cost", "4", "--name", "Alice Liddell", "--email", "alice@example.com",
		"--group", "dev", "--group", "ops", "--admin", "alice")
	if code != 0 {
		t.Fatalf("user add alice = exit %d, stderr %q; want 0", code, stderr)
	}
	if want := fmt.Sprintf("added user %q to %s\n", "alice", path); stdout != want {
		t.Errorf("user add alice: stdout = %q; want %q", stdout, want)
	}
	if !strings.Contains(stderr, "warning: bcrypt cost 4 is below 10") || withoutWarning(stderr) != "authsvc: created the users file "+path+"\n" {
		t.Errorf("user add --cost 4: stderr = %q; want the low-cost warning and the users file's creation", stderr)
	}
	servertest.CheckMode(t, path, 0o600)
	list := mustReadUsers(t, path)
	alice := list["alice"]
	want := users.User{Username: "alice", PasswordHash: alice.PasswordHash, Name: "Alice Liddell", Email: "alice@example.com", Groups: []string{"dev", "ops"}, Admin: true,
		TokensAfter: alice.TokensAfter}
	if time.Since(alice.TokensAfter) > time.Minute || time.Since(alice.TokensAfter) < 0 {
		t.Errorf("user add: tokens_after = %v; want the time of the add (no earlier token of an alice lives)", alice.TokensAfter)
	}
	if len(list) != 1 || !reflect.DeepEqual(alice, want) {
		t.Errorf("users after user add = %+v; want alice alone: %+v", list, want)
	}
	checkPassword(t, alice.PasswordHash, "pw1", true)
	checkPassword(t, alice.PasswordHash, "pw1\nsecond line", false)
	if cost, err := bcrypt.Cost([]byte(alice.PasswordHash)); cost != 4 || err != nil {
		t.Errorf("bcrypt.Cost(alice's hash) = %d, %v; want 4, nil", cost, err)
	}

	// A second user is appended, without groups: [] not null.
	addUser(t, path, "bob", "pw2")
	list = mustReadUsers(t, path)
	bob := list["bob"]
	if len(list) != 2 || bob.Admin || bob.Name != "" || bob.Groups == nil || len(bob.Groups) != 0 {
		t.Errorf("users after user add bob = %+v; want alice and a plain bob", list)
	}
	data, _ := os.ReadFile(path)
	if !bytes.Contains(data, []byte(`"groups": []`)) {
		t.Errorf("users file = %s; want bob's groups written as []", data)
	}
}

func TestCLIUserAddPassword(t *testing.T) {
	t.Parallel()
	p72 := strings.Repeat("x", 72)
	for _, tt := range []struct {
		stdin    string
		code     int
		password string // when code is 0
	}{
		{"pw1\nsecond line\n", 0, "pw1"},
		{"pw1\r\nsecond line\r\n", 0, "pw1"},
		{"pw1", 0, "pw1"},
		{"pw1\r", 0, "pw1"},
		{" spaced pw \n", 0, " spaced pw "},
		{"pässwörd\n", 0, "pässwörd"},
		{p72 + "\n", 0, p72},
		{"", 1, ""},
		{"\n", 1, ""},
		{"\r\n", 1, ""},
		{"\nsecond line\n", 1, ""},
		{p72 + "y\n", 1, ""},
		{strings.Repeat("z", 5000), 1, ""},
	} {
		path := filepath.Join(t.TempDir(), "users.json")
		code, _, stderr := runCLI(t, tt.stdin, nil, "user", "add", "--users", path, "--cost", "4", "alice")
		if code != tt.code {
			t.Errorf("user add with stdin %.40q = exit %d (stderr %q); want %d", tt.stdin, code, stderr, tt.code)
			continue
		}
		if code != 0 {
			if msg := withoutWarning(stderr); strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "password") {
				t.Errorf("user add with stdin %.40q: stderr %q; want one line about the password", tt.stdin, msg)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("user add with stdin %.40q refused, but stat(users file) = %v; want not exist", tt.stdin, err)
			}
			continue
		}
		checkPassword(t, mustReadUsers(t, path)["alice"].PasswordHash, tt.password, true)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string // "F" is the users file, which holds alice
		missing bool     // the users file does not exist
		code    int
		want    string // in stderr
	}{
		{args: []string{"user", "add", "--users", "F", "--cost", "4", "alice"}, code: 1, want: `user "alice" already exists`},
		{args: []string{"user", "add", "--users", "F", "--cost", "4", "bad name"}, code: 2, want: `username "bad name"`},
		{args: []string{"user", "add", "--users", "F", "--cost", "4", "bob/.."}, code: 2, want: `username "bob/.."`},
		{args: []string{"user", "add", "--users", "F", "--cost", "4", strings.Repeat("b", 151)}, code: 2, want: "username"},
		{args: []string{"user", "add", "--users", "F", "--cost", "4", ""}, code: 2, want: `username ""`},
		{args: []string{"user", "add", "--users", "F", "--cost", "4"}, code: 2, want: "want exactly one USERNAME"},
		{args: []string{"user", "add", "--users", "F", "--cost", "4", "bob", "carol"}, code: 2, want: "want exactly one USERNAME"},
		{args: []string{"user", "add", "--users", "F", "--cost", "4", "--bogus", "bob"}, code: 2, want: "flag provided but not defined: -bogus"},
		{args: []string{"user", "add", "--users", "F", "--cost", "4", "--admin=maybe", "bob"}, code: 2, want: "-admin"},
		{args: []string{"user", "add", "--users", "F", "--cost"}, code: 2, want: "flag needs an argument: -cost"},
		{args: []string{"user", "add", "--users", "F", "--cost", "three", "bob"}, code: 2, want: "-cost"},
		{args: []string{"user", "add", "--users", "F", "--cost", "3", "bob"}, code: 2, want: "--cost 3"},
		{args: []string{"user", "add", "--users", "F", "--cost", "32", "bob"}, code: 2, want: "--cost 32"},
		{args: []string{"user", "passwd", "--users", "F", "--cost", "3", "alice"}, code: 2, want: "--cost 3"},
		{args: []string{"user", "del", "--users", "F", "--cost", "4", "alice"}, code: 2, want: "flag provided but not defined: -cost"},
		{args: []string{"user", "list", "--users", "F", "alice"}, code: 2, want: `unexpected argument "alice"`},
		{args: []string{"user", "frob", "--users", "F"}, code: 2, want: `unknown subcommand "frob"`},
		{args: []string{"user"}, code: 2, want: "missing subcommand"},
		{args: []string{"frob"}, code: 2, want: `unknown command "frob"`},
		{args: []string{"serve", "--bogus"}, code: 2, want: "flag provided but not defined: -bogus"},
		{args: []string{"--bogus"}, code: 2, want: "flag provided but not defined: -bogus"},
		{args: []string{"hash", "--cost", "3"}, code: 2, want: "--cost 3"},
		{args: []string{"hash", "--cost", "4", "pw"}, code: 2, want: "unexpected argument"},
		{args: []string{"version", "--bogus"}, code: 2, want: "-bogus"},
		{args: []string{"version", "x"}, code: 2, want: `version: unexpected argument "x"`},
		{args: []string{"user", "passwd", "--users", "F", "--cost", "4", "zed"}, code: 1, want: `user passwd: no user "zed"`},
		{args: []string{"user", "del", "--users", "F", "zed"}, code: 1, want: `user del: no user "zed"`},
		{args: []string{"user", "disable", "--users", "F", "zed"}, code: 1, want: `user disable: no user "zed"`},
		{args: []string{"user", "enable", "--users", "F", "zed"}, code: 1, want: `user enable: no user "zed"`},
		{args: []string{"user", "passwd", "--users", "F", "--cost", "4", "alice"}, missing: true, code: 1, want: "users file does not exist"},
		{args: []string{"user", "del", "--users", "F", "alice"}, missing: true, code: 1, want: "users file does not exist"},
		{args: []string{"user", "disable", "--users", "F", "alice"}, missing: true, code: 1, want: "users file does not exist"},
		{args: []string{"user", "enable", "--users", "F", "alice"}, missing: true, code: 1, want: "users file does not exist"},
		{args: []string{"user", "list", "--users", "F"}, missing: true, code: 1, want: "no such file"},
	} {
		path := filepath.Join(t.TempDir(), "users.json")
		if !tt.missing {
			addUser(t, path, "alice", "pw")
		}
		before, _ := os.ReadFile(path)
		args := make([]string, len(tt.args))
		for i, a := range tt.args {
			if a == "F" {
				a = path
			}
			args[i] = a
		}
		code, stdout, stderr := runCLI(t, "pw\n", nil, args...)
		call := "authsvc " + strings.Join(tt.args, " ")
		msg := withoutWarning(stderr)
		if code != tt.code || !strings.Contains(msg, tt.want) {
			t.Errorf("%s = exit %d, stderr %q; want exit %d, stderr containing %q", call, code, stderr, tt.code, tt.want)
		}
		if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "authsvc: ") || strings.Contains(stderr, "usage") {
			t.Errorf("%s: stderr %q; want one line starting \"authsvc: \", no usage", call, stderr)
		}
		if stdout != "" {
			t.Errorf("%s: stdout %q; want nothing", call, stdout)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
			t.Errorf("%s failed, but changed the users file: %q; want %q", call, after, before)
		}
	}
}

// TestCLIHelp: every command's --help prints that command's usage and
// flags (testdata/cli/*.golden), exits 0 and writes nothing else.
func TestCLIHelp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args   string
		golden string
	}{
		{"--help", "help.golden"},
		{"-h", "help.golden"},
		{"help", "help.golden"},
		{"serve --help", "serve-help.golden"},
		{"--addr :0 --help", "serve-help.golden"},
		{"serve -h", "serve-help.golden"},
		{"user --help", "user-help.golden"},
		{"user help", "user-help.golden"},
		{"user add --help", "user-add-help.golden"},
		{"user add alice -h", "user-add-help.golden"},
		{"user edit --help", "user-edit-help.golden"},
		{"user edit alice -h", "user-edit-help.golden"},
		{"user passwd --help", "user-passwd-help.golden"},
		{"user del --help", "user-del-help.golden"},
		{"user disable --help", "user-disable-help.golden"},
		{"user enable --help", "user-enable-help.golden"},
		{"user logout --help", "user-logout-help.golden"},
		{"user unlock --help", "user-unlock-help.golden"},
		{"user reset-mfa --help", "user-reset-mfa-help.golden"},
		{"user reset-mfa ada -h", "user-reset-mfa-help.golden"},
		{"user list --help", "user-list-help.golden"},
		{"user import --help", "user-import-help.golden"},
		{"user check --help", "user-check-help.golden"},
		{"user rekey --help", "user-rekey-help.golden"},
		{"token --help", "token-help.golden"},
		{"token help", "token-help.golden"},
		{"token create --help", "token-create-help.golden"},
		{"token create alice -h", "token-create-help.golden"},
		{"token list --help", "token-list-help.golden"},
		{"token revoke --help", "token-revoke-help.golden"},
		{"hash --help", "hash-help.golden"},
		{"version --help", "version-help.golden"},
	} {
		code, stdout, stderr := runCLI(t, "", nil, strings.Fields(tt.args)...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: authsvc") {
			t.Errorf("authsvc %s = exit %d, stdout %.40q…, stderr %q; want exit 0, a usage, nothing on stderr", tt.args, code, stdout, stderr)
		}
		checkGolden(t, tt.golden, stdout)
	}
}

// TestREADMEHelp: every --help the README pastes (a console block whose
// first line is "$ authsvc … --help") is what the command prints today.
func TestREADMEHelp(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```console\n\\$ authsvc ([^\n]*--help)\n(.*?)```")
	blocks := block.FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md pastes no --help; the pattern is stale")
	}
	for _, m := range blocks {
		_, stdout, _ := runCLI(t, "", nil, strings.Fields(m[1])...)
		if stdout != m[2] {
			t.Errorf("README's 'authsvc %s' differs from the command's (paste its output):\ngot:\n%s\nREADME:\n%s", m[1], stdout, m[2])
		}
	}
}

func TestCLICost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cost    string
		warning bool
	}{
		{"4", true}, {"9", true}, {"10", false},
	} {
		path := filepath.Join(t.TempDir(), "users.json")
		code, _, stderr := runCLI(t, "pw\n", nil, "user", "add", "--users", path, "--cost", tt.cost, "alice")
		warned := strings.Contains(stderr, "authsvc: warning: bcrypt cost "+tt.cost+" is below 10")
		created := strings.Contains(stderr, "authsvc: created the users file "+path+"\n")
		if code != 0 || warned != tt.warning || !created || strings.Count(stderr, "\n") != btoi(tt.warning)+1 {
			t.Errorf("user add --cost %s = exit %d, stderr %q; want exit 0, warning %v", tt.cost, code, stderr, tt.warning)
			continue
		}
		hash := mustReadUsers(t, path)["alice"].PasswordHash
		if cost, _ := bcrypt.Cost([]byte(hash)); fmt.Sprint(cost) != tt.cost {
			t.Errorf("user add --cost %s: hash cost %d; want %s", tt.cost, cost, tt.cost)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestCLIFlagOrder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	for _, args := range [][]string{
		{"user", "add", "alice", "--admin", "--users", path, "--cost", "4"},
		{"user", "add", "--users", path, "bob", "--cost=4", "--admin"},
		{"user", "add", "--users", path, "--cost", "4", "--admin", "--", "-carol"},
	} {
		mustRunCLI(t, "pw\n", args...)
	}
	users := mustReadUsers(t, path)
	for _, name := range []string{"alice", "bob", "-carol"} {
		if u, ok := users[name]; !ok || !u.Admin {
			t.Errorf("after user add %s with --admin: user %+v (present %v); want an admin", name, u, ok)
		}
	}
	// After "--", --admin is an argument, not a flag.
	code, _, stderr := runCLI(t, "pw\n", nil, "user", "add", "--users", path, "--cost", "4", "--", "dave", "--admin")
	if code != 2 || !strings.Contains(stderr, "want exactly one USERNAME") {
		t.Errorf("user add -- dave --admin = exit %d, stderr %q; want 2, two arguments", code, stderr)
	}
}

func TestCLIUserPasswd(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "old", "--name", "Alice", "--group", "dev", "--admin")
	addUser(t, path, "bob", "bobpw")
	before := mustReadUsers(t, path)

	code, stdout, stderr := runCLI(t, "new\r\nignored\n", nil, "user", "passwd", "alice", "--users", path, "--cost", "5")
	if code != 0 {
		t.Fatalf("user passwd alice = exit %d, stderr %q; want 0", code, stderr)
	}
	if want := fmt.Sprintf("changed the password of user %q in %s\n", "alice", path); stdout != want {
		t.Errorf("user passwd alice: stdout = %q; want %q", stdout, want)
	}
	after := mustReadUsers(t, path)
	alice := after["alice"]
	checkPassword(t, alice.PasswordHash, "old", false)
	checkPassword(t, alice.PasswordHash, "new", true)
	if cost, _ := bcrypt.Cost([]byte(alice.PasswordHash)); cost != 5 {
		t.Errorf("hash cost after user passwd --cost 5 = %d; want 5", cost)
	}
	wantAlice := before["alice"]
	wantAlice.PasswordHash = alice.PasswordHash
	wantAlice.TokensAfter = alice.TokensAfter
	wantAlice.PasswordGeneration = before["alice"].PasswordGeneration + 1 // the sessions of the old password die
	if !alice.TokensAfter.After(before["alice"].TokensAfter) {
		t.Errorf("user passwd: tokens_after %v, before %v; want it moved on (every earlier token dies)", alice.TokensAfter, before["alice"].TokensAfter)
	}
	if !reflect.DeepEqual(alice, wantAlice) || !reflect.DeepEqual(after["bob"], before["bob"]) || len(after) != 2 {
		t.Errorf("users after user passwd alice = %+v; want only alice's hash, cut-off and password generation changed from %+v", after, before)
	}
	servertest.CheckMode(t, path, 0o600)

	// An empty new password is refused and changes nothing.
	code, _, stderr = runCLI(t, "\n", nil, "user", "passwd", "--users", path, "--cost", "4", "alice")
	if code != 1 || mustReadUsers(t, path)["alice"].PasswordHash != alice.PasswordHash {
		t.Errorf("user passwd alice with an empty password = exit %d, stderr %q; want 1 and no change", code, stderr)
	}
}

func TestCLIUserDel(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	addUser(t, path, "bob", "pw")
	stdout := mustRunCLI(t, "", "user", "del", "--users", path, "alice")
	if want := fmt.Sprintf("deleted user %q from %s\n", "alice", path); stdout != want {
		t.Errorf("user del alice: stdout = %q; want %q", stdout, want)
	}
	list := mustReadUsers(t, path)
	if _, ok := list["alice"]; ok || len(list) != 1 {
		t.Errorf("users after user del alice = %+v; want bob alone", list)
	}
	code, _, stderr := runCLI(t, "", nil, "user", "del", "--users", path, "alice")
	if code != 1 || !strings.Contains(stderr, `no user "alice"`) {
		t.Errorf("second user del alice = exit %d, stderr %q; want 1, no user \"alice\"", code, stderr)
	}
	mustRunCLI(t, "", "user", "del", "--users", path, "bob")
	if list, err := usersfile.Read(path); err != nil || len(list) != 0 {
		t.Errorf("users after deleting everyone = %+v, %v; want none", list, err)
	}
	servertest.CheckMode(t, path, 0o600)
}

func TestCLIUserDisableEnable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	addUser(t, path, "bob", "pw")
	for _, step := range []struct {
		sub, done string
		disabled  bool
	}{
		{"disable", "disabled", true},
		{"disable", "disabled", true}, // idempotent
		{"enable", "enabled", false},
		{"enable", "enabled", false},
		{"disable", "disabled", true},
	} {
		stdout := mustRunCLI(t, "", "user", step.sub, "alice", "--users", path)
		if want := fmt.Sprintf("%s user %q in %s\n", step.done, "alice", path); stdout != want {
			t.Errorf("user %s alice: stdout = %q; want %q", step.sub, stdout, want)
		}
		users := mustReadUsers(t, path)
		if users["alice"].Disabled != step.disabled || users["bob"].Disabled {
			t.Errorf("after user %s alice: alice disabled %v, bob disabled %v; want %v, false", step.sub, users["alice"].Disabled, users["bob"].Disabled, step.disabled)
		}
		checkPassword(t, users["alice"].PasswordHash, "pw", true)
	}
}

func TestCLIUsersEnv(t *testing.T) {
	// Not parallel: it changes the working directory (t.Chdir).
	dir := t.TempDir()
	envPath, flagPath := filepath.Join(dir, "env.json"), filepath.Join(dir, "flag.json")
	env := map[string]string{"AUTHSVC_USERS": envPath}

	if code, _, stderr := runCLI(t, "pw\n", env, "user", "add", "--cost", "4", "alice"); code != 0 {
		t.Fatalf("AUTHSVC_USERS=%s user add alice = exit %d, stderr %q", envPath, code, stderr)
	}
	if _, ok := mustReadUsers(t, envPath)["alice"]; !ok {
		t.Errorf("AUTHSVC_USERS=%s user add alice: alice not in %s", envPath, envPath)
	}
	if code, _, stderr := runCLI(t, "pw\n", env, "user", "add", "--cost", "4", "--users", flagPath, "bob"); code != 0 {
		t.Fatalf("AUTHSVC_USERS=%s user add --users %s bob = exit %d, stderr %q", envPath, flagPath, code, stderr)
	}
	if users := mustReadUsers(t, flagPath); len(users) != 1 {
		t.Errorf("user add --users %s bob: %s holds %+v; want bob alone", flagPath, flagPath, users)
	}
	if _, ok := mustReadUsers(t, envPath)["bob"]; ok {
		t.Errorf("user add --users %s bob also wrote %s", flagPath, envPath)
	}
	code, stdout, _ := runCLI(t, "", env, "user", "list")
	if code != 0 || !strings.Contains(stdout, "alice") || strings.Contains(stdout, "bob") {
		t.Errorf("AUTHSVC_USERS=%s user list = exit %d, %q; want alice's file", envPath, code, stdout)
	}
	for _, sub := range []string{"disable", "enable", "del"} {
		if code, _, stderr := runCLI(t, "", env, "user", sub, "alice"); code != 0 {
			t.Errorf("AUTHSVC_USERS=%s user %s alice = exit %d, stderr %q; want 0", envPath, sub, code, stderr)
		}
	}
	if users := mustReadUsers(t, envPath); len(users) != 0 {
		t.Errorf("%s after user del alice = %+v; want empty", envPath, users)
	}

	// Neither: users.json in the working directory.
	t.Chdir(dir)
	if code, _, stderr := runCLI(t, "pw\n", nil, "user", "add", "--cost", "4", "carol"); code != 0 {
		t.Fatalf("user add carol = exit %d, stderr %q", code, stderr)
	}
	if _, ok := mustReadUsers(t, filepath.Join(dir, "users.json"))["carol"]; !ok {
		t.Errorf("user add carol without --users or AUTHSVC_USERS: carol not in ./users.json")
	}
}

func TestCLIUserList(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw", "--name", "Alice Liddell", "--email", "alice@example.com", "--group", "dev", "--group", "ops", "--admin")
	addUser(t, path, "bob", "pw")
	addUser(t, path, "carol.long-name+tag@example.com", "pw", "--name", "Carol", "--group", "qa")
	mustRunCLI(t, "", "user", "disable", "--users", path, "bob")
	addUser(t, path, "dan", "pw")
	// MFA: alice has both factors, bob an enrolment alone (no second
	// factor), carol recovery codes alone (a django-otp static device),
	// dan an authenticator alone.
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		username      string
		totp, pending bool
		recoveryCodes int
	}{{"alice", true, false, 10}, {"bob", false, true, 0}, {"carol.long-name+tag@example.com", false, false, 3}, {"dan", true, true, 0}} {
		var sec, pending []byte
		if f.totp {
			sec = mustSecret(t)
		}
		if f.pending {
			pending = mustSecret(t)
		}
		factors, _ := testFactors(t, key, f.username, sec, pending, f.recoveryCodes)
		setFactors(t, path, f.username, factors)
	}

	code, stdout, stderr := runCLI(t, "", nil, "user", "list", "--users", path)
	if code != 0 || stderr != "" {
		t.Fatalf("user list = exit %d, stderr %q; want 0, nothing", code, stderr)
	}
	if strings.Contains(stdout, "$2") {
		t.Errorf("user list printed a hash:\n%s", stdout)
	}
	checkGolden(t, "list.golden", stdout)

	// An empty file lists the header alone.
	for _, u := range []string{"alice", "bob", "carol.long-name+tag@example.com", "dan"} {
		mustRunCLI(t, "", "user", "del", "--users", path, u)
	}
	stdout = mustRunCLI(t, "", "user", "list", "--users", path)
	if want := "USERNAME  ADMIN  DISABLED  MFA  TOKENS  NAME  EMAIL  GROUPS\n"; stdout != want {
		t.Errorf("user list of an empty file = %q; want %q", stdout, want)
	}

	// A broken file is an error naming it.
	if err := os.WriteFile(path, []byte(`{"users": [}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "", nil, "user", "list", "--users", path)
	if code != 1 || !strings.Contains(stderr, path+": not a users file") {
		t.Errorf("user list of a broken file = exit %d, stderr %q; want 1 naming the file", code, stderr)
	}
}

// checkGolden compares got with testdata/cli/name, or rewrites the file under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "cli", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestCLIHash(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "s3cret\nnot this\n", nil, "hash", "--cost", "4")
	if code != 0 {
		t.Fatalf("hash --cost 4 = exit %d, stderr %q; want 0", code, stderr)
	}
	hash, ok := strings.CutSuffix(stdout, "\n")
	if !ok || strings.Contains(hash, "\n") {
		t.Fatalf("hash --cost 4: stdout %q; want one line", stdout)
	}
	checkPassword(t, hash, "s3cret", true)
	if h, err := password.ParseHash(hash); err != nil || h.Scheme() != password.SchemeBcrypt || h.Cost != 4 {
		t.Errorf("password.ParseHash(%q) = %v, %v; want bcrypt at cost 4", hash, h, err)
	}
	code, stdout, stderr = runCLI(t, "", nil, "hash", "--cost", "4")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "empty password refused") {
		t.Errorf("hash with empty stdin = exit %d, stdout %q, stderr %q; want 1, nothing, empty password refused", code, stdout, stderr)
	}
}

func TestCLIVersion(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runCLI(t, "", nil, "version")
	if code != 0 || !strings.HasPrefix(stdout, "authsvc ") || strings.Count(stdout, "\n") != 1 || !strings.HasSuffix(stdout, "\n") || stderr != "" {
		t.Errorf("version = exit %d, stdout %q, stderr %q; want exit 0 and one line starting \"authsvc \"", code, stdout, stderr)
	}
}

// TestHelpNamesEveryStore (issue 28, point 9): serve --help and user
// import --help name every --store form that works, and each form they
// name opens a store (openStore, which connects to nothing yet).
func TestHelpNamesEveryStore(t *testing.T) {
	t.Parallel()
	forms := map[string]string{ // the form → a URL of it
		"memory":             "memory",
		"redis://":           "redis://127.0.0.1:1/0",
		"rediss://":          "rediss://127.0.0.1:1/0",
		"redis+sentinel://":  "redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster",
		"rediss+sentinel://": "rediss+sentinel://127.0.0.1:1/mymaster/0",
		"redis+cluster://":   "redis+cluster://127.0.0.1:1,127.0.0.1:2",
		"rediss+cluster://":  "rediss+cluster://127.0.0.1:1",
	}
	for form, url := range forms {
		_, _, closeStore, err := openStore("test", url, "", throttle.DefaultConfig())
		if err != nil {
			t.Errorf("openStore(%s) = %v; want a store of the form %s", url, err, form)
			continue
		}
		closeStore()
	}
	for _, cmd := range []string{"serve --help", "user import --help"} {
		_, stdout, _ := runCLI(t, "", nil, strings.Fields(cmd)...)
		var store string
		for _, line := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--store ") {
				store = line
			}
		}
		for form := range forms {
			if !strings.Contains(store, " "+form) && !strings.Contains(store, "("+form) {
				t.Errorf("authsvc %s: --store line %q does not name %s", cmd, store, form)
			}
		}
	}
}

// TestCLIMessages: the messages a newcomer met say what was wrong and what
// is wanted, and every command's errors have one form, "authsvc: COMMAND:
// message" (COMMAND as typed: serve, hash, user add, …).
func TestCLIMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	addUser(t, path, "alice", "pw")
	missing := filepath.Join(dir, "nonexistent")
	type call struct {
		args  []string
		env   map[string]string
		stdin string
		want  string // the whole of stderr when it ends in a newline, else in stderr
	}
	calls := []call{
		{args: []string{"serve", "--token-ttl", "forever"},
			want: "authsvc: serve: invalid value \"forever\" for --token-ttl: want a duration such as 24h, 90m or 1.5s (0 = never expires)\n"},
		{args: []string{"--token-ttl", "forever"},
			want: "authsvc: serve: invalid value \"forever\" for --token-ttl: want a duration such as 24h, 90m or 1.5s (0 = never expires)\n"},
		{args: []string{"serve"}, env: map[string]string{"AUTHSVC_TOKEN_TTL": "forever"},
			want: "authsvc: serve: invalid value \"forever\" for AUTHSVC_TOKEN_TTL: want a duration such as 24h, 90m or 1.5s (0 = never expires)\n"},
		{args: []string{"serve", "--bcrypt-wait", "soon"},
			want: "authsvc: serve: invalid value \"soon\" for --bcrypt-wait: want a duration such as 24h, 90m or 1.5s\n"},
		{args: []string{"user", "import", "--users", path, "--from", "django", "--token-ttl", "forever", "dump.json"},
			want: "authsvc: user import: invalid value \"forever\" for --token-ttl: want a duration such as 24h, 90m or 1.5s (0 = never)\n"},
		{args: []string{"user", "import", "--users", path, "dump.json"},
			want: "authsvc: user import: --from is missing: want --from django (a Django dumpdata file) or --from file (a users file)\n"},
		{args: []string{"user", "import", "--users", path, "--from", "csv", "dump.json"},
			want: "authsvc: user import: --from \"csv\": want --from django (a Django dumpdata file) or --from file (a users file)\n"},
		{args: []string{"user", "add", "--users", path, "--cost", "99", "bob"}, stdin: "pw\n", want: "authsvc: user add: --cost 99: want 4 to 14\n"},
		{args: []string{"hash", "--cost", "99"}, stdin: "pw\n", want: "authsvc: hash: --cost 99: want 4 to 14\n"},
		{args: []string{"user", "add", "--users", path, "bob"}, env: map[string]string{"AUTHSVC_PASSWORD_MIN_LENGTH": "x"}, stdin: "pw\n",
			want: "authsvc: user add: invalid value \"x\" for AUTHSVC_PASSWORD_MIN_LENGTH: "},
		{args: []string{"user", "list", "--users", filepath.Join(missing, "users.json")}, want: "authsvc: user list: "},
		{args: []string{"user", "passwd", "--users", path, "alice"}, stdin: "\n", want: "authsvc: user passwd: "},
		{args: []string{"user", "import", "--users", path, "--from", "django", filepath.Join(missing, "dump.json")}, want: "authsvc: user import: "},
		{args: []string{"user", "bogus"}, want: "authsvc: user: unknown subcommand"},
		{args: []string{"version", "--bogus"}, want: "authsvc: version: "},
	}
	for _, s := range serveSettings() {
		if _, ok := s.def.(time.Duration); ok {
			calls = append(calls, call{args: []string{"serve", "--" + s.name, "forever"},
				want: "authsvc: serve: invalid value \"forever\" for --" + s.name + ": want a duration such as 24h, 90m or 1.5s"})
		}
	}
	form := regexp.MustCompile(`^authsvc: (serve|hash|version|user|user [a-z-]+): \S`)
	for _, tt := range calls {
		code, stdout, stderr := runCLI(t, tt.stdin, tt.env, tt.args...)
		c := fmt.Sprintf("authsvc %s (env %v)", strings.Join(tt.args, " "), tt.env)
		switch {
		case code == 0 || stdout != "":
			t.Errorf("%s = exit %d, stdout %q; want a failure, nothing on stdout", c, code, stdout)
		case strings.HasSuffix(tt.want, "\n") && stderr != tt.want:
			t.Errorf("%s: stderr = %q; want %q", c, stderr, tt.want)
		case !strings.Contains(stderr, tt.want):
			t.Errorf("%s: stderr = %q; want it to contain %q", c, stderr, tt.want)
		}
		if !form.MatchString(stderr) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: stderr = %q; want one line \"authsvc: COMMAND: message\"", c, stderr)
		}
	}
}
