package integration

// The helpers the process-level tests moved here from internal/cli share,
// copied from that package's tests (which still use them there).

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/cli"
	"authsvc/internal/httpapi"
	"authsvc/internal/mfa/mfatest"
	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"

	"golang.org/x/crypto/bcrypt"
)

// From internal/cli/helpers_test.go: servers run in-process, and their logs.

// lineLog is a stderr that keeps every line and can wait for one.
type lineLog struct {
	mu    sync.Mutex // guards buf, lines and waits
	buf   []byte
	lines []string
	wake  chan struct{}
}

func newLineLog() *lineLog { return &lineLog{wake: make(chan struct{})} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	close(l.wake)
	l.wake = make(chan struct{})
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// waitFor returns the submatches of the first line matching re, waiting up to 10 s.
func (l *lineLog) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	seen := 0
	for {
		l.mu.Lock()
		for ; seen < len(l.lines); seen++ {
			if m := re.FindStringSubmatch(l.lines[seen]); m != nil {
				l.mu.Unlock()
				return m
			}
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("no log line matching %s within 60s; log:\n%s", re, l)
		}
	}
}

// startServer runs the whole program in-process on 127.0.0.1:0 and returns
// its base URL, its log and a function that stops it and returns run's error.
func startServer(t *testing.T, env map[string]string, args ...string) (string, *lineLog, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := newLineLog()
	done := make(chan error, 1)
	getenv := func(k string) string { return env[k] }
	go func() {
		done <- cli.Run(ctx, append([]string{"authsvc", "serve", "--addr", "127.0.0.1:0"}, args...), getenv, strings.NewReader(""), io.Discard, stderr)
	}()
	m := stderr.waitFor(t, regexp.MustCompile(`msg=listening addr=(\S+)`))
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			t.Fatal("run did not return within 15s of cancel")
			return nil
		}
	}
	t.Cleanup(func() { cancel() })
	return "http://" + m[1], stderr, stop
}

func postJSON(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func getInfo(t *testing.T, base, token, query string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/auth/info"+query, nil)
	req.Header.Set("authorization", "TOKEN "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func loginToken(t *testing.T, base, username, password string) string {
	t.Helper()
	resp, body := postJSON(t, base+"/api/auth/login/", fmt.Sprintf(`{"username":%q,"password":%q}`, username, password))
	if resp.StatusCode != 200 {
		t.Fatalf("login(%s) = %d %s; want 200", username, resp.StatusCode, body)
	}
	var reply struct{ Token string }
	json.Unmarshal([]byte(body), &reply)
	return reply.Token
}

// runCLIProgram runs one CLI command in-process as main would.
func runCLIProgram(t testing.TB, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	err := cli.Run(context.Background(), append([]string{"authsvc"}, args...), func(string) string { return "" }, strings.NewReader(stdin), &stdout, &stderr)
	return cli.ExitStatus(err, &stderr), stdout.String(), stderr.String()
}

// From internal/cli/cli_test.go: the commands run in-process.

// runCLI runs the program in-process with args (without the program name),
// stdin, and an environment of env alone; it returns the exit status and
// what was written to stdout and stderr. Unless env says otherwise,
// AUTHSVC_PASSWORD_MIN_LENGTH is 1, so that tests about other things may
// use short passwords (TestCLIPasswordPolicy tests the policy itself).
func runCLI(t *testing.T, stdin string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(key string) string {
		if v, ok := env[key]; ok || key != "AUTHSVC_PASSWORD_MIN_LENGTH" {
			return v
		}
		return "1"
	}
	err := cli.Run(t.Context(), append([]string{"authsvc"}, args...), getenv, strings.NewReader(stdin), &out, &errOut)
	code = cli.ExitStatus(err, &errOut)
	return code, out.String(), errOut.String()
}

// withoutWarning returns stderr without the low-cost warning that --cost 4 prints.
func withoutWarning(stderr string) string {
	var kept []string
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(line, "authsvc: warning: bcrypt cost ") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}

// mustRunCLI runs the program and fails t unless it succeeds.
func mustRunCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	code, stdout, stderr := runCLI(t, stdin, nil, args...)
	if code != 0 {
		t.Fatalf("authsvc %s = exit %d, stderr %q; want exit 0", strings.Join(args, " "), code, stderr)
	}
	return stdout
}

// addUser adds username with password to the users file at path.
func addUser(t *testing.T, path, username, password string, flags ...string) {
	t.Helper()
	mustRunCLI(t, password+"\n", append([]string{"user", "add", "--users", path, "--cost", "4", username}, flags...)...)
}

// mustReadUsers returns the users in the file at path, by name.
func mustReadUsers(t *testing.T, path string) map[string]users.User {
	t.Helper()
	list, err := usersfile.Read(path)
	if err != nil {
		t.Fatalf("usersfile.Read(%q) = %v", path, err)
	}
	m := make(map[string]users.User)
	for _, u := range list {
		m[u.Username] = u
	}
	return m
}

// From internal/cli/handlers_test.go and observe_test.go: the test users.

// testCost keeps bcrypt fast in tests.
const testCost = bcrypt.MinCost

// testUsers: alice (dev), bob (admin), carol (disabled). Each password is
// the username + "-pw".
func testUsers(t testing.TB) []users.User {
	t.Helper()
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), testCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	return []users.User{
		{Username: "alice", PasswordHash: hash("alice-pw"), Name: "Alice", Email: "alice@example.com", Groups: []string{"dev"}},
		{Username: "bob", PasswordHash: hash("bob-pw"), Name: "Bob", Groups: []string{}, Admin: true},
		{Username: "carol", PasswordHash: hash("carol-pw"), Groups: []string{}, Disabled: true},
	}
}

// writeTestUsers writes testUsers to a users file in a temporary directory.
func writeTestUsers(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/users.json"
	if err := usersfile.Write(path, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	return path
}

// From internal/cli/fixtures_test.go: users-file fixtures.

// usersJSON returns a users file holding the given entries, each a JSON object.
func usersJSON(entries ...string) string {
	return `{"users": [` + strings.Join(entries, ",\n") + `]}`
}

// entry returns a users file entry for username with the given extra fields.
func entry(username string, extra ...string) string {
	fields := append([]string{fmt.Sprintf("%q: %q", "username", username)}, extra...)
	return "{" + strings.Join(fields, ", ") + "}"
}

func hashField(h string) string { return fmt.Sprintf(`"password_hash": %q`, h) }

var okAlice = entry("alice", hashField(passwordtest.Hash))

// checkMode fails t unless the file at path has permission bits mode.
func checkMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Errorf("os.Stat(%q) = %v", path, err)
		return
	}
	if got := info.Mode().Perm(); got != mode {
		t.Errorf("mode of %s = %v; want %v", path, got, mode)
	}
}

// dirNames returns the sorted names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// From internal/cli/password_test.go and mfa_test.go.

const newPassphrase = "a brand new passphrase"

// changeBody is a password-change body.
func changeBody(current, next string) string {
	b, _ := json.Marshal(httpapi.PasswordRequest{CurrentPassword: current, NewPassword: next})
	return string(b)
}

// totpCode is oathtool's code of the base32 secret at time at: the codes
// in these tests come from an implementation that shares no code with the
// server's pquerna/otp.
func totpCode(t testing.TB, secret32 string, at time.Time) string {
	t.Helper()
	return mfatest.Code32(t, secret32, at)
}

// From internal/cli/dryrun_test.go and importupdate_test.go: user import.

// importTally is one line of user import's summary: internal/cli's own
// tally, as the summary line prints it.
type importTally struct{ imported, updated, unchanged, dead, skipped int }

// importSummaryRE matches user import's summary line.
var importSummaryRE = regexp.MustCompile(`^(dry run: would import|imported) .* into .*: users (\d+) imported, (\d+) updated, (\d+) unchanged, (\d+) skipped; tokens (\d+) imported, (\d+) updated, (\d+) left dead, (\d+) skipped; factors \d+ imported, \d+ updated, \d+ unchanged, \d+ skipped(; nothing written)?\n$`)

// importSummary parses user import's stdout, its one summary line: whether
// it was a dry run, and the users' and tokens' tallies. ok is false when
// stdout is anything else.
func importSummary(stdout string) (dryRun bool, users, tokens importTally, ok bool) {
	m := importSummaryRE.FindStringSubmatch(stdout)
	if m == nil || (m[1] == "imported") == (m[10] != "") {
		return false, users, tokens, false
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return m[10] != "", importTally{imported: n(2), updated: n(3), unchanged: n(4), skipped: n(5)}, importTally{imported: n(6), updated: n(7), dead: n(8), skipped: n(9)}, true
}

// importedUsers is how many users stdout's summary line says an import
// (dry run or not, as dryRun says) imported; -1 when it is no such line.
func importedUsers(stdout string, dryRun bool) int {
	dry, u, _, ok := importSummary(stdout)
	if !ok || dry != dryRun {
		return -1
	}
	return u.imported
}

// djangoPBKDF2 is Django's pbkdf2_sha256 hash of pw, at few iterations.
func djangoPBKDF2(t *testing.T, pw, salt string) string {
	t.Helper()
	dk, err := pbkdf2.Key(sha256.New, pw, []byte(salt), 1000, 32)
	if err != nil {
		t.Fatal(err)
	}
	return "pbkdf2_sha256$1000$" + salt + "$" + base64.StdEncoding.EncodeToString(dk)
}

// A djangoUserRecord is what a test dump says of one Django user.
type djangoUserRecord struct {
	username, hash, first string
	active                bool
	key                   string // its DRF key, if any
	created               string // the key's created time
}

// writeDjangoDump writes a dumpdata file of records and returns its path.
func writeDjangoDump(t *testing.T, dir, name string, records ...djangoUserRecord) string {
	t.Helper()
	var out []any
	for i, r := range records {
		out = append(out, map[string]any{"model": "auth.user", "pk": i + 1, "fields": map[string]any{
			"username": r.username, "password": r.hash, "first_name": r.first, "last_name": "",
			"email": r.username + "@example.com", "is_active": r.active, "is_staff": false, "is_superuser": false, "groups": []any{},
		}})
		if r.key != "" {
			out = append(out, map[string]any{"model": "authtoken.token", "pk": r.key, "fields": map[string]any{"user": []string{r.username}, "created": r.created}})
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

// serveBinary is startServer with the server a process of the binary
// TestMain built, without the race detector, as in production: for the
// tests whose figure is the server's speed, and those whose hashes the
// race detector would make minutes of work. stop sends SIGTERM, as an
// operator does, and returns the error of an exit status other than 0.
func serveBinary(t *testing.T, env map[string]string, args ...string) (string, *lineLog, func() error) {
	t.Helper()
	requireBinary(t)
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = environ(env)
	log := newLineLog()
	cmd.Stderr = log
	p := startServerProcess(t, cmd, log.String)
	stop := func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			t.Fatal("serve did not exit within 15s of SIGTERM")
		}
		if !cmd.ProcessState.Success() {
			return fmt.Errorf("serve: %v", cmd.ProcessState)
		}
		return nil
	}
	return p.base, log, stop
}

// runBinary is runCLI with the command a process of the binary TestMain
// built (see serveBinary), its environment env alone, and the same
// AUTHSVC_PASSWORD_MIN_LENGTH of 1 unless env says otherwise.
func runBinary(t *testing.T, stdin string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	requireBinary(t)
	cmd := exec.Command(binary, args...)
	cmd.Env = environ(env)
	if _, ok := env["AUTHSVC_PASSWORD_MIN_LENGTH"]; !ok {
		cmd.Env = append(cmd.Env, "AUTHSVC_PASSWORD_MIN_LENGTH=1")
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatalf("authsvc %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// environ is env as a process's environment.
func environ(env map[string]string) []string {
	list := []string{}
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	return list
}
