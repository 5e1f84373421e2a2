package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"authsvc/internal/httpapi"
	"authsvc/internal/users"
)

// A failingDirectory is the real users file whose Lookup fails with
// ErrUnavailable once failAfter's look-ups have been answered, as a
// PostgreSQL directory does past its grace (5 s after the database last
// answered), even in the middle of a login: a fault injected into a real
// directory.
type failingDirectory struct {
	*users.FileDirectory
	lookups atomic.Int64
	upTo    atomic.Int64 // Lookup fails once lookups passes it
}

func (d *failingDirectory) Lookup(ctx context.Context, username string) (*users.Account, error) {
	if d.lookups.Add(1) > d.upTo.Load() {
		return nil, fmt.Errorf("injected: %w", users.ErrUnavailable)
	}
	return d.FileDirectory.Lookup(ctx, username)
}

// failAfter makes every look-up fail after the next n.
func (d *failingDirectory) failAfter(n int64) { d.upTo.Store(d.lookups.Load() + n) }

// newFailingEnv returns a test environment on testUsers in a
// failingDirectory that answers until failAfter is called, with the log,
// audit lines included, in logged.
func newFailingEnv(t *testing.T) (e *testEnv, dir *failingDirectory, d httpapi.Deps, logged *syncBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.json")
	if err := users.WriteFile(path, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	file, err := users.OpenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	dir = &failingDirectory{FileDirectory: file}
	dir.upTo.Store(math.MaxInt64)
	logged = new(syncBuffer)
	d, closeDeps, err := buildDeps(testConfig(path), slog.New(slog.NewTextHandler(logged, nil)), withDirectory(dir))
	t.Cleanup(closeDeps)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{t: t, handler: httpapi.NewServer(d)}, dir, d, logged
}

// TestAuditOutcomeDirectoryDown: while the user directory cannot answer, a
// login gets 503 unavailable and its audit line says outcome=unavailable,
// the reply's code; it said internal_error, so an alert on internal errors
// fired for a database outage (issue 19, point 8).
func TestAuditOutcomeDirectoryDown(t *testing.T) {
	e, dir, _, logged := newFailingEnv(t)
	dir.failAfter(0)
	w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT)
	if w.Code != 503 || errorCode(t, w) != "unavailable" {
		t.Fatalf("login with the directory down = %d %s; want 503 unavailable", w.Code, w.Body)
	}
	if !strings.Contains(logged.String(), "msg=login outcome=unavailable") || strings.Contains(logged.String(), "outcome=internal_error") {
		t.Errorf("log = %q; want the login's audit line with outcome=unavailable", logged.String())
	}
}

// TestAuditLineBeforeReply: serve writes a login's audit line to stderr
// before it sends the reply, though other log lines are batched (up to
// 100 ms late): a process killed right after replying has logged the
// attempt (issue 19, point 8).
func TestAuditLineBeforeReply(t *testing.T) {
	base, log, stop := startServer(t, nil, "--users", writeTestUsers(t), "--cost", "4")
	defer stop()
	for i, pw := range []string{"alice-pw", "wrong", "alice-pw"} {
		resp, body := postJSON(t, base+"/api/auth/login/", `{"username":"alice","password":"`+pw+`"}`)
		want := map[string]string{"alice-pw": "success", "wrong": "invalid_credentials"}[pw]
		if n := strings.Count(log.String(), "msg=login outcome="+want); n < 1+i/2 {
			t.Errorf("login %d (%d %s): stderr when the reply arrived holds %d audit lines with outcome=%s; want it written before the reply", i, resp.StatusCode, body, n, want)
		}
	}
}
