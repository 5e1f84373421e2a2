package django

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"path/filepath"
	"strings"
	"testing"

	"authsvc/internal/password"
	"authsvc/internal/users"
)

// djangoFixture is the real Django 3.2 dump (a verbatim copy of
// ../shared/fixtures/django, as internal/cli's tests name it); its README
// lists every user's password. Never edited.
var djangoFixture = harness.FromRoot("testdata/django/dumpdata.json")

// TestImportDjangoFixture: every user of the real dump is imported as
// API.md maps it, logs in with their Django password, is rehashed under
// the policy on that first login, and keeps the token they got.
func TestImportDjangoFixture(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	code, stdout, stderr := harness.RunCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "django", djangoFixture)
	keyLine := "authsvc: user import: created the secret key file " + filepath.Join(filepath.Dir(usersPath), "authsvc.key")
	fileLine := "authsvc: created the users file " + usersPath + "\n"
	if code != 0 || harness.ImportedUsers(stdout, false) != 7 || !strings.HasPrefix(stderr, keyLine) || !strings.HasSuffix(stderr, fileLine) || strings.Count(stderr, "\n") != 2 {
		t.Fatalf("user import of the fixture = exit %d, stdout %q, stderr %q; want exit 0, 7 users, the key file's and the users file's creation alone on stderr", code, stdout, stderr)
	}
	list := harness.MustReadUsers(t, usersPath)
	for _, want := range []users.User{
		{Username: "ada", Name: "Ada Lovelace", Email: "ada@example.com", Groups: []string{"engineering", "research"}},
		{Username: "grace", Name: "Grace Hopper", Email: "grace@example.com", Groups: []string{"engineering"}, Admin: true},
		{Username: "linus", Name: "Linus", Email: "linus@example.com", Groups: []string{}, Admin: true},
		{Username: "ken", Name: "Ken Thompson", Groups: []string{"research"}},
		{Username: "margo", Name: "Margo Seltzer", Email: "margo@example.com", Groups: []string{"research"}, Disabled: true},
		{Username: "nobodyhome", Groups: []string{}, Disabled: true},
		{Username: "josé", Name: "José Núñez", Email: "jose@example.com", Groups: []string{"ventas"}},
	} {
		got, ok := list[want.Username]
		if !ok {
			t.Errorf("%s was not imported", want.Username)
			continue
		}
		if got.Name != want.Name || got.Email != want.Email || strings.Join(got.Groups, ",") != strings.Join(want.Groups, ",") ||
			got.Admin != want.Admin || got.Disabled != want.Disabled {
			t.Errorf("imported %s = %+v; want %+v", want.Username, got, want)
		}
	}

	base, _, stop := harness.ServeBinary(t, nil, "--users", usersPath) // the default policy: argon2id
	defer stop()
	passwords := map[string]string{
		"ada": "analytical-engine-1843", "grace": "cobol-compiler-1959", "linus": "kernel-monolith-1991",
		"ken": "unix-timesharing-1969", "josé": "contraseña-segura-42",
	}
	imported := harness.MustReadUsers(t, usersPath)
	tokens := map[string]string{}
	for user, pw := range passwords {
		tokens[user] = servertest.LoginToken(t, base, user, pw)
	}
	hashOf := func(user string) string { return harness.MustReadUsers(t, usersPath)[user].PasswordHash }
	for user, pw := range passwords {
		// The rehashes are written together, within a second.
		h, err := password.ParseHash(waitForRehash(t, user, imported[user].PasswordHash, hashOf))
		if err != nil || h.Scheme() != password.SchemeArgon2id {
			t.Errorf("%s's hash after the first login = %v, %v; want rehashed to argon2id", user, h, err)
		}
		if code, body := servertest.GetInfo(t, base, tokens[user], ""); code != 200 {
			t.Errorf("info with %s's token from before the rehash = %d %s; want 200", user, code, body)
		}
		servertest.LoginToken(t, base, user, pw) // the new hash takes the same password
	}
	for user, pw := range map[string]string{"margo": "berkeley-db-1996-x", "nobodyhome": "anything-at-all"} {
		resp, body := servertest.PostJSON(t, base+"/api/auth/login/", `{"username":"`+user+`","password":"`+pw+`"}`)
		if resp.StatusCode != 401 {
			t.Errorf("login of %s (disabled) = %d %s; want 401", user, resp.StatusCode, body)
		}
	}
}
