package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"authsvc/internal/servertest"
)

// A readCounter is a stdin that counts the reads asked of it and gives
// a password to each, so that a command that reads one is caught.
type readCounter struct{ reads atomic.Int32 }

func (r *readCounter) Read(p []byte) (int, error) {
	r.reads.Add(1)
	return copy(p, "a-password-that-must-not-be-read\n"), io.EOF
}

// TestCLIUserAddNoPassword: user add --no-password reads nothing from
// stdin and stores Django's unusable hash, so that no password logs the
// user in, until a reset link from user reset-link sets one.
func TestCLIUserAddNoPassword(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "alice-pw")
	var stdin readCounter
	var stdout, stderr strings.Builder
	err := Run(t.Context(), []string{"authsvc", "user", "add", "--users", path, "--no-password", "--name", "Nora", "nora"},
		func(string) string { return "" }, &stdin, &stdout, &stderr)
	if code := ExitStatus(err, &stderr); code != 0 || stdout.String() != fmt.Sprintf("added user %q to %s\n", "nora", path) || stderr.String() != "" {
		t.Fatalf("user add --no-password nora = exit %d, stdout %q, stderr %q; want 0, the add, nothing", code, stdout.String(), stderr.String())
	}
	if n := stdin.reads.Load(); n != 0 {
		t.Errorf("user add --no-password read stdin %d times; want never", n)
	}
	nora := mustReadUsers(t, path)["nora"]
	if !strings.HasPrefix(nora.PasswordHash, "!") || nora.Name != "Nora" || nora.Groups == nil || nora.TokensAfter.IsZero() {
		t.Errorf("nora as stored = %+v; want Django's unusable hash (!…), her name, groups [] and a cut-off", nora)
	}
	link, _ := resetLink(t, path, nil, "nora")
	uid, token := splitResetLink(t, link)

	base, _, _ := startServer(t, map[string]string{"AUTHSVC_USERS": path}, "--cost", "4")
	for _, pw := range []string{"!", nora.PasswordHash, "a-password-that-must-not-be-read"} {
		resp, body := servertest.PostJSON(t, base+"/api/auth/login/", fmt.Sprintf(`{"username":"nora","password":%q}`, pw))
		if resp.StatusCode != 401 || !strings.Contains(body, "invalid_credentials") {
			t.Errorf("login(nora, %q) before the reset = %d %s; want 401 invalid_credentials", pw, resp.StatusCode, body)
		}
	}
	resp, body := servertest.PostJSON(t, base+"/api/auth/password/reset/confirm/",
		fmt.Sprintf(`{"uid":%q,"token":%q,"new_password":"nora's own new passphrase"}`, uid, token))
	if resp.StatusCode != 204 {
		t.Fatalf("reset confirm of nora's link = %d %s; want 204", resp.StatusCode, body)
	}
	servertest.LoginToken(t, base, "nora", "nora's own new passphrase")
}

// TestCLIUserAddNoPasswordRefusals: --no-password with a hash flag is a
// usage error, and a name taken stays an error of its own; neither
// changes the users file.
func TestCLIUserAddNoPasswordRefusals(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "alice-pw")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--cost", "12", "bob"}, 2, "user add: --cost does not go with --no-password"},
		{[]string{"--hash", "argon2id", "bob"}, 2, "user add: --hash does not go with --no-password"},
		{[]string{"--name", "a\nb", "bob"}, 2, "user add: --name"},
		{[]string{"alice"}, 1, `user add: user "alice" already exists`},
	} {
		before := mustReadUsers(t, path)
		code, stdout, stderr := runCLI(t, "", nil, append([]string{"user", "add", "--users", path, "--no-password"}, tt.args...)...)
		if code != tt.code || stdout != "" || !strings.HasPrefix(stderr, "authsvc: "+tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("user add --no-password %q = exit %d, stdout %q, stderr %q; want %d, one line starting %q", tt.args, code, stdout, stderr, tt.code, tt.want)
		}
		if after := mustReadUsers(t, path); len(after) != len(before) || after["alice"].PasswordHash != before["alice"].PasswordHash {
			t.Errorf("user add --no-password %q changed the users: %v", tt.args, after)
		}
	}
}

// TestCLISaysWhenItCreatesUsersFile: a command that creates the users file
// says so on stderr, with the file's absolute path, so that a mistyped
// --users does not start a new set of users unnoticed; one that finds the
// file says nothing of it.
func TestCLISaysWhenItCreatesUsersFile(t *testing.T) {
	// Not parallel: it runs in its own folder (t.Chdir), with relative
	// paths as a user types them.
	dir := t.TempDir()
	t.Chdir(dir)
	created := "authsvc: created the users file " + filepath.Join(dir, "users.json") + "\n"
	for _, tt := range []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"user add into a new file", []string{"user", "add", "--users", "users.json", "--no-password", "alice"}, created},
		{"user add into that file", []string{"user", "add", "--users", "users.json", "--no-password", "bob"}, ""},
		{"user list of a missing file", []string{"user", "list", "--users", "none.json"}, "authsvc: user list: open none.json: no such file or directory\n"},
	} {
		var stdout, stderr strings.Builder
		err := Run(t.Context(), append([]string{"authsvc"}, tt.args...), func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
		ExitStatus(err, &stderr)
		if stderr.String() != tt.wantStderr {
			t.Errorf("%s: stderr = %q; want %q", tt.name, stderr.String(), tt.wantStderr)
		}
	}
}
