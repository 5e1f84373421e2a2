package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"authsvc/internal/users"
)

// TestCLIUserEdit: user edit changes what a flag is given for and keeps
// the rest; --group replaces the groups, --no-groups empties them, and
// --admin=false demotes, ending the admin-scoped personal access tokens.
func TestCLIUserEdit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "alice-pw", "--name", "Alice", "--email", "alice@example.com", "--group", "dev", "--group", "ops", "--admin")
	addUser(t, path, "bob", "bob-pw", "--name", "Bob")
	_, adminID := createToken(t, path, nil, "--name", "ops", "--scope", "admin", "alice")
	_, infoID := createToken(t, path, nil, "--name", "ci", "--scope", "info", "alice")
	bobBefore := mustReadUsers(t, path)["bob"]

	want := mustReadUsers(t, path)["alice"]
	for _, step := range []struct {
		args   []string
		change func(u *users.User)
	}{
		{[]string{"--name", "Alice Liddell"}, func(u *users.User) { u.Name = "Alice Liddell" }},
		{[]string{"--email", "", "--group", "qa", "--group", "x"}, func(u *users.User) { u.Email, u.Groups = "", []string{"qa", "x"} }},
		{[]string{"--no-groups"}, func(u *users.User) { u.Groups = []string{} }},
		{[]string{"--admin=true"}, func(*users.User) {}}, // an admin already: nothing ends
		{[]string{"--admin=false", "--name", "A."}, func(u *users.User) {
			u.Admin, u.Name = false, "A."
			u.AccessTokens = []users.AccessToken{storedToken(t, path, "alice", infoID)}
		}},
		{[]string{"--admin"}, func(u *users.User) { u.Admin = true }},
	} {
		code, stdout, stderr := runCLI(t, "", nil, append([]string{"user", "edit", "--users", path, "alice"}, step.args...)...)
		if wantOut := fmt.Sprintf("edited user %q in %s\n", "alice", path); code != 0 || stdout != wantOut || stderr != "" {
			t.Fatalf("user edit alice %q = exit %d, stdout %q, stderr %q; want 0, %q, nothing", step.args, code, stdout, stderr, wantOut)
		}
		step.change(&want)
		if got := mustReadUsers(t, path)["alice"]; !reflect.DeepEqual(got, want) {
			t.Errorf("alice after user edit %q = %+v; want %+v", step.args, got, want)
		}
	}
	for _, tok := range mustReadUsers(t, path)["alice"].AccessTokens {
		if tok.ID == adminID {
			t.Errorf("alice's admin-scoped token %s lived through --admin=false; want it ended", adminID)
		}
	}
	if bob := mustReadUsers(t, path)["bob"]; !reflect.DeepEqual(bob, bobBefore) {
		t.Errorf("bob after alice's edits = %+v; want him as he was: %+v", bob, bobBefore)
	}
}

// TestCLIUserEditRefusals: an unknown user is exit 1, and no flag, a bad
// profile or flags that contradict each other exit 2; each is one line,
// and none touches the users file.
func TestCLIUserEditRefusals(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "alice-pw", "--group", "dev")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--name", "Zed", "zed"}, 1, `user edit: no user "zed"`},
		{[]string{"alice"}, 2, "user edit: nothing to change"},
		{[]string{"--no-groups=false", "alice"}, 2, "user edit: nothing to change"},
		{[]string{"--name", "a\x1b[2Jb", "alice"}, 2, "user edit: --name"},
		{[]string{"--email", strings.Repeat("e", 255), "alice"}, 2, "user edit: --email"},
		{[]string{"--group", "qa", "--group", "", "alice"}, 2, "user edit: --group number 2"},
		{[]string{"--group", "qa", "--no-groups", "alice"}, 2, "user edit: --group and --no-groups do not go together"},
		{[]string{"--admin=maybe", "alice"}, 2, "user edit: invalid"},
		{[]string{"--name", "A", "alice", "bob"}, 2, "user edit: want exactly one USERNAME"},
		{[]string{"--name", "A", "bad name"}, 2, `user edit: username "bad name"`},
	} {
		before, _ := os.ReadFile(path)
		code, stdout, stderr := runCLI(t, "", nil, append([]string{"user", "edit", "--users", path}, tt.args...)...)
		if code != tt.code || stdout != "" || !strings.HasPrefix(stderr, "authsvc: "+tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("user edit %q = exit %d, stdout %q, stderr %q; want %d, one line starting %q", tt.args, code, stdout, stderr, tt.code, tt.want)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
			t.Errorf("user edit %q failed but changed the users file", tt.args)
		}
	}
}
