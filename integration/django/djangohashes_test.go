package django

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"authsvc/internal/password"
	"authsvc/internal/testservers"
)

// djangoNewForms are the fixture's users whose hash forms are verified as
// Django does (pbkdf2_sha1, argon2i, scrypt) or wrapped at import (the
// legacy fast forms): the scheme each is imported as, and the password.
var djangoNewForms = []struct{ username, scheme, password, digest string }{
	{"charles", password.SchemePBKDF2SHA1, "difference-engine-1822", ""},
	{"niklaus", password.SchemeDjangoArgon2i, "pascal-language-1970", ""},
	{"zoë", password.SchemeScrypt, "mémoire-dure-scrypt-16", ""},
	{"tim", password.SchemeWrappedSHA1, "world-wide-web-1989", "74a0a09f4a29c3a663dee4856f2f48ce4e7d0bbc"},
	{"vint", password.SchemeWrappedMD5, "tcp-ip-handshake-1974", "508bc978350e07960d426aab30a7e185"},
	{"bjarne", password.SchemeWrappedUnsaltedSHA1, "c-with-classes-1979", "fddd962c355096c5793673c3404626d35e9456d7"},
	{"guido", password.SchemeWrappedUnsaltedMD5, "benevolent-dictator-1991", "e54d28c10f6de781bcffcb2e8ad00e58"},
}

// TestDjangoHashFormsLogInFromFile (issue 20, point 2): user import of the
// Django 4.2 fixture's users of those forms into a users file keeps
// pbkdf2_sha1, argon2i and scrypt as they are, stores each legacy fast hash
// only wrapped in the policy's hash, and refuses crypt with its reason; then
// each of those users logs in with the Django password (a wrong one is
// refused), and is a plain policy hash after that first login. The server
// is a process of the binary (serveBinary): the race detector would make
// each check of PBKDF2-SHA1 at 600,000 iterations seconds long.
// (TestParseDjangoDumpWrapsLegacy imports the whole fixture; the users of
// the other forms, among them Django's 100 MiB argon2, would make every
// failed login here as slow as theirs: seconds each under -race.)
func TestDjangoHashFormsLogInFromFile(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	importDjango42(t, usersPath)
	raw, err := os.ReadFile(usersPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range djangoNewForms {
		if f.digest != "" && strings.Contains(string(raw), f.digest) {
			t.Errorf("the users file holds %s's fast hash %s", f.username, f.digest)
		}
	}
	base, _, stop := harness.ServeBinary(t, nil, "--users", usersPath, "--login-burst", "100")
	defer stop()
	checkDjangoLogins(t, base, func(username string) string { return harness.MustReadUsers(t, usersPath)[username].PasswordHash })
}

// TestDjangoHashFormsLogInFromPostgres: the same with the users in
// PostgreSQL, where the rows never hold a fast hash either.
func TestDjangoHashFormsLogInFromPostgres(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	pgURL := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, pgURL)
	importDjango42(t, db)
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	hashOf := func(username string) string {
		var h string
		if err := conn.QueryRow(context.Background(), `select password_hash from authsvc_users where username = $1`, username).Scan(&h); err != nil {
			t.Fatalf("%s's row: %v", username, err)
		}
		return h
	}
	var fast int
	if err := conn.QueryRow(context.Background(), `select count(*) from authsvc_users where password_hash ~ '^[0-9a-f]{32}$' or password_hash ~ '^(sha1|md5)\$'`).Scan(&fast); err != nil || fast != 0 {
		t.Errorf("rows holding a fast hash: %d, %v; want none", fast, err)
	}
	base, _, stop := harness.ServeBinary(t, nil, "--users", db, "--login-burst", "100")
	defer stop()
	checkDjangoLogins(t, base, hashOf)
}

// importDjango42 imports the Django 4.2 fixture's users of djangoNewForms
// and bill into the users file or database at users: all but bill (crypt,
// refused with its reason, so exit 1).
func importDjango42(t *testing.T, users string) {
	t.Helper()
	data, err := os.ReadFile(harness.Django42Fixture)
	if err != nil {
		t.Fatal(err)
	}
	var records []json.RawMessage
	if err := json.Unmarshal(data, &records); err != nil {
		t.Fatal(err)
	}
	keep := map[string]bool{"bill": true}
	for _, f := range djangoNewForms {
		keep[f.username] = true
	}
	var dump []json.RawMessage // the records as Django wrote them
	for _, raw := range records {
		var r struct {
			Model  string `json:"model"`
			Fields struct {
				Username string `json:"username"`
			} `json:"fields"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if r.Model == "auth.group" || r.Model == "auth.user" && keep[r.Fields.Username] {
			dump = append(dump, raw)
		}
	}
	out, _ := json.Marshal(dump)
	dumpPath := filepath.Join(t.TempDir(), "dump.json")
	if err := os.WriteFile(dumpPath, out, 0o600); err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(t.TempDir(), "authsvc.key")
	code, stdout, stderr := harness.RunCLI(t, "", nil, "user", "import", "--users", users, "--from", "django", "--secret-key-file", keyPath, dumpPath)
	if code != 1 || harness.ImportedUsers(stdout, false) != len(djangoNewForms) {
		t.Fatalf("user import of the 4.2 fixture's users = exit %d, stdout %q, stderr %q; want exit 1, %d users (bill refused)", code, stdout, stderr, len(djangoNewForms))
	}
	// A users file is created, and said so; a database is not a file.
	file := !strings.HasPrefix(users, "postgres")
	if strings.Count(stderr, "\n") != 3+btoi(file) || !strings.Contains(stderr, "created the secret key file "+keyPath) || strings.Contains(stderr, "created the users file "+users) != file || !strings.Contains(stderr, `(auth.user "bill"): password: unsupported password hash scheme: Django crypt (CryptPasswordHasher), refused: DES crypt(3) reads only the first 8 characters of a password`) {
		t.Errorf("user import stderr = %q; want the key file's and the users file's creation, bill's refusal with its reason, and the summary", stderr)
	}
}

// checkDjangoLogins logs each user of djangoNewForms in through the server
// at base, reading their stored hash with hashOf: a wrong password is 401
// and changes nothing, the Django password is 200, and the hash is then a
// plain policy hash (argon2id, the default), which the same password
// matches.
func checkDjangoLogins(t *testing.T, base string, hashOf func(username string) string) {
	t.Helper()
	policy := password.DefaultHashPolicy()
	tokens, importedHashes := map[string]string{}, map[string]string{}
	for _, f := range djangoNewForms {
		imported := hashOf(f.username)
		h, err := password.ParseHash(imported)
		if err != nil || h.Scheme() != f.scheme {
			t.Errorf("%s's imported hash = %v, %v; want %s", f.username, h, err, f.scheme)
			continue
		}
		if !policy.NeedsRehash(h) {
			t.Errorf("%s's imported %s hash needs no rehash; want one at the first login", f.username, f.scheme)
		}
		// One wrong password each: a failed login waits as long as a check
		// of the slowest hash (PBKDF2-SHA1 at 600,000 iterations here).
		for _, wrong := range []string{f.password[:len(f.password)-1]} {
			resp, body := servertest.PostJSON(t, base+"/api/auth/login/", fmt.Sprintf(`{"username":%q,"password":%q}`, f.username, wrong))
			if resp.StatusCode != 401 {
				t.Errorf("login of %s (%s) with %q = %d %s; want 401", f.username, f.scheme, wrong, resp.StatusCode, body)
			}
		}
		if now := hashOf(f.username); now != imported {
			t.Errorf("%s's hash changed after failed logins", f.username)
		}
		tokens[f.username] = servertest.LoginToken(t, base, f.username, f.password)
		importedHashes[f.username] = imported
	}
	// The rehashes are written together, within a second of the first.
	for _, f := range djangoNewForms {
		tok, ok := tokens[f.username]
		if !ok {
			continue
		}
		rehashed := waitForRehash(t, f.username, importedHashes[f.username], hashOf)
		if h, err := password.ParseHash(rehashed); err != nil || h.Scheme() != password.SchemeArgon2id || policy.NeedsRehash(h) {
			t.Errorf("%s's hash after the first login = %.30q…, %v; want a plain argon2id hash under the default policy", f.username, rehashed, err)
		}
		if code, body := servertest.GetInfo(t, base, tok, ""); code != 200 {
			t.Errorf("info with %s's first token = %d %s; want 200", f.username, code, body)
		}
		servertest.LoginToken(t, base, f.username, f.password) // the new hash takes the same password
		if now := hashOf(f.username); now != rehashed {
			t.Errorf("%s's hash changed again at the second login", f.username)
		}
	}
	resp, body := servertest.PostJSON(t, base+"/api/auth/login/", `{"username":"bill","password":"vi-editor-1976"}`)
	if resp.StatusCode != 401 {
		t.Errorf("login of bill (crypt, not imported) = %d %s; want 401", resp.StatusCode, body)
	}
}

// waitForRehash returns username's hash once it is no longer old: the
// rehash on login may be written after the reply.
func waitForRehash(t *testing.T, username, old string, hashOf func(string) string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if h := hashOf(username); h != old {
			return h
		}
		if time.Now().After(deadline) {
			t.Errorf("%s's hash was not rehashed within 10 s of the first login", username)
			return old
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
