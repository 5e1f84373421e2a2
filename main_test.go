package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"authsvc/internal/cli"
)

// TestRun runs the program as main does, through run and the exit status:
// help succeeds, a usage error exits 2, any other error 1.
func TestRun(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, tc := range []struct {
		args   []string
		status int
		stdout string // a part of it
		stderr string // a part of it
	}{
		{args: []string{"authsvc", "--help"}, status: 0, stdout: "usage: authsvc [COMMAND]"},
		{args: []string{"authsvc", "version"}, status: 0, stdout: "authsvc"},
		{args: []string{"authsvc", "bogus"}, status: 2, stderr: `authsvc: unknown command "bogus"`},
		{args: []string{"authsvc", "user", "list", "--users", t.TempDir()}, status: 1, stderr: "authsvc: user list: "},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), tc.args, getenv, strings.NewReader(""), &stdout, &stderr)
		if got := cli.ExitStatus(err, &stderr); got != tc.status {
			t.Errorf("%q: exit status = %d; want %d (stderr %q)", tc.args, got, tc.status, stderr.String())
		}
		if !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("%q: stdout %q, stderr %q; want them to hold %q and %q", tc.args, stdout.String(), stderr.String(), tc.stdout, tc.stderr)
		}
	}
}
