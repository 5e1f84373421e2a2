package faults

import (
	"authsvc/integration/harness"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/cli"
	"authsvc/internal/testservers"
)

// TestStoreSentinelURLUsage: a malformed redis+sentinel:// URL is a usage
// error (exit 2) of serve and of user import alike, one line naming what
// is wrong, quoting neither password.
func TestStoreSentinelURLUsage(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	const pw, sentPW = "Store-Secret-3", "Sentinel-Secret-4"
	usersPath := harness.WriteTestUsers(t)
	for _, tc := range []struct{ url, want string }{
		{"redis+sentinel://u:" + pw + "@127.0.0.1:26379?sentinel_password=" + sentPW, "no master name"},
		{"redis+sentinel://u:" + pw + "@/mymaster", "no sentinel addresses"},
		{"rediss+sentinel://u:" + pw + "@127.0.0.1:port/mymaster", `port "port" is not a number`},
		{"redis+sentinel://u:" + pw + "@127.0.0.1:26379/mymaster/db1", `database "db1" is not a number`},
		{"redis+sentinel://u:" + pw + "@127.0.0.1:26379/mymaster?password=" + sentPW, `unknown query parameter "password"`},
	} {
		for _, cmd := range [][]string{
			{"serve", "--addr", "127.0.0.1:0", "--users", usersPath, "--store", tc.url},
			{"user", "import", "--users", filepath.Join(t.TempDir(), "users.json"), "--from", "django", "--store", tc.url, harness.Django42Fixture},
		} {
			// user import may first say it created a secret key file.
			code, _, stderr := harness.RunCLI(t, "", nil, cmd...)
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			last := lines[len(lines)-1]
			if code != 2 || !strings.Contains(last, "--store: ") || !strings.Contains(last, tc.want) ||
				strings.Contains(stderr, pw) || strings.Contains(stderr, sentPW) {
				t.Errorf("%s %s --store %s = exit %d, %q; want exit 2, a last line naming %q, no password", cmd[0], cmd[1], tc.url, code, stderr, tc.want)
			}
		}
	}
	// A cluster has only database 0: a path is a usage error, not ignored.
	code, _, stderr := harness.RunCLI(t, "", nil, "serve", "--addr", "127.0.0.1:0", "--users", usersPath, "--store", "redis+cluster://u:"+pw+"@h:1/1")
	if code != 2 || !strings.Contains(stderr, "--store: ") || strings.Contains(stderr, pw) {
		t.Errorf("serve --store redis+cluster://…/1 = exit %d, %q; want exit 2 naming --store, no password", code, stderr)
	}
	// A brace in the prefix would move the cluster keys' hash tags.
	code, _, stderr = harness.RunCLI(t, "", nil, "serve", "--addr", "127.0.0.1:0", "--users", usersPath, "--store", "redis+cluster://u:"+pw+"@h:1", "--store-prefix", "a{b}:")
	if code != 2 || !strings.Contains(stderr, "--store-prefix") || strings.Contains(stderr, pw) {
		t.Errorf("serve --store redis+cluster://… --store-prefix a{b}: = exit %d, %q; want exit 2 naming --store-prefix, no password", code, stderr)
	}
}

// TestImportDjangoTokensSentinel: user import --store redis+sentinel://
// puts the fixture's DRF keys on the Sentinel-managed primary, where a
// server on the same URL finds them; and, the primary killed and its
// replica promoted, it still does.
func TestImportDjangoTokensSentinel(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	g := testservers.Sentinel(t)
	prefix := testservers.UniquePrefix()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	code, stdout, stderr := harness.RunCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "django", "--store", g.URL, "--store-prefix", prefix, harness.Django42Fixture)
	if code != 1 { // bill's record and adi's device are skipped, as in TestImportDjangoTokens
		t.Errorf("user import --store %s = exit %d, stderr:\n%s\nwant exit 1", g.URL, code, stderr)
	}
	harness.WantTokenTally(t, "user import --store redis+sentinel://", stdout, false, harness.ImportTally{Imported: 15, Skipped: 1})

	base, _, stop := harness.StartServer(t, nil, "--cost", "4", "--users", usersPath, "--store", g.URL, "--store-prefix", prefix)
	defer stop()
	ada := harness.Django42Tokens["ada"]
	if r := harness.Do(t, "GET", base+"/api/auth/info", ada, ""); r.Status != 200 || !strings.Contains(r.Body, `"username":"ada"`) {
		t.Fatalf("info with ada's imported DRF key = %v; want 200 as ada", r)
	}
	old := g.KillPrimary()
	if addr, _ := g.WaitForNewPrimary(old, time.Minute); addr == "" {
		t.FailNow()
	}
	healed := false
	for range 200 { // 10 s, API.md's bound from the promotion
		r := harness.Do(t, "GET", base+"/api/auth/info", ada, "")
		if r.Status == 200 {
			healed = true
			break
		}
		if r.Status != 503 {
			t.Fatalf("info with ada's DRF key after the kill = %v; want 503 until the failover, then 200", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !healed {
		t.Errorf("info with ada's DRF key: no 200 within 10 s of the promotion; want service back, ada's key kept")
	}
}

// TestServeStopsOnUnknownSentinelMaster: a master name the sentinels do
// not monitor names what does not exist (API.md, Operations: start-up):
// serve stops at once with one line naming it, instead of waiting with
// /readyz 503 for a primary that will never come.
func TestServeStopsOnUnknownSentinelMaster(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	g := testservers.Sentinel(t)
	url := strings.Replace(g.URL, "/"+testservers.SentinelMaster+"/", "/nosuchmaster/", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cli.Run(ctx, []string{"authsvc", "serve", "--addr", "127.0.0.1:0", "--users", harness.WriteTestUsers(t), "--store", url}, func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("serve --store %s = %v (timed out %v); want it to stop at once with an error", url, err, ctx.Err() != nil)
	}
	var line strings.Builder
	code := cli.ExitStatus(err, &line)
	if code != 1 || strings.Count(line.String(), "\n") != 1 || !strings.Contains(line.String(), `refuses its configuration: the sentinels monitor no master named "nosuchmaster"`) {
		t.Errorf("serve --store %s: exit %d, %q; want exit 1, one line saying the sentinels monitor no such master", url, code, line.String())
	}
}
