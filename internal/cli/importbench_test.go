package cli

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// benchDjangoPassword is every user's password in makeDjangoDump's dumps.
const benchDjangoPassword = "switch-over-day-2026"

// makeDjangoDump returns a dumpdata file of n Django users (bench0000001
// …), each with a DRF key, and their keys. The hashes are real
// pbkdf2_sha256 hashes of benchDjangoPassword at Django 4.2's 600,000
// iterations; four of them, reused round-robin, so that a dump of 100,000
// users takes a second to make, not hours.
func makeDjangoDump(tb testing.TB, n int) ([]byte, []string) {
	tb.Helper()
	var hashes [4]string
	for i := range hashes {
		salt := fmt.Sprintf("benchsalt%d", i)
		dk, err := pbkdf2.Key(sha256.New, benchDjangoPassword, []byte(salt), 600_000, 32)
		if err != nil {
			tb.Fatal(err)
		}
		hashes[i] = "pbkdf2_sha256$600000$" + salt + "$" + base64.StdEncoding.EncodeToString(dk)
	}
	var b bytes.Buffer
	keys := make([]string, n)
	b.WriteString("[")
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		name := fmt.Sprintf("bench%07d", i+1)
		var raw [20]byte
		rand.Read(raw[:])
		keys[i] = hex.EncodeToString(raw[:])
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"model": "auth.user", "pk": %d, "fields": {"password": %q, "last_login": null, "is_superuser": false, "username": %q, "first_name": "Bench", "last_name": %q, "email": "%s@example.com", "is_staff": false, "is_active": true, "date_joined": "2024-01-01T00:00:00Z", "groups": [], "user_permissions": []}},`+"\n",
			i+1, hashes[i%len(hashes)], name, strconv.Itoa(i+1), name)
		fmt.Fprintf(&b, `{"model": "authtoken.token", "pk": %q, "fields": {"user": [%q], "created": %q}}`,
			keys[i], name, created.Add(time.Duration(i)*time.Second).Format("2006-01-02T15:04:05.000Z"))
	}
	b.WriteString("]\n")
	return b.Bytes(), keys
}

// BenchmarkDjangoImport100k is the switch-over's import at scale (issue
// 20): 100,000 pbkdf2_sha256 users with one DRF key each, from a dumpdata
// file into a new PostgreSQL database and Redis, through `authsvc user
// import` in-process, then the same dump again with --update (every user
// unchanged, every key refreshed). make bench runs it once
// (-test.benchtime 1x) and reports the wall time of each command.
func BenchmarkDjangoImport100k(b *testing.B) {
	const n = 100_000
	dump, _ := makeDjangoDump(b, n)
	dir := b.TempDir()
	dumpPath := filepath.Join(dir, "dump.json")
	if err := os.WriteFile(dumpPath, dump, 0o600); err != nil {
		b.Fatal(err)
	}
	pgURL, _, _ := testservers.Postgres(b)
	redisURL, _, _ := testservers.Redis(b)
	keyPath := filepath.Join(dir, "authsvc.key")
	var took, again time.Duration
	for b.Loop() {
		b.StopTimer()
		db := testservers.NewDatabase(b, pgURL)
		prefix := testservers.UniquePrefix()
		b.StartTimer()
		start := time.Now()
		code, stdout, stderr := runCLIProgram(b, "", "user", "import", "--users", db, "--from", "django", "--store", redisURL,
			"--store-prefix", prefix, "--secret-key-file", keyPath, dumpPath)
		took += time.Since(start)
		b.StopTimer()
		_, u, k, ok := importSummary(stdout)
		if code != 0 || !ok || u.imported != n || k.imported != n {
			b.Fatalf("user import = exit %d, %q, %q; want 0, %d users and tokens", code, stdout, stderr, n)
		}
		// The nightly run before the switch-over: the same dump again, with
		// --update, every user unchanged and every key refreshed.
		start = time.Now()
		code, stdout, stderr = runCLIProgram(b, "", "user", "import", "--update", "--users", db, "--from", "django", "--store", redisURL,
			"--store-prefix", prefix, "--secret-key-file", keyPath, dumpPath)
		again += time.Since(start)
		_, u, k, ok = importSummary(stdout)
		if code != 0 || !ok || u.unchanged != n || k.updated != n {
			b.Fatalf("user import --update again = exit %d, %q, %q; want 0, %d users unchanged and tokens refreshed", code, stdout, stderr, n)
		}
		b.StartTimer()
	}
	b.ReportMetric(took.Seconds()/float64(b.N), "s/import")
	b.ReportMetric(float64(n)*float64(b.N)/took.Seconds(), "users/s")
	b.ReportMetric(again.Seconds()/float64(b.N), "s/update-again")
}
