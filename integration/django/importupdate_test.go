package django

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"authsvc/internal/secret"
	"authsvc/internal/testservers"
)

// djangoSHA1 and djangoMD5 are Django's legacy salted fast hashes of pw.
func djangoSHA1(pw, salt string) string {
	sum := sha1.Sum([]byte(salt + pw))
	return "sha1$" + salt + "$" + hex.EncodeToString(sum[:])
}

func djangoMD5(pw, salt string) string {
	sum := md5.Sum([]byte(salt + pw))
	return "md5$" + salt + "$" + hex.EncodeToString(sum[:])
}

// waitStatus polls until do answers want, for up to 5 s (a server picks up
// a users file change within its reload interval).
func waitStatus(t *testing.T, what string, want int, do func() harness.Reply) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := do()
		if r.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v; want %d", what, r, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestImportUpdate (issue 20, point 3): user import --update brings the
// users up to date with a newer dump, as API.md's Moving from Django says:
//   - a hash unchanged in Django is not taken again, so the policy hash a
//     login upgraded it to stays; the profile is updated;
//   - a hash changed in Django is taken (a legacy form wrapped), and the
//     user's sessions end, the imported key among them;
//   - a user deactivated in Django is disabled, its key dead;
//   - a user user import did not create keeps its password, is updated
//     otherwise and reported, and gets no key;
//   - a new user is added, with its key;
//   - running it again changes nothing and brings no dead key back;
//   - a dry run says all this and writes nothing;
//   - without the secret key the users were imported under, it refuses to
//     run, and writes nothing.
func TestImportUpdate(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	prefix := testservers.UniquePrefix()
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	if code, _, stderr := harness.RunCLI(t, "dave-authsvc-pw\n", nil, "user", "add", "--users", usersPath, "dave"); code != 0 {
		t.Fatalf("user add dave = exit %d, %s", code, stderr)
	}
	const created = "2025-06-01T09:00:00.000Z"
	keys := map[string]string{
		"alice": strings.Repeat("a1", 20), "bob": strings.Repeat("b2", 20), "carol": strings.Repeat("c3", 20),
		"dave": strings.Repeat("d4", 20), "erin": strings.Repeat("e5", 20),
	}
	first := harness.WriteDjangoDump(t, dir, "first.json",
		harness.DjangoUserRecord{Username: "alice", Hash: harness.DjangoPBKDF2(t, "alice-pass-one", "s1"), First: "Alice", Active: true, Key: keys["alice"], Created: created},
		harness.DjangoUserRecord{Username: "bob", Hash: harness.DjangoPBKDF2(t, "bob-pass-one", "s2"), First: "Bob", Active: true, Key: keys["bob"], Created: created},
		harness.DjangoUserRecord{Username: "carol", Hash: djangoSHA1("carol-pass-one", "s3"), First: "Carol", Active: true, Key: keys["carol"], Created: created},
		harness.DjangoUserRecord{Username: "dave", Hash: harness.DjangoPBKDF2(t, "dave-django-pw", "s4"), First: "Dave", Active: true, Key: keys["dave"], Created: created},
	)
	bobNewHash := djangoMD5("bob-pass-two", "s5")
	second := harness.WriteDjangoDump(t, dir, "second.json",
		harness.DjangoUserRecord{Username: "alice", Hash: harness.DjangoPBKDF2(t, "alice-pass-one", "s1"), First: "Alice B", Active: true, Key: keys["alice"], Created: created},
		harness.DjangoUserRecord{Username: "bob", Hash: bobNewHash, First: "Bob", Active: true, Key: keys["bob"], Created: created},
		harness.DjangoUserRecord{Username: "carol", Hash: djangoSHA1("carol-pass-one", "s3"), First: "Carol", Active: false, Key: keys["carol"], Created: created},
		harness.DjangoUserRecord{Username: "dave", Hash: harness.DjangoPBKDF2(t, "dave-django-pw", "s4"), First: "Dave D", Active: true, Key: keys["dave"], Created: created},
		harness.DjangoUserRecord{Username: "erin", Hash: harness.DjangoPBKDF2(t, "erin-pass-one", "s6"), First: "Erin", Active: true, Key: keys["erin"], Created: created},
	)
	importDump := func(path string, extra ...string) (int, string, string) {
		args := append([]string{"user", "import", "--users", usersPath, "--from", "django", "--store", redisURL, "--store-prefix", prefix}, extra...)
		return harness.RunCLI(t, "", nil, append(args, path)...)
	}
	wantSummary := func(what, stdout string, dryRun bool, users, tokens harness.ImportTally) {
		t.Helper()
		dry, u, k, ok := harness.ImportSummary(stdout)
		if !ok || dry != dryRun || u != users || k != tokens {
			t.Errorf("%s: summary %q; want users %+v, tokens %+v (dry run %v)", what, stdout, users, tokens, dryRun)
		}
	}

	code, stdout, stderr := importDump(first)
	wantSummary("the first import", stdout, false, harness.ImportTally{Imported: 3, Skipped: 1}, harness.ImportTally{Imported: 3, Skipped: 1})
	if code != 1 || !strings.Contains(stderr, `left alone: user "dave" already exists`) || !strings.Contains(stderr, `created the secret key file `+filepath.Join(dir, "authsvc.key")) {
		t.Errorf("the first import = exit %d, stderr:\n%s\nwant 1, dave left alone, the key file created", code, stderr)
	}
	servertest.CheckMode(t, filepath.Join(dir, "authsvc.key"), 0o600)

	base, _, stop := harness.StartServer(t, nil, "--users", usersPath, "--store", redisURL, "--store-prefix", prefix, "--login-burst", "100")
	defer stop()
	loginReply := func(user, pw string) harness.Reply {
		return harness.Do(t, "POST", base+"/api/auth/login/", "", `{"username":"`+user+`","password":"`+pw+`"}`)
	}
	info := func(user string) func() harness.Reply {
		return func() harness.Reply { return harness.Do(t, "GET", base+"/api/auth/info", keys[user], "") }
	}
	// A login upgrades a Django hash to the policy's, written in the
	// background: waitRehashed waits for the write.
	waitRehashed := func(name string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.HasPrefix(harness.MustReadUsers(t, usersPath)[name].PasswordHash, "$argon2id$") {
			if time.Now().After(deadline) {
				t.Fatalf("%s's hash after a login = %q; want it rehashed to argon2id", name, harness.MustReadUsers(t, usersPath)[name].PasswordHash)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// alice's first login upgrades her pbkdf2 hash to the policy's.
	if r := loginReply("alice", "alice-pass-one"); r.Status != 200 {
		t.Fatalf("alice's login = %v; want 200", r)
	}
	waitRehashed("alice")
	upgraded := harness.MustReadUsers(t, usersPath)["alice"].PasswordHash

	// A dry run: everything the real run does, nothing written.
	before, err := os.ReadFile(usersPath)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(mustParseRedisURL(t, redisURL))
	defer client.Close()
	redisKeys := func() []string {
		k, err := client.Keys(context.Background(), prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keysBefore := len(redisKeys())
	wantUsers := harness.ImportTally{Imported: 1, Updated: 4}
	wantTokens := harness.ImportTally{Imported: 1, Updated: 1, Dead: 2, Skipped: 1}
	dryCode, stdout, dryErr := importDump(second, "--update", "--dry-run")
	wantSummary("the dry run of --update", stdout, true, wantUsers, wantTokens)
	if after, err := os.ReadFile(usersPath); err != nil || string(after) != string(before) {
		t.Errorf("the users file changed in a dry run (%v)", err)
	}
	if n := len(redisKeys()); n != keysBefore {
		t.Errorf("Redis holds %d keys after a dry run; want %d, as before", n, keysBefore)
	}

	code, stdout, stderr = importDump(second, "--update")
	wantSummary("import --update", stdout, false, wantUsers, wantTokens)
	if code != 1 || code != dryCode || stderr != dryErr || !strings.Contains(stderr, `updated user "dave" but its password: user import did not create it`) ||
		!strings.Contains(stderr, `skipped the token of "dave"`) {
		t.Errorf("import --update = exit %d, stderr:\n%s\nwant exit 1 (dave's key), dave reported, and the dry run's exit %d and stderr:\n%s", code, stderr, dryCode, dryErr)
	}
	got := harness.MustReadUsers(t, usersPath)
	if got["alice"].PasswordHash != upgraded || got["alice"].Name != "Alice B" {
		t.Errorf("alice after --update: hash %q, name %q; want the upgraded hash kept (%q), the name updated", got["alice"].PasswordHash, got["alice"].Name, upgraded)
	}
	if raw, _ := os.ReadFile(usersPath); strings.Contains(string(raw), bobNewHash[strings.LastIndexByte(bobNewHash, '$')+1:]) {
		t.Errorf("the users file holds bob's new md5 digest; want it wrapped")
	}
	if got["dave"].Name != "Dave D" || !got["carol"].Disabled {
		t.Errorf("dave's name %q, carol disabled %v; want Dave D, true", got["dave"].Name, got["carol"].Disabled)
	}
	waitStatus(t, "bob's login with his new Django password", 200, func() harness.Reply { return loginReply("bob", "bob-pass-two") })
	for _, tt := range []struct {
		what string
		want int
		do   func() harness.Reply
	}{
		{"alice's login", 200, func() harness.Reply { return loginReply("alice", "alice-pass-one") }},
		{"bob's login with his old password", 401, func() harness.Reply { return loginReply("bob", "bob-pass-one") }},
		{"dave's login with his authsvc password", 200, func() harness.Reply { return loginReply("dave", "dave-authsvc-pw") }},
		{"erin's login", 200, func() harness.Reply { return loginReply("erin", "erin-pass-one") }},
		{"info with alice's key", 200, info("alice")},
		{"info with bob's key", 401, info("bob")},
		{"info with carol's key", 401, info("carol")},
		{"info with dave's key", 401, info("dave")},
		{"info with erin's key", 200, info("erin")},
	} {
		waitStatus(t, tt.what, tt.want, tt.do)
	}
	// bob's and erin's logins rehashed their Django hashes: those writes
	// land now, not while the file is compared around the imports below.
	waitRehashed("bob")
	waitRehashed("erin")

	// Again: nothing to change, and the dead keys stay dead.
	code, stdout, _ = importDump(second, "--update")
	wantSummary("import --update again", stdout, false, harness.ImportTally{Unchanged: 5}, harness.ImportTally{Updated: 2, Dead: 2, Skipped: 1})
	if code != 1 {
		t.Errorf("import --update again = exit %d; want 1 (dave's key)", code)
	}
	waitStatus(t, "info with bob's key after a third import", 401, info("bob"))

	// Without the key the users were imported under: refused, nothing written.
	if err := os.Rename(filepath.Join(dir, "authsvc.key"), filepath.Join(dir, "kept.key")); err != nil {
		t.Fatal(err)
	}
	before, _ = os.ReadFile(usersPath)
	code, _, stderr = importDump(second, "--update")
	if code != 1 || !strings.Contains(stderr, "authsvc.key does not exist, and the users were imported under key") {
		t.Errorf("import --update without its key = exit %d, %q; want 1, the missing key named", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "authsvc.key")); err == nil {
		t.Errorf("import --update without its key created a new key file")
	}
	if after, _ := os.ReadFile(usersPath); string(after) != string(before) {
		t.Errorf("import --update without its key changed the users file")
	}
	// Under another key: refused, nothing written.
	other, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := secret.Write(filepath.Join(dir, "other.key"), other); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = importDump(second, "--update", "--secret-key-file", filepath.Join(dir, "other.key"))
	if code != 1 || !strings.Contains(stderr, "the users were imported under secret key") {
		t.Errorf("import --update under another key = exit %d, %q; want 1, the keys named", code, stderr)
	}
	if after, _ := os.ReadFile(usersPath); string(after) != string(before) {
		t.Errorf("import --update under another key changed the users file")
	}
	code, _, stderr = importDump(second, "--update", "--secret-key-file", filepath.Join(dir, "kept.key"))
	if code != 1 || strings.Contains(stderr, "secret key") {
		t.Errorf("import --update --secret-key-file kept.key = exit %d, %q; want 1 (dave's key alone)", code, stderr)
	}
}
