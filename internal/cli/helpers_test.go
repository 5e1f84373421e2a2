package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/servertest"
	"authsvc/internal/users/usersfile"

	"golang.org/x/crypto/bcrypt"
)

// TestMain lets the test binary be the hasher pool's worker, as the server
// binary is: buildDeps starts "os.Executable() hash-worker". The tests
// then run from the repository's root: they read its files (README.md,
// testdata/, Dockerfile) and build its binary (go build .) from there.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == password.WorkerCommand {
		os.Exit(ExitStatus(password.RunWorker(os.Stdin, os.Stdout), os.Stderr))
	}
	if err := chdirModuleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// chdirModuleRoot makes the nearest directory above (or at) the working
// directory that holds go.mod the working directory: go test runs the
// tests in internal/cli, bench/run.sh runs their binary from the root.
func chdirModuleRoot() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return os.Chdir(dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// startServer runs the whole program in-process on 127.0.0.1:0 and returns
// its base URL, its log and a function that stops it and returns run's error.
func startServer(t *testing.T, env map[string]string, args ...string) (string, *servertest.LineLog, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := servertest.NewLineLog()
	done := make(chan error, 1)
	getenv := func(k string) string { return env[k] }
	go func() {
		done <- Run(ctx, append([]string{"authsvc", "serve", "--addr", "127.0.0.1:0"}, args...), getenv, strings.NewReader(""), io.Discard, stderr)
	}()
	m := stderr.WaitFor(t, regexp.MustCompile(`msg=listening addr=(\S+)`))
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

// TestEndToEnd drives the real program over HTTP: bootstrap, login, info,
// reload on file change and on SIGHUP, graceful shutdown.
func TestEndToEnd(t *testing.T) {
	// Not parallel: its SIGHUP reaches every server in the process.
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	base, log, stop := startServer(t, map[string]string{"AUTHSVC_USERS": usersPath, "AUTHSVC_RELOAD_INTERVAL": "50ms"})

	// First start: the bootstrap admin and its password, once, on stderr.
	m := log.WaitFor(t, regexp.MustCompile(`password: (\S+)$`))
	adminPassword := m[1]
	if info, err := os.Stat(usersPath); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("users file after bootstrap: %v, mode %v; want mode 0600", err, info.Mode().Perm())
	}
	admin := servertest.LoginToken(t, base, "admin", adminPassword)
	if code, body := servertest.GetInfo(t, base, admin, "?username=admin"); code != 200 || !strings.Contains(body, `"admin":true`) {
		t.Fatalf("info(admin) = %d %s; want 200 admin", code, body)
	}

	// A user added by the CLI is picked up by polling.
	if code, stdout, stderr := runCLIProgram(t, "dave-is-back-in-town\n", "user", "add", "--users", usersPath, "--cost", "4", "dave"); code != 0 {
		t.Fatalf("user add = %d %s %s", code, stdout, stderr)
	}
	log.WaitFor(t, regexp.MustCompile(`users file reloaded.*reason="file changed" users=2`))
	dave := servertest.LoginToken(t, base, "dave", "dave-is-back-in-town")
	if code, _ := servertest.GetInfo(t, base, dave, ""); code != 200 {
		t.Fatalf("info(dave) = %d; want 200", code)
	}

	// A broken file is refused and the old users stay; SIGHUP reloads.
	if err := os.WriteFile(usersPath, []byte(`{"users": [}`), 0o600); err != nil {
		t.Fatal(err)
	}
	log.WaitFor(t, regexp.MustCompile(`users file refused`))
	if code, _ := servertest.GetInfo(t, base, dave, ""); code != 200 {
		t.Errorf("info(dave) after a broken file = %d; want 200", code)
	}
	list := servertest.TestUsers(t)
	if err := usersfile.Write(usersPath, list); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	log.WaitFor(t, regexp.MustCompile(`users file reloaded.*users=3`))
	if code, _ := servertest.GetInfo(t, base, dave, ""); code != 401 {
		t.Errorf("info(dave) after dave was deleted = %d; want 401", code)
	}
	alice := servertest.LoginToken(t, base, "alice", "alice-pw")

	// Shutdown waits for a request in flight: send half a login, stop, send the rest.
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"username":"alice","password":"alice-pw"}`
	fmt.Fprintf(conn, "POST /api/auth/login/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:10])
	time.Sleep(100 * time.Millisecond) // let the server start reading the request
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	log.WaitFor(t, regexp.MustCompile(`shutting down`))
	fmt.Fprint(conn, body[10:])
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("in-flight login during shutdown: %v", err)
	}
	if resp.StatusCode != 200 {
		t.Errorf("in-flight login during shutdown = %d; want 200", resp.StatusCode)
	}
	if err := <-stopped; err != nil {
		t.Errorf("run after shutdown = %v; want nil", err)
	}

	// No token or password reached the log.
	for _, secret := range []string{adminPassword, admin, dave, alice, "dave-pw", "alice-pw"} {
		for _, line := range strings.Split(log.String(), "\n") {
			if strings.Contains(line, secret) && !strings.HasSuffix(line, "password: "+adminPassword) {
				t.Errorf("log line %q contains a secret", line)
			}
		}
	}
}

// runCLIProgram runs one CLI command in-process as main would.
func runCLIProgram(t testing.TB, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	err := Run(context.Background(), append([]string{"authsvc"}, args...), func(string) string { return "" }, strings.NewReader(stdin), &stdout, &stderr)
	return ExitStatus(err, &stderr), stdout.String(), stderr.String()
}

// TestServeRefusesBrokenUsersFile: a file that fails to validate stops start-up with its reason.
func TestServeRefusesBrokenUsersFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	hash, _ := bcrypt.GenerateFromPassword([]byte("x"), servertest.TestCost)
	doc := fmt.Sprintf(`{"users":[{"username":"ok","password_hash":%q},{"username":"bad","password_hash":"plain"}]}`, hash)
	os.WriteFile(path, []byte(doc), 0o600)
	err := Run(context.Background(), []string{"authsvc", "--addr", "127.0.0.1:0", "--users", path}, func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `users[1] ("bad"): password_hash`) {
		t.Errorf("serve with a broken users file = %v; want an error naming users[1] and password_hash", err)
	}
}
