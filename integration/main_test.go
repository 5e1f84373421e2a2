package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// binary is the authsvc program TestMain built for this run.
var binary string

// TestMain builds authsvc once, without -race (the servers are the system
// under test, not this package's code), into a directory removed at exit.
// AUTHSVC_TEST_BINARY names a binary built already (another revision's,
// say) to test instead.
func TestMain(m *testing.M) {
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
