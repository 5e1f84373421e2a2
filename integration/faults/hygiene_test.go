package faults

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// nobody is the uid and gid the ownership tests give the users file: the
// server's account, not the CLI's.
const nobody = 65534

// TestCLIKeepsOwner: root editing the server's users file must leave it the
// server's, or the server can no longer read it.
func TestCLIKeepsOwner(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	harness.AddUser(t, path, "alice", "pw")

	// The trivial case, for any user: the file stays the editor's.
	uid, gid := harness.Owner(t, path)
	harness.AddUser(t, path, "bob", "pw")
	if u, g := harness.Owner(t, path); u != uid || g != gid {
		t.Errorf("owner of %s after user add = %d:%d; want %d:%d as before", path, u, g, uid, gid)
	}

	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give the users file to another owner to see that user add keeps it")
	}
	for _, p := range []string{path, path + ".lock"} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	harness.AddUser(t, path, "carol", "pw")
	if u, g := harness.Owner(t, path); u != nobody || g != nobody {
		t.Errorf("owner of %s after root's user add = %d:%d; want %d:%d as before", path, u, g, nobody, nobody)
	}
	servertest.CheckMode(t, path, 0o600)
	if users := harness.MustReadUsers(t, path); len(users) != 3 {
		t.Errorf("users after user add carol = %+v; want alice, bob and carol", users)
	}

	// A lock file root created (or an older CLI left root's) is given the
	// users file's owner, so that the server can take the lock too.
	if err := os.Chown(path+".lock", 0, 0); err != nil {
		t.Fatal(err)
	}
	harness.MustRunCLI(t, "", "user", "disable", "--users", path, "carol")
	for _, p := range []string{path, path + ".lock"} {
		if u, g := harness.Owner(t, p); u != nobody || g != nobody {
			t.Errorf("owner of %s after root's user disable = %d:%d; want %d:%d", p, u, g, nobody, nobody)
		}
	}
}

// TestCLIRefusesOwnerChange: a user add that cannot give the new file the
// old one's owner writes nothing. Only root can set up a file another user
// edits but does not own, so it runs the CLI as nobody.
func TestCLIRefusesOwnerChange(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot run the CLI as another user")
	}
	harness.RequireBinary(t)
	// t.TempDir's parents are 0700; nobody must reach this one.
	dir, err := os.MkdirTemp("", "authsvc-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	// A copy of the binary, where nobody can run it.
	bin := filepath.Join(dir, "authsvc")
	data, err := os.ReadFile(harness.Binary())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		lock bool // a lock file nobody may use exists
		want string
	}{
		{"new lock file", false, "cannot give users.json.lock the owner 0:0"},
		{"temporary file", true, "the owner 0:0 of " + dir},
	} {
		path := filepath.Join(dir, "users.json")
		os.Remove(path)
		os.Remove(path + ".lock")
		harness.AddUser(t, path, "alice", "pw")
		// Readable by nobody, but root's.
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if tt.lock {
			if err := os.Chmod(path+".lock", 0o666); err != nil {
				t.Fatal(err)
			}
		} else if err := os.Remove(path + ".lock"); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(path)

		cmd := exec.Command(bin, "user", "add", "--users", path, "--cost", "4", "bob")
		cmd.Env = []string{}
		cmd.Stdin = strings.NewReader("long-enough-pw\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		err := cmd.Run()
		msg := harness.WithoutWarning(stderr.String())
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(msg, tt.want) || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "authsvc: ") {
			t.Errorf("%s: nobody's user add bob on root's file = %v (exit %d), stderr %q; want exit 1, one line containing %q", tt.name, err, code, msg, tt.want)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
			t.Errorf("%s: refused user add changed the users file", tt.name)
		}
		if u, g := harness.Owner(t, path); u != 0 || g != 0 {
			t.Errorf("%s: owner of %s after the refused user add = %d:%d; want 0:0", tt.name, path, u, g)
		}
		for _, name := range servertest.DirNames(t, dir) {
			if strings.HasSuffix(name, ".tmp") {
				t.Errorf("%s: temporary file %s left behind", tt.name, name)
			}
		}
	}
}

// TestHashCostMaximum: a hash too costly to check is refused at load, naming
// the entry, and the CLI makes none.
func TestHashCostMaximum(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	for _, cost := range []string{"15", "31"} {
		doc := servertest.UsersJSON(servertest.OKAlice, servertest.Entry("bob", servertest.HashField("$2a$"+cost+passwordtest.Hash[6:])))
		want := `users[1] ("bob"): password_hash: bcrypt cost ` + cost + ` is above the maximum 14`
		if _, err := usersfile.Parse([]byte(doc)); err == nil || err.Error() != want {
			t.Errorf("usersfile.Parse(bob at cost %s) = %v; want %q", cost, err, want)
		}
	}
	// The maximum itself is accepted.
	doc := servertest.UsersJSON(servertest.OKAlice, servertest.Entry("bob", servertest.HashField("$2a$14"+passwordtest.Hash[6:])))
	if _, err := usersfile.Parse([]byte(doc)); err != nil {
		t.Errorf("usersfile.Parse(bob at cost 14) = %v; want nil", err)
	}

	path := filepath.Join(t.TempDir(), "users.json")
	harness.AddUser(t, path, "alice", "pw")
	before, _ := os.ReadFile(path)
	for _, args := range [][]string{
		{"user", "add", "--users", path, "--cost", "15", "bob"},
		{"user", "passwd", "--users", path, "--cost", "15", "alice"},
		{"hash", "--cost", "15"},
		{"serve", "--users", path, "--cost", "15"},
	} {
		code, stdout, stderr := harness.RunCLI(t, "pw\n", nil, args...)
		cmd := args[0]
		if cmd == "user" {
			cmd += " " + args[1]
		}
		if want := "authsvc: " + cmd + ": --cost 15: want 4 to 14\n"; code != 2 || stderr != want || stdout != "" {
			t.Errorf("authsvc %s = exit %d, stdout %q, stderr %q; want exit 2, stderr %q", strings.Join(args, " "), code, stdout, stderr, want)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("refused --cost 15 changed the users file")
	}
}

// TestCLIUserListEscapes: a hand-edited users file must not be able to run
// terminal escapes or forge rows in user list.
func TestCLIUserListEscapes(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	list := []users.User{
		{Username: "alice", PasswordHash: passwordtest.Hash, Name: "\x1b[31mAlice\x1b[0m", Email: "a@example.com\nmallory  yes    no", Groups: []string{"dev\tops", "qa\r"}},
		{Username: "bob", PasswordHash: passwordtest.Hash, Name: "Bob\x1b[2J", Email: "\u009b31m", Groups: []string{"\u202eevil"}},
	}
	if err := usersfile.Write(path, list); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := harness.RunCLI(t, "", nil, "user", "list", "--users", path)
	if code != 0 || stderr != "" {
		t.Fatalf("user list = exit %d, stderr %q; want 0, nothing", code, stderr)
	}
	var raw []string
	for _, r := range stdout {
		if r != '\n' && !unicode.IsPrint(r) {
			raw = append(raw, fmt.Sprintf("%U", r))
		}
	}
	if raw != nil {
		t.Errorf("user list printed %s raw; want them escaped:\n%q", strings.Join(raw, " "), stdout)
	}
	if n := strings.Count(stdout, "\n"); n != 1+len(list) {
		t.Errorf("user list printed %d lines; want %d, the header and one per user:\n%q", n, 1+len(list), stdout)
	}
	for _, want := range []string{`\x1b[31mAlice\x1b[0m`, `a@example.com\x0amallory`, `dev\x09ops,qa\x0d`, `Bob\x1b[2J`, `\u009b31m`, `\u202eevil`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("user list output lacks %s:\n%q", want, stdout)
		}
	}
}

// TestCLIUserAddProfileLimits: --name, --email and --group take printable
// UTF-8 of a sane length; anything else is a usage error that writes nothing.
func TestCLIUserAddProfileLimits(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	groups := func(n int) []string {
		var args []string
		for i := range n {
			args = append(args, "--group", fmt.Sprintf("g%d", i))
		}
		return args
	}
	for _, tt := range []struct {
		flags []string
		ok    bool
		want  string // in stderr when refused
	}{
		{[]string{"--name", strings.Repeat("é", 150)}, true, ""},
		{[]string{"--email", strings.Repeat("e", 254)}, true, ""},
		{[]string{"--group", strings.Repeat("ü", 150)}, true, ""},
		{groups(100), true, ""},
		{[]string{"--name", "Zoë 日本 O'Brien-Smith"}, true, ""},

		{[]string{"--name", "Eve\nmallory  yes"}, false, "--name"},
		{[]string{"--name", "\x1b[2J"}, false, "--name"},
		{[]string{"--name", "\u009b2J"}, false, "--name"},
		{[]string{"--name", "bad\xffutf8"}, false, "--name"},
		{[]string{"--name", strings.Repeat("é", 151)}, false, "--name"},
		{[]string{"--name", strings.Repeat("x", 120_000)}, false, "--name"},
		{[]string{"--email", "eve@example.com\r"}, false, "--email"},
		{[]string{"--email", "\xfe@example.com"}, false, "--email"},
		{[]string{"--email", strings.Repeat("e", 255)}, false, "--email"},
		{[]string{"--email", strings.Repeat("é", 128)}, false, "--email"}, // 128 characters, 256 bytes
		{[]string{"--group", "dev", "--group", "ops\tadmin"}, false, "--group"},
		{[]string{"--group", "\xff"}, false, "--group"},
		{[]string{"--group", strings.Repeat("ü", 151)}, false, "--group"},
		{[]string{"--group", ""}, false, "--group"},
		{groups(101), false, "--group"},
	} {
		path := filepath.Join(t.TempDir(), "users.json")
		harness.AddUser(t, path, "alice", "pw")
		before, _ := os.ReadFile(path)
		args := append([]string{"user", "add", "--users", path, "--cost", "4", "bob"}, tt.flags...)
		code, stdout, stderr := harness.RunCLI(t, "pw\n", nil, args...)
		call := fmt.Sprintf("user add bob %.60q", strings.Join(tt.flags, " "))
		if tt.ok {
			if code != 0 {
				t.Errorf("%s = exit %d, stderr %q; want 0", call, code, stderr)
			}
			continue
		}
		msg := harness.WithoutWarning(stderr)
		if code != 2 || !strings.HasPrefix(msg, "authsvc: ") || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tt.want) || len(msg) > 200 {
			t.Errorf("%s = exit %d, stderr %.300q; want exit 2, one short line starting \"authsvc: \" naming %s", call, code, stderr, tt.want)
		}
		if stdout != "" {
			t.Errorf("%s: stdout %q; want nothing", call, stdout)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
			t.Errorf("%s was refused but changed the users file", call)
		}
	}
}

// TestCLIPasswordNotUTF8: a password no JSON login can send is refused.
func TestCLIPasswordNotUTF8(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	harness.AddUser(t, path, "alice", "pw")
	before, _ := os.ReadFile(path)
	for _, args := range [][]string{
		{"user", "add", "--users", path, "--cost", "4", "bob"},
		{"user", "passwd", "--users", path, "--cost", "4", "alice"},
		{"hash", "--cost", "4"},
	} {
		code, stdout, stderr := harness.RunCLI(t, "\xff\xfe-password\n", nil, args...)
		msg := harness.WithoutWarning(stderr)
		if code != 1 || stdout != "" || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "authsvc: ") || !strings.Contains(msg, "UTF-8") {
			t.Errorf("authsvc %s with a password not UTF-8 = exit %d, stdout %q, stderr %q; want exit 1, one line about UTF-8", strings.Join(args, " "), code, stdout, stderr)
		}
		if strings.Contains(stderr, "-password") {
			t.Errorf("authsvc %s: stderr %q shows the password", strings.Join(args, " "), stderr)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("refused passwords changed the users file")
	}
}

// TestCLILockSymlink: a symbolic link planted as the lock file is not
// followed, so it cannot make the CLI create or truncate another file.
func TestCLILockSymlink(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	harness.AddUser(t, path, "alice", "pw")
	before, _ := os.ReadFile(path)
	target := filepath.Join(dir, "elsewhere")
	if err := os.Remove(path + ".lock"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path+".lock"); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := harness.RunCLI(t, "pw\n", nil, "user", "add", "--users", path, "--cost", "4", "bob")
	msg := harness.WithoutWarning(stderr)
	if code != 1 || stdout != "" || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "authsvc: ") || !strings.Contains(msg, "symbolic link") {
		t.Errorf("user add with users.json.lock a symlink = exit %d, stdout %q, stderr %q; want exit 1, one line about the symbolic link", code, stdout, stderr)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("user add with users.json.lock a symlink to %s: lstat(target) = %v; want not exist", target, err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("user add with users.json.lock a symlink changed the users file")
	}
}

// TestCLIRemovesStaleTemp: the temporary files of a killed CLI are removed
// by the next edit, and nothing else is.
func TestCLIRemovesStaleTemp(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	harness.AddUser(t, path, "alice", "pw")
	stale := []string{".users.json.123456.tmp", ".users.json.4294967295.tmp"}
	// Other users files' temporary files (users.json.x is a users file too),
	// and files merely alike.
	kept := []string{".users.json.x.123.tmp", ".other.json.5.tmp", ".users.json..tmp", "users.json.7.tmp", ".users.json.7.tmp.bak", "notes.tmp"}
	for _, name := range append(stale, kept...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	harness.AddUser(t, path, "bob", "pw")
	for _, name := range stale {
		if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("stale %s after user add: lstat = %v; want not exist", name, err)
		}
	}
	for _, name := range kept {
		if _, err := os.Lstat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s after user add: lstat = %v; want it untouched", name, err)
		}
	}
	if users := harness.MustReadUsers(t, path); len(users) != 2 {
		t.Errorf("users after user add bob = %+v; want alice and bob", users)
	}
}

// TestUsersFieldNamesExact: encoding/json matches field names regardless of
// case, but the users file's names are exact: "ADMIN" is a typo or a trick,
// not admin.
func TestUsersFieldNamesExact(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	for _, tt := range []struct{ doc, want string }{
		{servertest.UsersJSON(servertest.Entry("alice", servertest.HashField(passwordtest.Hash), `"ADMIN": true`)), `users[0] ("alice"): unknown field "ADMIN"`},
		{servertest.UsersJSON(servertest.OKAlice, servertest.Entry("bob", servertest.HashField(passwordtest.Hash), `"Disabled": false`)), `users[1] ("bob"): unknown field "Disabled"`},
		{servertest.UsersJSON(servertest.Entry("alice", `"Password_Hash": "`+passwordtest.Hash+`"`)), `users[0] ("alice"): unknown field "Password_Hash"`},
		{servertest.UsersJSON(`{"UserName": "alice", ` + servertest.HashField(passwordtest.Hash) + `}`), `users[0] ("alice"): unknown field "UserName"`},
		// encoding/json folds U+017F (long s) to s as well.
		{servertest.UsersJSON(servertest.Entry("alice", servertest.HashField(passwordtest.Hash), `"di\u017fabled": true`)), `users[0] ("alice"): unknown field "diſabled"`},
		{servertest.UsersJSON(servertest.Entry("alice", servertest.HashField(passwordtest.Hash), `"admin": false`, `"admin": true`)), `users[0] ("alice"): duplicate field "admin"`},
		{`{"USERS": [` + servertest.OKAlice + `]}`, `not a users file: unknown field "USERS"`},
		{`{"users": [], "users": [` + servertest.OKAlice + `]}`, `not a users file: duplicate field "users"`},
	} {
		if users, err := usersfile.Parse([]byte(tt.doc)); err == nil || err.Error() != tt.want {
			t.Errorf("usersfile.Parse(%s) = %+v, %v; want %q", tt.doc, users, err, tt.want)
		}
	}
	// Escapes in a name are decoded first: this is "admin".
	if users, err := usersfile.Parse([]byte(servertest.UsersJSON(servertest.Entry("alice", servertest.HashField(passwordtest.Hash), `"\u0061dmin": true`)))); err != nil || !users[0].Admin {
		t.Errorf(`parseUsers("\u0061dmin": true) = %+v, %v; want alice an admin`, users, err)
	}

	path := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(path, []byte(servertest.UsersJSON(servertest.Entry("alice", servertest.HashField(passwordtest.Hash), `"ADMIN": true`))), 0o600); err != nil {
		t.Fatal(err)
	}
	want := path + `: users[0] ("alice"): unknown field "ADMIN"`
	if _, err := usersfile.Read(path); err == nil || err.Error() != want {
		t.Errorf("usersfile.Read(%q) = %v; want %q", path, err, want)
	}
	code, stdout, stderr := harness.RunCLI(t, "", nil, "user", "list", "--users", path)
	if code != 1 || stdout != "" || stderr != "authsvc: user list: "+want+"\n" {
		t.Errorf("user list of a file with \"ADMIN\" = exit %d, stdout %q, stderr %q; want exit 1, %q", code, stdout, stderr, want)
	}
}
