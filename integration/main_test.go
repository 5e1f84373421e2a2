package integration

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

// binary is the authsvc program TestMain built for this run.
var binary string

// TestMain builds authsvc once, without -race (the servers are the system
// under test, not this package's code), into a directory removed at exit.
// AUTHSVC_TEST_BINARY names a binary built already (another revision's,
// say) to test instead. The test binary is also the hasher pool's worker,
// as the server binary is: a server run in-process (startServer) starts
// "os.Executable() hash-worker".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == password.WorkerCommand {
		os.Exit(cli.ExitStatus(password.RunWorker(os.Stdin, os.Stdout), os.Stderr))
	}
	flag.Parse()
	setParallel()
	os.Exit(run(m))
}

// minParallel is how many parallel tests of this package run at once at
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

func run(m *testing.M) int {
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
	build.Dir = ".." // the module root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build authsvc: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// fromRoot is the path of name, a path from the module's root (README.md,
// testdata/, clients/django): go test runs this package in integration/.
func fromRoot(name string) string { return filepath.Join("..", name) }

// requireBinary fails t unless the binary under test is there. It also
// stats every Go source of the module and go.mod/go.sum, so that go test's
// cache, which does not know that the binary is built from them, runs the
// test again when one changes.
func requireBinary(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("the binary under test: %v", err)
	}
	filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
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
