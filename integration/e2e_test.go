//go:build e2e

package integration

// The browser end-to-end test: `make e2e` (go test -tags e2e -run Browser).
// authsvc runs in-process, testdata/e2e/page.html is served from another
// 127.0.0.1 port (another origin), and headless Chromium loads the page,
// whose script logs in, shows the user's info, logs out, and writes the
// outcome into <pre id="result">; --dump-dom prints the DOM once the
// page's fetches are done (virtual time waits for pending network), and
// the test reads the result from it.

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"bytes"
	"context"
	"errors"
	"html"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const chromiumPath = "/usr/bin/chromium"

// requireChromium skips the test when Chromium is missing, unless
// AUTHSVC_REQUIRE_E2E=1 (make e2e, CI) makes that a failure.
func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("AUTHSVC_REQUIRE_E2E") == "1" {
			t.Fatalf("AUTHSVC_REQUIRE_E2E=1 but %v (apt-get install chromium)", err)
		}
		t.Skipf("no browser: %v (set AUTHSVC_REQUIRE_E2E=1 to fail instead)", err)
	}
}

// servePage serves testdata/e2e/page.html on its own 127.0.0.1 port and
// returns the page's origin.
func servePage(t *testing.T) string {
	t.Helper()
	page, err := os.ReadFile(harness.FromRoot("testdata/e2e/page.html"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(page)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// runChromium loads pageURL in headless Chromium and returns the DOM it
// dumps and its stderr. Chromium runs in its own process group, which is
// killed when it is done or after 60 s; its profile and config are in a
// temporary directory, by which the crash handler, which leaves the group,
// is found and killed too. No browser process outlives it.
func runChromium(t *testing.T, pageURL string) (dom, stderr string) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumPath,
		"--headless",
		"--no-sandbox",
		"--disable-gpu",
		"--disable-breakpad",
		"--disable-crash-reporter",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--disable-extensions",
		"--disable-dev-shm-usage",
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-quic",
		"--enable-logging=stderr",
		"--user-data-dir="+filepath.Join(home, "profile"),
		"--virtual-time-budget=10000",
		"--dump-dom",
		pageURL,
	)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(home, "config"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	// Whatever happened, leave no helper (zygote, renderer) behind.
	if kerr := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
		t.Errorf("kill chromium's process group: %v", kerr)
	}
	killUsing(t, home)
	if ctx.Err() != nil {
		t.Fatalf("chromium did not finish within 60s; stderr:\n%s", errOut.String())
	}
	if err != nil {
		t.Fatalf("chromium: %v; stderr:\n%s", err, errOut.String())
	}
	return out.String(), errOut.String()
}

// killUsing kills every process whose command line names dir.
func killUsing(t *testing.T, dir string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill %d (%s): %v", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), err)
		}
	}
}

var resultRE = regexp.MustCompile(`<pre id="result">([^<]*)</pre>`)

// browse has Chromium load the page from pageOrigin against authsvc at
// base, and returns the page's result line and Chromium's stderr.
func browse(t *testing.T, pageOrigin, base string) (result, stderr string) {
	t.Helper()
	dom, stderr := runChromium(t, pageOrigin+"/?api="+url.QueryEscape(base))
	m := resultRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no <pre id=result> in the dumped DOM:\n%s\nstderr:\n%s", dom, stderr)
	}
	return html.UnescapeString(m[1]), stderr
}

// console returns the page's console messages from Chromium's stderr, or
// all of stderr when there are none (Chromium also logs much D-Bus noise).
func console(stderr string) string {
	var lines []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, ":CONSOLE") {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return stderr
	}
	return strings.Join(lines, "\n")
}

// accessLines returns authsvc's access-log lines for method and path.
func accessLines(log *servertest.LineLog, method, path string) []string {
	var lines []string
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(line, "msg=request ") && strings.Contains(line, " method="+method+" ") && strings.Contains(line, " path="+path+" ") {
			lines = append(lines, line)
		}
	}
	return lines
}

// TestBrowserCORS: a page from an allowed origin logs in, reads the user's
// info and logs out in a real browser; from any other origin, or with
// CORS off, the browser refuses the page at the preflight and authsvc
// never sees the login or the info request.
func TestBrowserCORS(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	requireChromium(t)
	users := harness.WriteTestUsers(t)

	t.Run("allowed", func(t *testing.T) {
		page := servePage(t)
		base, log, stop := harness.StartServer(t, nil, "--users", users, "--cors-origin", page)
		result, stderr := browse(t, page, base)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := "OK alice Alice alice@example.com request-id=yes logout=204 after=401"
		if result != want {
			t.Fatalf("page shows %q; want %q\nauthsvc log:\n%s\npage console:\n%s", result, want, log, console(stderr))
		}
		for _, c := range []struct{ method, path, status string }{
			{"OPTIONS", "/api/auth/login/", "204"}, // the preflights the browser sent
			{"OPTIONS", "/api/auth/info", "204"},
			{"POST", "/api/auth/login/", "200"},
			{"GET", "/api/auth/info", "200"},
			{"POST", "/api/auth/logout/", "204"},
			{"GET", "/api/auth/info", "401"},
		} {
			found := false
			for _, line := range accessLines(log, c.method, c.path) {
				found = found || strings.Contains(line, " status="+c.status+" ")
			}
			if !found {
				t.Errorf("authsvc logged no %s %s with status %s; log:\n%s", c.method, c.path, c.status, log)
			}
		}
	})

	// blocked runs the page against authsvc started with the flags that
	// corsArgs gives for the page's origin.
	blocked := func(t *testing.T, corsArgs func(page string) []string) {
		page := servePage(t)
		base, log, stop := harness.StartServer(t, nil, append([]string{"--users", users}, corsArgs(page)...)...)
		result, stderr := browse(t, page, base)
		if err := stop(); err != nil { // every request authsvc got is logged now
			t.Fatal(err)
		}
		if want := "BLOCKED login: TypeError: Failed to fetch"; result != want {
			t.Fatalf("page shows %q; want %q\nauthsvc log:\n%s\npage console:\n%s", result, want, log, console(stderr))
		}
		// The browser reached authsvc and was refused by CORS, not by the network.
		if len(accessLines(log, "OPTIONS", "/api/auth/login/")) == 0 {
			t.Errorf("authsvc logged no preflight for the login; log:\n%s", log)
		}
		if !strings.Contains(stderr, "blocked by CORS policy") {
			t.Errorf("chromium reported no CORS refusal; page console:\n%s", console(stderr))
		}
		if lines := append(accessLines(log, "POST", "/api/auth/login/"), accessLines(log, "GET", "/api/auth/info")...); len(lines) > 0 {
			t.Errorf("authsvc served the blocked page's requests:\n%s", strings.Join(lines, "\n"))
		}
	}
	t.Run("other-origin", func(t *testing.T) {
		// The page's port under another host name, and an unrelated
		// origin: origins match exactly, never loosely.
		blocked(t, func(page string) []string {
			return []string{"--cors-origin", "https://app.example.com", "--cors-origin", strings.Replace(page, "127.0.0.1", "localhost", 1)}
		})
	})
	t.Run("cors-off", func(t *testing.T) {
		blocked(t, func(string) []string { return nil })
	})
}
