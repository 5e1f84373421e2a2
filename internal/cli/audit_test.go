package cli

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"authsvc/internal/httpapi"
	"authsvc/internal/secret"
	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// TestAuditThrottleLimitRedis: with the throttle in Redis, the audit line
// of a throttled attempt names every limit that refused it.
func TestAuditThrottleLimitRedis(t *testing.T) {
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(path)
	cfg.store, cfg.storePrefix = redisURL, testservers.UniquePrefix()
	cfg.throttle.UserFailures, cfg.throttle.AddrRate, cfg.throttle.AddrBurst = 5, 0.01, 5
	var logged servertest.SyncBuffer
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	d, closeDeps, err := buildDeps(cfg, slog.New(slog.NewTextHandler(&logged, nil)), withSecretKeys(secret.NewKeyring(key)))
	t.Cleanup(closeDeps)
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.NewServer(d)
	login := func(password string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/api/auth/login/", strings.NewReader(`{"username":"alice","password":"`+password+`"}`))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(w, r)
		return w.Code
	}
	for range 5 {
		login("wrong")
	}
	logged.Take()
	if code := login("alice-pw"); code != http.StatusTooManyRequests {
		t.Fatalf("login after 5 wrong passwords = %d; want 429", code)
	}
	if line := regexp.MustCompile(`msg=login outcome=throttled .*`).FindString(logged.Take()); !strings.HasSuffix(line, " limit=pair,user,client") {
		t.Errorf("audit line = %q; want it to end limit=pair,user,client", line)
	}
}

// TestAuditLineBeforeReply: serve writes a login's audit line to stderr
// before it sends the reply, though other log lines are batched (up to
// 100 ms late): a process killed right after replying has logged the
// attempt (issue 19, point 8).
func TestAuditLineBeforeReply(t *testing.T) {
	t.Parallel()
	base, log, stop := startServer(t, nil, "--users", writeTestUsers(t), "--cost", "4")
	defer stop()
	for i, pw := range []string{"alice-pw", "wrong", "alice-pw"} {
		resp, body := servertest.PostJSON(t, base+"/api/auth/login/", `{"username":"alice","password":"`+pw+`"}`)
		want := map[string]string{"alice-pw": "success", "wrong": "invalid_credentials"}[pw]
		if n := strings.Count(log.String(), "msg=login outcome="+want); n < 1+i/2 {
			t.Errorf("login %d (%d %s): stderr when the reply arrived holds %d audit lines with outcome=%s; want it written before the reply", i, resp.StatusCode, body, n, want)
		}
	}
}
