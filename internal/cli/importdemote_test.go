package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// writeDjangoAdminDump writes a dumpdata file of one active Django user,
// root, a superuser when admin, and returns its path.
func writeDjangoAdminDump(t *testing.T, dir, name, hash string, admin bool) string {
	t.Helper()
	data, err := json.Marshal([]any{map[string]any{"model": "auth.user", "pk": 1, "fields": map[string]any{
		"username": "root", "password": hash, "first_name": "Root", "last_name": "", "email": "root@example.com",
		"is_active": true, "is_staff": admin, "is_superuser": admin, "groups": []any{},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestImportUpdateDemotionEndsAdminTokens: `user import --update` of a
// dump in which an admin is no longer a superuser ends their personal
// access tokens with the admin scope, as `user edit --admin=false` does
// (issue 37, point 6): the running server refuses the token at once, and
// an import that makes them an admin again brings it back on neither the
// directory nor the server. On a users file and on PostgreSQL.
//
// Before the fix, the demoting import kept the token (403
// permission_denied while demoted) and the promoting one revived it (200).
func TestImportUpdateDemotionEndsAdminTokens(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"file", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			spec := filepath.Join(dir, "users.json")
			keyFlags := []string{}
			if backend == "postgres" {
				pgURL := testservers.SharedPostgres(t)
				spec = testservers.NewDatabase(t, pgURL)
				keyFlags = []string{"--secret-key-file", filepath.Join(dir, "fleet.key")}
			}
			hash := djangoPBKDF2(t, "root-pass-one", "s1")
			importDump := func(admin bool, name string) {
				t.Helper()
				args := append([]string{"user", "import", "--update", "--users", spec, "--from", "django"}, keyFlags...)
				mustRunCLI(t, "", append(args, writeDjangoAdminDump(t, dir, name, hash, admin))...)
			}
			importDump(true, "admin.json")
			pat, id := createToken(t, spec, nil, "--name", "ops", "--scope", "admin", "--scope", "info", "root")
			base, _, stop := startServer(t, nil, append([]string{"--users", spec, "--reload-interval", "20ms"}, keyFlags...)...)
			t.Cleanup(func() { stop() }) // before the temporary directory goes
			adminList := func(token string) int {
				t.Helper()
				req, err := http.NewRequest("GET", base+"/api/admin/users/", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Token "+token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			// eventually waits until the server's reply to the token is want,
			// or says what it was.
			eventually := func(step string, want int) {
				t.Helper()
				got := 0
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if got = adminList(pat); got == want {
						return
					}
				}
				t.Errorf("%s: GET /api/admin/users/ with root's admin token = %d; want %d", step, got, want)
			}
			hasToken := func() bool {
				for _, tok := range listUsersIn(t, spec)["root"].AccessTokens {
					if tok.ID == id {
						return true
					}
				}
				return false
			}
			eventually("before the imports", http.StatusOK)

			importDump(false, "demoted.json")
			if hasToken() {
				t.Errorf("after the demoting import: root still holds the admin token %s; want it ended", id)
			}
			eventually("after the demoting import", http.StatusUnauthorized)

			importDump(true, "promoted.json")
			if hasToken() {
				t.Errorf("after the promoting import: root holds the admin token %s again; want it gone for good", id)
			}
			// The server has read the promotion once a new admin token of
			// root works; the old one must not.
			fresh, _ := createToken(t, spec, nil, "--name", "new", "--scope", "admin", "root")
			for deadline := time.Now().Add(10 * time.Second); adminList(fresh) != http.StatusOK && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			if got := adminList(pat); got != http.StatusUnauthorized {
				t.Errorf("after the promoting import: GET /api/admin/users/ with root's old admin token = %d; want 401", got)
			}
		})
	}
}
