// Package harness is what the process-level test packages (integration,
// integration/faults, integration/django) share: the authsvc binary built
// once per test binary (Main), servers run in-process (StartServer) or as
// processes of that binary (ServeBinary, StartServerProcess), the command
// line run either way (RunCLI, RunBinary), the test users and users files,
// the HTTP calls of many tests (Do, WantInfo, MFACall), and the Django
// fixtures. It holds each helper once; the test packages import it.
package harness

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"authsvc/internal/cli"
	"authsvc/internal/password"
)

// binary is the authsvc program Main built for this test binary, or the
// one AUTHSVC_TEST_BINARY names: set once, before any test runs.
var binary string

// Main is a test package's TestMain. It builds authsvc once, without
// -race (the servers are the system under test, not the tests' code),
// into a directory removed at exit. AUTHSVC_TEST_BINARY names a binary
// built already (another revision's, say) to test instead. The test
// binary is also the hasher pool's worker, as the server binary is: a
// server run in-process (StartServer) starts "os.Executable() hash-worker".
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == password.WorkerCommand {
		os.Exit(cli.ExitStatus(password.RunWorker(os.Stdin, os.Stdout), os.Stderr))
	}
	flag.Parse()
	setParallel()
	os.Exit(run(m))
}

// minParallel is how many parallel tests of a package run at once at
// the least, unless go test's -parallel says: they mostly wait, on
// servers starting, outage windows and timeouts, so that go test's
// default of GOMAXPROCS (2 on the machines here) left the cores idle and
// the package took minutes.
const minParallel = 4

// setParallel raises -test.parallel to minParallel unless it was given.
func setParallel() {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && runtime.GOMAXPROCS(0) < minParallel {
		flag.Set("test.parallel", strconv.Itoa(minParallel))
	}
}

// Long skips t under go test -short: the process-level tests take
// minutes together, go test -short is for the edit-and-test loop, and
// make test (which .ci/run runs) never passes -short.
func Long(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("process-level: make test runs it")
	}
}

func run(m *testing.M) int {
	if testing.Short() {
		return m.Run() // every test skips (Long): nothing to build
	}
	dir, err := os.MkdirTemp("", "authsvc-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binary = os.Getenv("AUTHSVC_TEST_BINARY"); binary != "" {
		return m.Run()
	}
	binary = filepath.Join(dir, "authsvc")
	build := exec.Command("go", "build", "-o", binary, "authsvc")
	build.Dir = Root()
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build authsvc: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// Binary is the path of the authsvc program under test. Tests that run it
// call RequireBinary first.
func Binary() string { return binary }

// Root is the path of the module's root, the nearest directory up from
// the working directory that holds go.mod: go test runs a package in its
// own directory, one or two levels below the root.
func Root() string {
	dir := "."
	for range 8 {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		dir = filepath.Join(dir, "..")
	}
	return "."
}

// FromRoot is the path of name, a path from the module's root (README.md,
// testdata/, clients/django).
func FromRoot(name string) string { return filepath.Join(Root(), name) }

// RequireBinary fails t unless the binary under test is there. It also
// stats every Go source of the module and go.mod/go.sum, so that go test's
// cache, which does not know that the binary is built from them, runs the
// test again when one changes.
func RequireBinary(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("the binary under test: %v", err)
	}
	filepath.WalkDir(Root(), func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "clients"):
			return filepath.SkipDir
		case strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum":
			os.Stat(path)
		}
		return nil
	})
}
