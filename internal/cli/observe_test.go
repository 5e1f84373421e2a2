package cli

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
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

// TestMetricsAddrFlag: serve checks --metrics-addr (or
// AUTHSVC_METRICS_ADDR) before it opens anything: a value that is not
// host:port with a port number, or that is --addr's, stops it with one
// usage line (exit 2) and no users file made.
func TestMetricsAddrFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		value string
		env   bool // given as AUTHSVC_METRICS_ADDR, not as the flag
	}{
		{"localhost", false},
		{"9090", false},
		{"127.0.0.1:", false},
		{"127.0.0.1:http", false},
		{"127.0.0.1:65536", false},
		{"127.0.0.1:-1", false},
		{"[::1:9090", false},
		{"127.0.0.1:9090/metrics", false},
		{"127.0.0.1:18080", false}, // --addr's
		{"metrics.internal", true},
	} {
		dir := t.TempDir()
		env := map[string]string{"AUTHSVC_USERS": filepath.Join(dir, "users.json")}
		args := []string{"serve", "--addr", "127.0.0.1:18080"}
		if c.env {
			env["AUTHSVC_METRICS_ADDR"] = c.value
		} else {
			args = append(args, "--metrics-addr", c.value)
		}
		// Bounded: a serve that took the value would run until cancelled.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		var errOut strings.Builder
		code := ExitStatus(Run(ctx, append([]string{"authsvc"}, args...), func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, &errOut), &errOut)
		cancel()
		stderr := errOut.String()
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "authsvc: serve: --metrics-addr ") {
			t.Errorf("serve --metrics-addr %q (env %v) = exit %d, stderr %q; want exit 2 and one line naming --metrics-addr", c.value, c.env, code, stderr)
		}
		if _, err := os.Stat(env["AUTHSVC_USERS"]); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("serve --metrics-addr %q made the users file (%v); want nothing made before the flags are checked", c.value, err)
		}
	}
	for _, ok := range []string{"127.0.0.1:9090", ":9090", "[::1]:9090", "localhost:9090", "127.0.0.1:0"} {
		c, err := parseServeFlags([]string{"--metrics-addr", ok}, func(string) string { return "" }, io.Discard)
		if err != nil || c.metricsAddr != ok {
			t.Errorf("parseServeFlags(--metrics-addr %s) = %q, %v; want it, nil", ok, c.metricsAddr, err)
		}
	}
}

// publicSeries returns the series of a /metrics body that requests can
// move, by name and labels: the Go runtime's and the process's figures,
// request times (the buckets and sums of the durations) and /metrics's own
// route, which move whoever is asked for, are left out.
func publicSeries(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d; want 200", url, resp.StatusCode)
	}
	series := make(map[string]string)
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "authsvc_go_") || strings.HasPrefix(line, "authsvc_process_") ||
			strings.HasPrefix(line, "authsvc_http_request_duration_seconds_bucket") || strings.HasPrefix(line, "authsvc_http_request_duration_seconds_sum") ||
			strings.Contains(line, `route="/metrics"`) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series[line[:i]] = line[i+1:]
	}
	return series
}

// seriesMoved lists how each series moved from before to after, sorted,
// as "series +delta"; the ones that did not move are left out.
func seriesMoved(t *testing.T, before, after map[string]string) []string {
	t.Helper()
	value := func(s string) float64 {
		if s == "" {
			return 0 // not served yet: a labelled series appears at its first event
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("a /metrics value %q: %v", s, err)
		}
		return v
	}
	var moved []string
	for k := range after {
		if d := value(after[k]) - value(before[k]); d != 0 {
			moved = append(moved, k+" +"+strconv.FormatFloat(d, 'g', -1, 64))
		}
	}
	for k, v := range before {
		if _, ok := after[k]; !ok {
			moved = append(moved, k+" "+v+" → gone")
		}
	}
	slices.Sort(moved)
	return moved
}

// resetMailUsers are the test users, each of alice, dave and erin with an
// address of their own.
func resetMailUsers(t *testing.T) string {
	t.Helper()
	us := servertest.TestUsers(t) // alice@example.com, bob without an address, carol disabled
	for _, name := range []string{"dave", "erin"} {
		u := us[0]
		u.Username, u.Email = name, name+"@example.com"
		us = append(us, u)
	}
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, us); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMetricsNameNoUserOverSMTP: the whole program, mailing through a
// real SMTP server, without --metrics-addr. A reset request for a user
// with an address, and one for an address of no one, move the API
// listener's /metrics alike, the mail sent included (API.md,
// Operations: /metrics on --addr leaves the mail delivery counters out).
func TestMetricsNameNoUserOverSMTP(t *testing.T) {
	t.Parallel()
	smtp := testservers.SMTP(t, testservers.SMTPOptions{})
	base, log, stop := startServer(t, nil, "--users", resetMailUsers(t),
		"--smtp-url", "smtp://127.0.0.1:"+smtp.Port+"?starttls=false", "--mail-from", "authsvc@example.com")
	defer stop()
	sent := regexp.MustCompile(`msg="password reset mail sent"`)
	// Requests are served in order, outside the requests: each phase ends
	// with one for dave, whose mail, once sent, says that the phase's
	// first request has been served too.
	phase := func(email string, mails int) []string {
		t.Helper()
		before := publicSeries(t, base+"/metrics")
		for _, e := range []string{email, "dave@example.com"} {
			if resp, body := servertest.PostJSON(t, base+"/api/auth/password/reset/", `{"email":"`+e+`"}`); resp.StatusCode != 204 {
				t.Fatalf("reset request for %s = %d %s; want 204", e, resp.StatusCode, body)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); len(sent.FindAllString(log.String(), -1)) < mails; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d mails sent within 10 s; want %d\n%s", len(sent.FindAllString(log.String(), -1)), mails, log)
			}
		}
		return seriesMoved(t, before, publicSeries(t, base+"/metrics"))
	}
	known := phase("alice@example.com", 2)
	unknown := phase("nobody@example.com", 3)
	if got, want := strings.Join(unknown, "\n"), strings.Join(known, "\n"); got != want {
		t.Errorf("/metrics moved, on a request for no one's address, by\n%s\nwant as on one for alice's:\n%s", got, want)
	}
	if n := len(smtp.Messages(t)); n != 3 {
		t.Errorf("the SMTP server got %d mails; want 3 (alice, dave twice)", n)
	}
}

// TestMetricsAddrMailCounters: with --metrics-addr, the metrics listener
// serves every metric, the mail delivery counters included, and /metrics
// on --addr is 404; the listener stops with the server.
func TestMetricsAddrMailCounters(t *testing.T) {
	t.Parallel()
	smtp := testservers.SMTP(t, testservers.SMTPOptions{})
	base, log, stop := startServer(t, nil, "--users", resetMailUsers(t), "--metrics-addr", "127.0.0.1:0",
		"--smtp-url", "smtp://127.0.0.1:"+smtp.Port+"?starttls=false", "--mail-from", "authsvc@example.com")
	metrics := "http://" + log.WaitFor(t, regexp.MustCompile(`msg="metrics listening" addr=(\S+)`))[1] + "/metrics"
	if resp, body := servertest.PostJSON(t, base+"/api/auth/password/reset/", `{"email":"alice@example.com"}`); resp.StatusCode != 204 {
		t.Fatalf("reset request = %d %s; want 204", resp.StatusCode, body)
	}
	log.WaitFor(t, regexp.MustCompile(`msg="password reset mail sent" username=alice`))
	if got := publicSeries(t, metrics)[`authsvc_reset_mail_total{outcome="sent"}`]; got != "1" {
		t.Errorf(`authsvc_reset_mail_total{outcome="sent"} on --metrics-addr = %q; want 1`, got)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /metrics on --addr with --metrics-addr = %d; want 404", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Errorf("run = %v; want nil", err)
	}
	if resp, err := http.Get(metrics); err == nil {
		resp.Body.Close()
		t.Errorf("GET /metrics on --metrics-addr after shutdown = %d; want the connection refused", resp.StatusCode)
	}
}
