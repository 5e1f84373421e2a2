package cli

import (
	"context"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"authsvc/internal/testservers"
)

// djangoPBKDF2 is Django's pbkdf2_sha256 hash of pw, at few iterations.
func djangoPBKDF2(t *testing.T, pw, salt string) string {
	t.Helper()
	dk, err := pbkdf2.Key(sha256.New, pw, []byte(salt), 1000, 32)
	if err != nil {
		t.Fatal(err)
	}
	return "pbkdf2_sha256$1000$" + salt + "$" + base64.StdEncoding.EncodeToString(dk)
}

// djangoMD5 is Django's legacy salted md5 hash of pw.
func djangoMD5(pw, salt string) string {
	sum := md5.Sum([]byte(salt + pw))
	return "md5$" + salt + "$" + hex.EncodeToString(sum[:])
}

// A djangoUserRecord is what a test dump says of one Django user.
type djangoUserRecord struct {
	username, hash, first string
	active                bool
	key                   string // its DRF key, if any
	created               string // the key's created time
}

// writeDjangoDump writes a dumpdata file of records and returns its path.
func writeDjangoDump(t *testing.T, dir, name string, records ...djangoUserRecord) string {
	t.Helper()
	var out []any
	for i, r := range records {
		out = append(out, map[string]any{"model": "auth.user", "pk": i + 1, "fields": map[string]any{
			"username": r.username, "password": r.hash, "first_name": r.first, "last_name": "",
			"email": r.username + "@example.com", "is_active": r.active, "is_staff": false, "is_superuser": false, "groups": []any{},
		}})
		if r.key != "" {
			out = append(out, map[string]any{"model": "authtoken.token", "pk": r.key, "fields": map[string]any{"user": []string{r.username}, "created": r.created}})
		}
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestImportUpdatePostgres: --update against PostgreSQL, whose rows keep
// the fingerprint: an unchanged Django hash leaves the stored hash alone,
// a changed one replaces it (a legacy form wrapped) and moves the cut-off;
// without --secret-key-file the import is a usage error.
func TestImportUpdatePostgres(t *testing.T) {
	t.Parallel()
	pgURL := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, pgURL)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "fleet.key")
	first := writeDjangoDump(t, dir, "first.json",
		djangoUserRecord{"alice", djangoPBKDF2(t, "alice-pass-one", "s1"), "Alice", true, "", ""},
		djangoUserRecord{"bob", djangoPBKDF2(t, "bob-pass-one", "s2"), "Bob", true, "", ""},
	)
	bobNew := djangoMD5("bob-pass-two", "s5")
	second := writeDjangoDump(t, dir, "second.json",
		djangoUserRecord{"alice", djangoPBKDF2(t, "alice-pass-one", "s1"), "Alice B", true, "", ""},
		djangoUserRecord{"bob", bobNew, "Bob", true, "", ""},
	)
	if code, _, stderr := runCLI(t, "", nil, "user", "import", "--users", db, "--from", "django", first); code != 2 || !strings.Contains(stderr, "--secret-key-file is needed with PostgreSQL") {
		t.Fatalf("user import into PostgreSQL without --secret-key-file = exit %d, %q; want 2, the flag named", code, stderr)
	}
	importDump := func(path string) (int, string, string) {
		return runCLI(t, "", nil, "user", "import", "--update", "--users", db, "--from", "django", "--secret-key-file", keyPath, path)
	}
	if code, stdout, stderr := importDump(first); code != 0 || importedUsers(stdout, false) != 2 {
		t.Fatalf("the first import = exit %d, %q, %q; want 0, 2 users", code, stdout, stderr)
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	row := func(name string) (hash, djangoHash, fullName string, after time.Time) {
		t.Helper()
		var ta *time.Time
		if err := conn.QueryRow(context.Background(), `select password_hash, django_hash, name, tokens_after from authsvc_users where username = $1`, name).Scan(&hash, &djangoHash, &fullName, &ta); err != nil {
			t.Fatalf("%s's row: %v", name, err)
		}
		if ta != nil {
			after = *ta
		}
		return
	}
	aliceHash, aliceFP, _, _ := row("alice")
	bobHash, bobFP, _, bobAfter := row("bob")
	if len(aliceFP) != 73 || strings.Contains(aliceFP, "pbkdf2") {
		t.Errorf("alice's django_hash = %q; want KEYID:HEX, not the hash", aliceFP)
	}
	code, stdout, stderr := importDump(second)
	if _, u, _, ok := importSummary(stdout); code != 0 || !ok || u != (importTally{updated: 2}) {
		t.Fatalf("import --update = exit %d, %q, %q; want 0, 2 users updated", code, stdout, stderr)
	}
	if h, fp, name, _ := row("alice"); h != aliceHash || fp != aliceFP || name != "Alice B" {
		t.Errorf("alice after --update: hash changed %v, fingerprint changed %v, name %q; want only the name changed", h != aliceHash, fp != aliceFP, name)
	}
	h, fp, _, after := row("bob")
	if h == bobHash || fp == bobFP || !strings.HasPrefix(h, "wrapped_md5$") || strings.Contains(h, bobNew[strings.LastIndexByte(bobNew, '$')+1:]) || !after.After(bobAfter) {
		t.Errorf("bob after --update: hash %q, cut-off %v (was %v); want his new md5 hash wrapped, a new fingerprint, a later cut-off", h, after, bobAfter)
	}
}
