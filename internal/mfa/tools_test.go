package mfa

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The tests check codes against implementations that share no code with
// this package: oathtool (OATH Toolkit, C) and Debian's pyotp.

// debianPython is Debian's interpreter, where python3-pyotp installs; a
// python3 found on PATH may be another one without it.
const debianPython = "/usr/bin/python3"

// requireTools reports whether a missing oathtool or pyotp fails the test
// rather than skipping it: AUTHSVC_REQUIRE_PYTHON=1 (.ci/run) or CI, as
// for the root's Python tests.
func requireTools() bool {
	ci := os.Getenv("CI")
	return os.Getenv("AUTHSVC_REQUIRE_PYTHON") == "1" || (ci != "" && ci != "0" && ci != "false")
}

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if requireTools() {
		t.Fatalf(format+" (AUTHSVC_REQUIRE_PYTHON=1 or CI is set)", args...)
	}
	t.Skipf(format+" (set AUTHSVC_REQUIRE_PYTHON=1 to fail instead)", args...)
}

// needOathtool returns the path of oathtool, or skips (fails) without it.
func needOathtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("oathtool")
	if err != nil {
		skipOrFail(t, "no oathtool (apt-get install oathtool): %v", err)
	}
	return path
}

// oathtool runs oathtool with args and returns its output, trimmed.
func oathtool(t *testing.T, path string, args ...string) string {
	t.Helper()
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("oathtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// needPyotp skips (fails) unless Debian's Python has pyotp.
func needPyotp(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import pyotp").CombinedOutput(); err != nil {
		skipOrFail(t, "%s lacks pyotp (apt-get install python3-pyotp): %v\n%s", debianPython, err, out)
	}
}

// python runs script with Debian's Python and args, and returns its output
// lines.
func python(t *testing.T, script string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(debianPython, append([]string{"-c", script}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s", debianPython, err, stderr)
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}
