// Package mfatest gives tests the TOTP implementations that share no code
// with the server's: oathtool (OATH Toolkit, in C) and Debian's pyotp. A
// test checks the server's codes against theirs, never only against the
// library the server uses.
//
// A missing tool skips the test, or fails it where the tools must be
// there: AUTHSVC_REQUIRE_PYTHON=1 (.ci/run, which installs both) or CI.
package mfatest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DebianPython is Debian's interpreter, where python3-pyotp installs; a
// python3 found on PATH may be another one without it.
const DebianPython = "/usr/bin/python3"

// Required reports whether a missing oathtool or pyotp fails the test
// rather than skipping it.
func Required() bool {
	ci := os.Getenv("CI")
	return os.Getenv("AUTHSVC_REQUIRE_PYTHON") == "1" || (ci != "" && ci != "0" && ci != "false")
}

// SkipOrFail skips t, or fails it when the tools are Required.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf(format+" (AUTHSVC_REQUIRE_PYTHON=1 or CI is set)", args...)
	}
	t.Skipf(format+" (set AUTHSVC_REQUIRE_PYTHON=1 to fail instead)", args...)
}

// Oathtool runs oathtool with args and returns its output, trimmed; it
// skips (fails) t without oathtool.
func Oathtool(t testing.TB, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("oathtool")
	if err != nil {
		SkipOrFail(t, "no oathtool (apt-get install oathtool): %v", err)
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("oathtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Code is oathtool's code of the TOTP whose secret is keyHex (hex, as
// django-otp stores it), with t0 0, for the step holding at.
func Code(t testing.TB, keyHex string, digits int, step time.Duration, at time.Time) string {
	t.Helper()
	return Oathtool(t, "--totp", "-d", strconv.Itoa(digits), "-s", fmt.Sprintf("%ds", int64(step/time.Second)),
		"-N", "@"+strconv.FormatInt(at.Unix(), 10), keyHex)
}

// Code32 is Code for a base32 secret, as an authenticator app is given it,
// with 6 digits and 30-second steps.
func Code32(t testing.TB, secret32 string, at time.Time) string {
	t.Helper()
	return Oathtool(t, "--totp", "-b", "-d", "6", "-s", "30s", "-N", "@"+strconv.FormatInt(at.Unix(), 10), secret32)
}

// NeedPyotp skips (fails) t unless Debian's Python has pyotp.
func NeedPyotp(t testing.TB) {
	t.Helper()
	if out, err := exec.Command(DebianPython, "-c", "import pyotp").CombinedOutput(); err != nil {
		SkipOrFail(t, "%s lacks pyotp (apt-get install python3-pyotp): %v\n%s", DebianPython, err, out)
	}
}

// Python runs script with Debian's Python and args, and returns its
// output lines.
func Python(t testing.TB, script string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(DebianPython, append([]string{"-c", script}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s", DebianPython, err, stderr)
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}
