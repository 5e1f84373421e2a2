package cli

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/servertest"
	"authsvc/internal/users/usersfile"
)

// TestUsageListsEveryServeFlag keeps --help and the serve flags in step, both ways.
func TestUsageListsEveryServeFlag(t *testing.T) {
	t.Parallel()
	var c serveConfig
	fs := serveFlagSet(&c)
	defined := make(map[string]bool)
	var help strings.Builder
	serveHelp.write(&help, flag.NewFlagSet("serve", flag.ContinueOnError), nil)
	text := help.String()
	fs.VisitAll(func(f *flag.Flag) {
		defined[f.Name] = true
		if _, ok := f.Value.(*deprecatedFlag); ok {
			return // a former name, kept out of --help
		}
		if !strings.Contains(text, "--"+f.Name+" ") {
			t.Errorf("usage does not list serve flag --%s", f.Name)
		}
	})
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z-]+)`).FindAllStringSubmatch(text, -1) {
		if !defined[m[1]] {
			t.Errorf("usage lists --%s, which serve does not define", m[1])
		}
	}
}

// TestREADMEFlagTable keeps the README's table of server flags and
// serveSettings in step: every row's flag, default and variable, both ways.
func TestREADMEFlagTable(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := make(map[string][2]string) // flag → default, variable
	row := regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\| ([^|]+) \\| `(AUTHSVC_[A-Z_]+)`[^|]* \\|")
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = [2]string{strings.Trim(strings.TrimSpace(m[2]), "`"), m[3]}
	}
	for _, s := range serveSettings() {
		got, ok := rows[s.name]
		if !ok {
			t.Errorf("README's flag table lacks --%s", s.name)
			continue
		}
		delete(rows, s.name)
		if want := [2]string{s.defaultText(), envName(s.name)}; got != want {
			t.Errorf("README row --%s = default %q, variable %s; want %q, %s", s.name, got[0], got[1], want[0], want[1])
		}
	}
	for name := range rows {
		t.Errorf("README's flag table lists --%s, which is no serve setting", name)
	}
}

func TestParseServeFlags(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AUTHSVC_TOKEN_TTL": "1h", "AUTHSVC_TRUSTED_PROXY": "10.0.0.0/8,192.0.2.1", "AUTHSVC_LOGIN_FAILURES": "7"}
	getenv := func(k string) string { return env[k] }
	c, err := parseServeFlags([]string{"--login-failures", "3", "--cors-origin", "https://a.example"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.tokenTTL != time.Hour || c.throttle.PairFailures != 3 || len(c.trustedProxies) != 2 || len(c.corsOrigins) != 1 {
		t.Errorf("parseServeFlags = ttl %v, failures %d, proxies %v, origins %v; want 1h (env), 3 (flag wins), 2 proxies (env), 1 origin",
			c.tokenTTL, c.throttle.PairFailures, c.trustedProxies, c.corsOrigins)
	}
	c, err = parseServeFlags([]string{"--trusted-proxy", "127.0.0.1"}, getenv, io.Discard)
	if err != nil || len(c.trustedProxies) != 1 || c.trustedProxies[0].String() != "127.0.0.1/32" {
		t.Errorf("--trusted-proxy on the command line with AUTHSVC_TRUSTED_PROXY set = %v, %v; want only the flag's proxy", c.trustedProxies, err)
	}
	for _, args := range [][]string{
		{"--token-ttl", "-1s"}, {"--log-format", "xml"}, {"--login-rate", "0"}, {"--password-slots", "0"},
		{"--refusal-delay", "-1s"}, {"--hash-worker-idle", "-1s"}, {"--trusted-proxy", "nonsense"}, {"--cors-origin", "*"}, {"extra"},
	} {
		if _, err := parseServeFlags(args, getenv, io.Discard); err == nil {
			t.Errorf("parseServeFlags(%q) = nil error; want a usage error", args)
		} else if _, ok := err.(*usageError); !ok {
			t.Errorf("parseServeFlags(%q) = %v; want a *usageError (exit 2)", args, err)
		}
	}
}

// TestServeMaxConns: with --max-conns 4 and four idle keep-alive
// connections open, a new client is still served, and an idle one is shed.
func TestServeMaxConns(t *testing.T) {
	t.Parallel()
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	base, _, stop := startServer(t, nil, "--users", usersPath, "--max-conns", "4")
	defer stop()
	addr := strings.TrimPrefix(base, "http://")
	var idle []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		idle = append(idle, c)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz with 4 idle connections at --max-conns 4 = %v; want 200", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz at the limit = %d; want 200", resp.StatusCode)
	}
	// Read every old connection at once: after its deadline Go reports a
	// timeout without looking for the EOF.
	var shed atomic.Int32
	var wg sync.WaitGroup
	for _, c := range idle {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == io.EOF {
				shed.Add(1)
			}
		})
	}
	wg.Wait()
	if shed.Load() == 0 {
		t.Errorf("no idle connection was closed for the new client; want at least one")
	}
}

// TestDeprecatedFlagNames: --bcrypt-slots, --bcrypt-queue and --bcrypt-wait
// and their variables still set the password-check settings, each with a
// note that serve logs; the new names win over the old variables, and a
// flag on the command line over any variable.
func TestDeprecatedFlagNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		args      []string
		env       map[string]string
		wantSlots int
		wantNote  string // "" for no note
	}{
		{"old flag", []string{"--bcrypt-slots", "3"}, nil, 3, "--bcrypt-slots is deprecated; use --password-slots"},
		{"old flag with =", []string{"--bcrypt-slots=3"}, nil, 3, "--bcrypt-slots is deprecated; use --password-slots"},
		{"old variable", nil, map[string]string{"AUTHSVC_BCRYPT_SLOTS": "3"}, 3, "AUTHSVC_BCRYPT_SLOTS is deprecated; use AUTHSVC_PASSWORD_SLOTS"},
		{"new variable wins", nil, map[string]string{"AUTHSVC_BCRYPT_SLOTS": "3", "AUTHSVC_PASSWORD_SLOTS": "4"}, 4, ""},
		{"old flag beats new variable", []string{"--bcrypt-slots", "3"}, map[string]string{"AUTHSVC_PASSWORD_SLOTS": "4"}, 3, "--bcrypt-slots is deprecated; use --password-slots"},
		{"new flag", []string{"--password-slots", "5"}, map[string]string{"AUTHSVC_BCRYPT_SLOTS": "3"}, 5, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseServeFlags(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if err != nil {
				t.Fatalf("parseServeFlags(%q) = %v", tt.args, err)
			}
			if c.passwordSlots != tt.wantSlots {
				t.Errorf("password slots = %d; want %d", c.passwordSlots, tt.wantSlots)
			}
			got := strings.Join(c.deprecated, "; ")
			if got != tt.wantNote {
				t.Errorf("deprecation notes = %q; want %q", got, tt.wantNote)
			}
		})
	}
	c, err := parseServeFlags([]string{"--bcrypt-queue", "7", "--bcrypt-wait", "3s"}, func(string) string { return "" }, io.Discard)
	if err != nil || c.passwordQueue != 7 || c.passwordWait != 3*time.Second || len(c.deprecated) != 2 {
		t.Errorf("--bcrypt-queue 7 --bcrypt-wait 3s = queue %d, wait %v, notes %q, %v; want 7, 3s, two notes", c.passwordQueue, c.passwordWait, c.deprecated, err)
	}
}

// TestDeprecatedFlagLogged: serve logs a former name's note as a warning.
func TestDeprecatedFlagLogged(t *testing.T) {
	t.Parallel()
	usersPath := writeTestUsers(t)
	_, log, stop := startServer(t, nil, "--users", usersPath, "--bcrypt-slots", "1")
	log.WaitFor(t, regexp.MustCompile(`level=WARN msg="--bcrypt-slots is deprecated; use --password-slots"`))
	if err := stop(); err != nil {
		t.Errorf("run = %v; want nil after cancel", err)
	}
}
