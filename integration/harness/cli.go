package harness

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"authsvc/internal/cli"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// RunCLIProgram runs one CLI command in-process as main would.
func RunCLIProgram(t testing.TB, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	err := cli.Run(context.Background(), append([]string{"authsvc"}, args...), func(string) string { return "" }, strings.NewReader(stdin), &stdout, &stderr)
	return cli.ExitStatus(err, &stderr), stdout.String(), stderr.String()
}

// RunCLI runs the program in-process with args (without the program name),
// stdin, and an environment of env alone; it returns the exit status and
// what was written to stdout and stderr. Unless env says otherwise,
// AUTHSVC_PASSWORD_MIN_LENGTH is 1, so that tests about other things may
// use short passwords (TestCLIPasswordPolicy tests the policy itself).
func RunCLI(t *testing.T, stdin string, env map[string]string, args ...string) (code int, stdout, stderr string) {
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

// WithoutWarning returns stderr without the low-cost warning that --cost 4 prints.
func WithoutWarning(stderr string) string {
	var kept []string
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(line, "authsvc: warning: bcrypt cost ") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}

// MustRunCLI runs the program and fails t unless it succeeds.
func MustRunCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	code, stdout, stderr := RunCLI(t, stdin, nil, args...)
	if code != 0 {
		t.Fatalf("authsvc %s = exit %d, stderr %q; want exit 0", strings.Join(args, " "), code, stderr)
	}
	return stdout
}

// AddUser adds username with password to the users file at path.
func AddUser(t *testing.T, path, username, password string, flags ...string) {
	t.Helper()
	MustRunCLI(t, password+"\n", append([]string{"user", "add", "--users", path, "--cost", "4", username}, flags...)...)
}

// MustReadUsers returns the users in the file at path, by name.
func MustReadUsers(t *testing.T, path string) map[string]users.User {
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
