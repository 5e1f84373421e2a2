package django

import (
	"authsvc/integration/harness"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"authsvc/internal/testservers"
)

// TestImportDjangoTokens (issue 20, point 1): user import --store redis://
// brings the fixture's DRF keys, and each one answers /info as its user,
// byte for byte, through the Redis store: created at DRF's created time,
// expiring --token-ttl after the import, listed among the user's
// sessions. The memory store skips them, reported; a dry run writes no key.
func TestImportDjangoTokens(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	prefix := testservers.UniquePrefix()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	importArgs := func(extra ...string) []string {
		return append([]string{"user", "import", "--users", usersPath, "--from", "django", "--store", redisURL, "--store-prefix", prefix}, append(extra, harness.Django42Fixture)...)
	}
	code, stdout, stderr := harness.RunCLI(t, "", nil, importArgs("--token-ttl", "2h")...)
	// bill (crypt) is refused, and his key with him; adi's device is unconfirmed.
	if code != 1 || strings.Count(stderr, "\n") != 6 || !strings.Contains(stderr, "created the users file "+usersPath) || !strings.Contains(stderr, `record 47 (otp_totp.totpdevice of "adi"): an unconfirmed device`) || !strings.Contains(stderr, `record 38 (authtoken.token): its user is not imported`) {
		t.Errorf("user import = exit %d, stderr:\n%s\nwant exit 1, bill's record and key and adi's device skipped", code, stderr)
	}
	if strings.Contains(stderr, harness.Django42Tokens["bill"]) || strings.Contains(stdout, harness.Django42Tokens["bill"]) {
		t.Errorf("user import quoted a DRF key:\n%s%s", stdout, stderr)
	}
	harness.WantTokenTally(t, "user import", stdout, false, harness.ImportTally{Imported: 15, Skipped: 1})
	imported := time.Now()

	base, _, stop := harness.StartServer(t, nil, "--cost", "4", "--users", usersPath, "--store", redisURL, "--store-prefix", prefix)
	defer stop()
	for name, key := range harness.Django42Tokens {
		want := 200
		if name == "bill" || name == "margo" { // not imported; disabled
			want = 401
		}
		if r := harness.Do(t, "GET", base+"/api/auth/info", key, ""); r.Status != want || want == 200 && !strings.Contains(r.Body, `"username":"`+name+`"`) {
			t.Errorf("info with %s's DRF key = %v; want %d as %s", name, r, want, name)
		}
	}
	r := harness.Do(t, "GET", base+"/api/auth/sessions/", harness.Django42Tokens["ada"], "")
	var list struct {
		Sessions []struct {
			CreatedAt time.Time `json:"created_at"`
			ExpiresAt time.Time `json:"expires_at"`
			Current   bool
		}
	}
	if !strings.Contains(r.Body, `"expires_at":"`) || strings.Contains(r.Body, `.`) {
		t.Errorf("ada's sessions = %s; want times to the second (API.md)", r.Body)
	}
	if err := json.Unmarshal([]byte(r.Body), &list); err != nil || len(list.Sessions) != 1 {
		t.Fatalf("ada's sessions = %v (%v); want her imported key alone", r, err)
	}
	s := list.Sessions[0]
	created := time.Date(2026, 11, 24, 22, 16, 28, 0, time.UTC) // 28.634, in whole seconds
	if !s.CreatedAt.Equal(created) || !s.Current || s.ExpiresAt.Before(imported.Add(2*time.Hour-time.Minute)) || s.ExpiresAt.After(imported.Add(2*time.Hour+time.Second)) {
		t.Errorf("ada's imported session = %+v; want created %v (DRF's), current, expiring 2h after the import", s, created)
	}

	// Again without --update: every user is left alone, and so are their keys.
	code, stdout, _ = harness.RunCLI(t, "", nil, importArgs()...)
	harness.WantTokenTally(t, "user import again, without --update", stdout, false, harness.ImportTally{Skipped: 16})
	if code != 1 {
		t.Errorf("user import again = exit %d; want 1", code)
	}

	t.Run("dry run", func(t *testing.T) {
		other := testservers.UniquePrefix()
		path := filepath.Join(t.TempDir(), "users.json")
		code, stdout, _ := harness.RunCLI(t, "", nil, "user", "import", "--dry-run", "--users", path, "--from", "django", "--store", redisURL, "--store-prefix", other, harness.Django42Fixture)
		harness.WantTokenTally(t, "user import --dry-run", stdout, true, harness.ImportTally{Imported: 15, Skipped: 1})
		if code != 1 {
			t.Errorf("user import --dry-run = exit %d; want 1, as the real run", code)
		}
		client := redis.NewClient(mustParseRedisURL(t, redisURL))
		defer client.Close()
		if keys, err := client.Keys(context.Background(), other+"*").Result(); err != nil || len(keys) != 0 {
			t.Errorf("Redis keys under the dry run's prefix = %v, %v; want none", keys, err)
		}
	})
	t.Run("memory store", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "users.json")
		code, stdout, stderr := harness.RunCLI(t, "", nil, "user", "import", "--users", path, "--from", "django", harness.Django42Fixture)
		harness.WantTokenTally(t, "user import into the memory store", stdout, false, harness.ImportTally{Skipped: 16})
		if code != 1 || !strings.Contains(stderr, "skipped 15 tokens: the memory token store cannot keep them") {
			t.Errorf("user import into the memory store = exit %d, stderr:\n%s\nwant 1, the 15 keys reported skipped", code, stderr)
		}
	})
}

func mustParseRedisURL(t *testing.T, url string) *redis.Options {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return opt
}

// TestImportedTokensNeverExpire (issue 28, point 9): an imported DRF key
// never expires, as DRF keys never do, unless the import's own --token-ttl
// says so; AUTHSVC_TOKEN_TTL is serve's, and the import does not read it.
// Each import that lists a key sets its expiry anew: --token-ttl D after
// that import, or never.
func TestImportedTokensNeverExpire(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	prefix := testservers.UniquePrefix()
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	key := strings.Repeat("a7", 20)
	dump := harness.WriteDjangoDump(t, dir, "dump.json", harness.DjangoUserRecord{Username: "ann", Hash: harness.DjangoPBKDF2(t, "ann-pw", "salt"), First: "Ann", Active: true, Key: key, Created: "2025-06-01T09:00:00.000Z"})
	serveEnv := map[string]string{"AUTHSVC_TOKEN_TTL": "1h"} // serve's, in the import's environment too
	importKey := func(extra ...string) {
		t.Helper()
		args := append([]string{"user", "import", "--users", usersPath, "--from", "django", "--store", redisURL, "--store-prefix", prefix}, append(extra, dump)...)
		if code, stdout, stderr := harness.RunCLI(t, "", serveEnv, args...); code != 0 {
			t.Fatalf("authsvc %s = exit %d, %q, %q; want 0", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	var base string
	expiry := func(what string) *time.Time {
		t.Helper()
		r := harness.Do(t, "GET", base+"/api/auth/sessions/", key, "")
		var list struct {
			Sessions []struct {
				ExpiresAt *time.Time `json:"expires_at"`
			}
		}
		if err := json.Unmarshal([]byte(r.Body), &list); r.Status != 200 || err != nil || len(list.Sessions) != 1 {
			t.Fatalf("%s: ann's sessions = %v (%v); want 200, her imported key alone", what, r, err)
		}
		return list.Sessions[0].ExpiresAt
	}

	importKey()
	base, _, stop := harness.StartServer(t, serveEnv, "--cost", "4", "--users", usersPath, "--store", redisURL, "--store-prefix", prefix)
	defer stop()
	if e := expiry("after an import without --token-ttl"); e != nil {
		t.Errorf("imported without --token-ttl, under AUTHSVC_TOKEN_TTL=1h: expires_at %v; want null, never", e)
	}
	importKey("--update", "--token-ttl", "2h")
	at := time.Now()
	if e := expiry("after an import with --token-ttl 2h"); e == nil || e.Before(at.Add(2*time.Hour-time.Minute)) || e.After(at.Add(2*time.Hour+time.Second)) {
		t.Errorf("imported again with --token-ttl 2h: expires_at %v; want 2h after that import", e)
	}
	importKey("--update")
	if e := expiry("after a third import without --token-ttl"); e != nil {
		t.Errorf("imported a third time, without --token-ttl: expires_at %v; want null, as that latest import says", e)
	}
}
