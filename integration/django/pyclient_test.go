package django

import (
	"authsvc/integration/harness"
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// debianPython is Debian's interpreter, where python3-django and
// python3-djangorestframework install; a python3 found on PATH may be
// another one without them.
const debianPython = "/usr/bin/python3"

// requirePython reports whether a missing Python prerequisite fails the
// test rather than skipping it: AUTHSVC_REQUIRE_PYTHON=1 (.ci/run) or CI.
func requirePython() bool {
	ci := os.Getenv("CI")
	return os.Getenv("AUTHSVC_REQUIRE_PYTHON") == "1" || (ci != "" && ci != "0" && ci != "false")
}

// The install the READMEs show: a virtual environment that sees Debian's
// Django and DRF (Debian's own site-packages refuse pip, PEP 668), and pip
// offline with Debian's setuptools. TestPythonDjangoClient runs these
// commands, with the folders moved to its own.
const (
	readmeVenv = "python3 -m venv --system-site-packages .venv"
	readmePip  = ".venv/bin/pip install --no-build-isolation --no-deps ./clients/django"
)

// TestPythonDjangoClientREADME: docs/django.md and clients/django/README.md show
// the install TestPythonDjangoClient runs.
func TestPythonDjangoClientREADME(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	for _, name := range []string{"docs/django.md", "clients/django/README.md"} {
		data, err := os.ReadFile(harness.FromRoot(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{readmeVenv, readmePip} {
			if !strings.Contains(string(data), cmd) {
				t.Errorf("%s does not show %q, the install TestPythonDjangoClient tests", name, cmd)
			}
		}
	}
}

// TestPythonDjangoClient installs clients/django as the READMEs say
// (readmeVenv, readmePip) into a temporary virtual environment and runs its
// Python tests against that installed copy and the authsvc TestMain built.
func TestPythonDjangoClient(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	required := requirePython()
	skip := func(format string, args ...any) {
		t.Helper()
		if required {
			t.Fatalf(format+" (AUTHSVC_REQUIRE_PYTHON=1 or CI is set)", args...)
		}
		t.Skipf(format+" (set AUTHSVC_REQUIRE_PYTHON=1 to fail instead)", args...)
	}
	if testing.Short() && !required {
		t.Skip("runs the Python suite")
	}
	if out, err := exec.Command(debianPython, "-c", "import django, rest_framework, setuptools, pip, venv, ensurepip").CombinedOutput(); err != nil {
		skip("%s lacks Django, DRF, setuptools, pip or venv (apt-get install python3-django python3-djangorestframework python3-setuptools python3-pip python3-venv): %v\n%s", debianPython, err, out)
	}
	harness.RequireBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	env := append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1", "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")

	// pip builds in the source tree (build/, *.egg-info): it gets a copy.
	src, venv := filepath.Join(dir, "src"), filepath.Join(dir, ".venv")
	copyPackage(t, harness.FromRoot("clients/django"), src)
	var pipOut bytes.Buffer
	start := time.Now()
	for _, args := range [][]string{
		{debianPython, "-m", "venv", "--system-site-packages", venv},                             // readmeVenv
		{filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-deps", src}, // readmePip
	} {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = &pipOut, &pipOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, pipOut.String())
		}
	}
	t.Logf("venv and pip install: %v", time.Since(start).Round(time.Millisecond))

	tests, err := filepath.Abs(harness.FromRoot("clients/django/tests"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(venv, "bin", "python"), "-m", "unittest", "discover", "-v", "-s", tests)
	cmd.Dir = dir // not the source folder: the installed copy is the one under test
	cmd.Env = append(env,
		"AUTHSVC_DJANGO_INSTALLED=1",
		"AUTHSVC_BIN="+harness.Binary(),
		"AUTHSVC_REQUIRE_PYTHON=1", // nothing in the suite may skip
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start = time.Now()
	err = cmd.Run()
	t.Logf("python -m unittest: %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("clients/django tests failed: %v\n%s", err, out.String())
	}
	if s := out.String(); strings.Contains(s, "skipped") {
		t.Fatalf("clients/django tests skipped some:\n%s", s)
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
}

// copyPackage copies the package's sources from dir to dst, leaving out
// what a local build or test run left behind.
func copyPackage(t *testing.T, dir, dst string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() && (name == "__pycache__" || name == "build" || name == "dist" || strings.HasSuffix(name, ".egg-info")) {
			return fs.SkipDir
		}
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !e.Type().IsRegular() || strings.HasSuffix(name, ".pyc") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
