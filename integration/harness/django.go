package harness

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// Django42Fixture is the real Django 4.2 dump, one user per hash form (a
// verbatim copy of ../shared/fixtures/django; its README lists every
// password). Never edited.
var Django42Fixture = FromRoot("testdata/django42/dumpdata.json")

// Django42Tokens are the fixture's DRF keys (its README), by user.
var Django42Tokens = map[string]string{
	"ada": "882ff61e9669694d05a4e17a8fb68b49826d3e52", "grace": "52176908c0d677336ba63c9c4752ffabbf5623ca",
	"linus": "fd4729dfeed3449912ac94f232f8f0e253385d65", "margo": "154bd080eab45d42d0520f7289729048958a6f66",
	"josé": "7cb78db5cda42578561e3624564548490cae69e3", "charles": "4f464d5ac867df4020c207ba0a6108d6b47ea45a",
	"niklaus": "e6d3badd4ff9840e01d4d926c924e91d71e88411", "zoë": "977fecca8b710e17ef364b670f3436371a619e50",
	"tim": "30a19733bec8b4f5320ac00a9ca8195734fdae01", "vint": "3b5604678aa5e4ad35260113348da59e10e77424",
	"bjarne": "de8500d7b1b195df23a8ece31c3fca32d6fe6b50", "guido": "3220c7e0147747cf4d39ff6be2ad2d711c7d2baf",
	"bill": "b4c14f6181b037d0c3f5da5572c5141e3df50a6b", "whitfield": "5f78d834f0046c4b4f505371c6c95fb5211c1eeb",
	"martin": "ca24ba3444392d61882b0bddaec91d52934eb78a", "adi": "d5f3a204d6df5ae44a644a5c8c5317ef358c46f1",
}

// WantTokenTally checks the tokens part of an import's summary line.
func WantTokenTally(t *testing.T, what, stdout string, dryRun bool, want ImportTally) {
	t.Helper()
	dry, _, got, ok := ImportSummary(stdout)
	if !ok || dry != dryRun || got != want {
		t.Fatalf("%s: summary %q: tokens %+v (dry run %v); want %+v (dry run %v)", what, stdout, got, dry, want, dryRun)
	}
}

// ImportTally is one line of user import's summary: internal/cli's own
// tally, as the summary line prints it.
type ImportTally struct{ Imported, Updated, Unchanged, Dead, Skipped int }

// importSummaryRE matches user import's summary line.
var importSummaryRE = regexp.MustCompile(`^(dry run: would import|imported) .* into .*: users (\d+) imported, (\d+) updated, (\d+) unchanged, (\d+) skipped; tokens (\d+) imported, (\d+) updated, (\d+) left dead, (\d+) skipped; factors \d+ imported, \d+ updated, \d+ unchanged, \d+ skipped(; nothing written)?\n$`)

// ImportSummary parses user import's stdout, its one summary line: whether
// it was a dry run, and the users' and tokens' tallies. ok is false when
// stdout is anything else.
func ImportSummary(stdout string) (dryRun bool, users, tokens ImportTally, ok bool) {
	m := importSummaryRE.FindStringSubmatch(stdout)
	if m == nil || (m[1] == "imported") == (m[10] != "") {
		return false, users, tokens, false
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return m[10] != "", ImportTally{Imported: n(2), Updated: n(3), Unchanged: n(4), Skipped: n(5)}, ImportTally{Imported: n(6), Updated: n(7), Dead: n(8), Skipped: n(9)}, true
}

// ImportedUsers is how many users stdout's summary line says an import
// (dry run or not, as dryRun says) imported; -1 when it is no such line.
func ImportedUsers(stdout string, dryRun bool) int {
	dry, u, _, ok := ImportSummary(stdout)
	if !ok || dry != dryRun {
		return -1
	}
	return u.Imported
}

// DjangoPBKDF2 is Django's pbkdf2_sha256 hash of pw, at few iterations.
func DjangoPBKDF2(t *testing.T, pw, salt string) string {
	t.Helper()
	dk, err := pbkdf2.Key(sha256.New, pw, []byte(salt), 1000, 32)
	if err != nil {
		t.Fatal(err)
	}
	return "pbkdf2_sha256$1000$" + salt + "$" + base64.StdEncoding.EncodeToString(dk)
}

// A djangoUserRecord is what a test dump says of one Django user.
type DjangoUserRecord struct {
	Username, Hash, First string
	Active                bool
	Key                   string // its DRF key, if any
	Created               string // the key's created time
}

// WriteDjangoDump writes a dumpdata file of records and returns its path.
func WriteDjangoDump(t *testing.T, dir, name string, records ...DjangoUserRecord) string {
	t.Helper()
	var out []any
	for i, r := range records {
		out = append(out, map[string]any{"model": "auth.user", "pk": i + 1, "fields": map[string]any{
			"username": r.Username, "password": r.Hash, "first_name": r.First, "last_name": "",
			"email": r.Username + "@example.com", "is_active": r.Active, "is_staff": false, "is_superuser": false, "groups": []any{},
		}})
		if r.Key != "" {
			out = append(out, map[string]any{"model": "authtoken.token", "pk": r.Key, "fields": map[string]any{"user": []string{r.Username}, "created": r.Created}})
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
