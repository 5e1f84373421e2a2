package integration

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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
	os.Exit(run(m))
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
