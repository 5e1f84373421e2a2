package cli

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"authsvc/internal/servertest"
	"authsvc/internal/users/usersfile"
)

func TestNormalizeOrigins(t *testing.T) {
	t.Parallel()
	got, err := normalizeOrigins([]string{"https://app.example.com/", "http://127.0.0.1:3000,http://localhost:8000"})
	if err != nil || strings.Join(got, " ") != "https://app.example.com http://127.0.0.1:3000 http://localhost:8000" {
		t.Errorf("normalizeOrigins = %q, %v", got, err)
	}
	for _, bad := range []string{"*", "app.example.com", "ftp://x", "https://x/path", "https://*.example.com"} {
		if _, err := normalizeOrigins([]string{bad}); err == nil {
			t.Errorf("normalizeOrigins(%q) = nil error; want a usage error", bad)
		}
	}
}

// TestMetricsAddr: with --metrics-addr, /metrics moves off the main listener.
func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	path := writeTestUsers(t)
	base, log, stop := startServer(t, nil, "--users", path, "--metrics-addr", "127.0.0.1:0")
	m := log.WaitFor(t, regexp.MustCompile(`msg="metrics listening" addr=(\S+)`))
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /metrics on the main listener = %d; want 404", resp.StatusCode)
	}
	resp, err = http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "authsvc_build_info") {
		t.Errorf("GET /metrics on --metrics-addr = %d; want 200 with authsvc_build_info", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Errorf("run = %v; want nil", err)
	}
}

// writeTestUsers writes testUsers to a users file in a temporary directory.
func writeTestUsers(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/users.json"
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNoAccessLog: --access-log=false drops the per-request line and keeps the audit line.
func TestNoAccessLog(t *testing.T) {
	t.Parallel()
	path := writeTestUsers(t)
	base, log, stop := startServer(t, nil, "--users", path, "--access-log=false")
	servertest.LoginToken(t, base, "alice", "alice-pw")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), `msg=login outcome=success username=alice`) {
		t.Errorf("log lacks the audit line:\n%s", log)
	}
	if strings.Contains(log.String(), "msg=request ") {
		t.Errorf("log has an access line with --access-log=false:\n%s", log)
	}
}
