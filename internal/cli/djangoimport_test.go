package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/servertest"
	"authsvc/internal/users/usersfile"
)

// djangoFixture is the real Django 3.2 dump (a verbatim copy of ../shared/fixtures/django); its
// README lists every user's password. Never edited.
const djangoFixture = "testdata/django/dumpdata.json"

// TestImportDjangoShapes: what the fixture does not show, imported or
// refused clearly, one stderr line per record left out, exit 1.
func TestImportDjangoShapes(t *testing.T) {
	t.Parallel()
	hash := passwordtest.MustHash(t, "pw", servertest.TestCost)
	user := func(pk int, fields map[string]any) map[string]any {
		base := map[string]any{"password": hash, "first_name": "", "last_name": "", "email": "", "is_active": true,
			"is_staff": false, "is_superuser": false, "groups": []any{}, "user_permissions": []any{}}
		for k, v := range fields {
			base[k] = v
		}
		return map[string]any{"model": "auth.user", "pk": pk, "fields": base}
	}
	dump := []any{
		map[string]any{"model": "auth.group", "pk": 7, "fields": map[string]any{"name": "ops", "permissions": []any{}}},
		map[string]any{"model": "contenttypes.contenttype", "pk": 1, "fields": map[string]any{"app_label": "auth", "model": "user"}},
		user(1, map[string]any{"username": "pkgroups", "groups": []any{7}}),                  // groups by primary key
		user(2, map[string]any{"username": "ｆｕｌｌ"}),                                          // NFKC: "full"
		user(3, map[string]any{"username": "noactive", "is_active": nil}),                    // null: Django's default, active
		user(4, map[string]any{"username": "emptyhash", "password": ""}),                     // unusable: disabled
		user(5, map[string]any{"username": "cryptuser", "password": "crypt$$t2uO5z4/JT07."}), // refused; a sha1$ is wrapped (djangohashes_test.go)
		user(6, map[string]any{"username": "bad name"}),
		user(7, map[string]any{"username": "pkgroups"}),                       // a second record
		user(8, map[string]any{"username": "lostgroup", "groups": []any{99}}), // no such group in the dump
	}
	data, _ := json.Marshal(dump)
	dir := t.TempDir()
	dumpPath, usersPath := filepath.Join(dir, "dump.json"), filepath.Join(dir, "users.json")
	os.WriteFile(dumpPath, data, 0o600)
	code, stdout, stderr := runCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "django", dumpPath)
	if code != 1 || importedUsers(stdout, false) != 4 {
		t.Errorf("user import = exit %d, stdout %q; want exit 1 (records left out), 4 users", code, stdout)
	}
	for _, want := range []string{`"cryptuser"): password: `, `"bad name"`, `"pkgroups"): username: a second record`, `"lostgroup"): groups: 99`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("user import stderr = %q; want a line containing %q", stderr, want)
		}
	}
	if n := strings.Count(stderr, "\n"); n != 7 {
		t.Errorf("user import stderr has %d lines; want the key file's creation, 4 skipped records, the summary and the users file's creation", n)
	}
	users := mustReadUsers(t, usersPath)
	if u := users["pkgroups"]; len(u.Groups) != 1 || u.Groups[0] != "ops" {
		t.Errorf("pkgroups' groups = %v; want [ops], from the dump's auth.group record", u.Groups)
	}
	if _, ok := users["full"]; !ok {
		t.Errorf("ｆｕｌｌ was not imported as its NFKC form full: %v", users)
	}
	if users["noactive"].Disabled || !users["emptyhash"].Disabled {
		t.Errorf("noactive disabled %v, emptyhash disabled %v; want false, true", users["noactive"].Disabled, users["emptyhash"].Disabled)
	}
	if time.Since(users["full"].TokensAfter) > time.Minute {
		t.Errorf("imported users' tokens_after = %v; want the import's time", users["full"].TokensAfter)
	}

	for name, content := range map[string]string{
		"jsonl":   `{"model": "auth.user", "pk": 1, "fields": {}}` + "\n",
		"garbage": "not json",
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		if code, _, stderr := runCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "django", p); code != 1 || !strings.Contains(stderr, "not a dumpdata JSON array") {
			t.Errorf("user import of %s = exit %d, %q; want exit 1 naming the format", name, code, stderr)
		}
	}
	if code, _, _ := runCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "rails", dumpPath); code != 2 {
		t.Errorf("user import --from rails = exit %d; want 2", code)
	}
}

// TestUserCheck: user check validates a users file offline.
func TestUserCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	usersfile.Write(good, servertest.TestUsers(t))
	os.WriteFile(bad, []byte(servertest.UsersJSON(servertest.OKAlice, servertest.Entry("bob", servertest.HashField("$2a$31$"+passwordtest.Hash[7:])))), 0o600)
	if code, stdout, _ := runCLI(t, "", nil, "user", "check", "--users", good); code != 0 || !strings.Contains(stdout, "3 users, valid") {
		t.Errorf("user check of a good file = exit %d, %q; want 0, 3 users", code, stdout)
	}
	if code, _, stderr := runCLI(t, "", nil, "user", "check", "--users", bad); code != 1 || !strings.Contains(stderr, `users[1] ("bob"): password_hash: bcrypt cost 31`) {
		t.Errorf("user check of a bad file = exit %d, %q; want 1 naming the entry", code, stderr)
	}
}
