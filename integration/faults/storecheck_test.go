package faults

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"authsvc/internal/cli"
	"authsvc/internal/testservers"
)

// TestServeStopsOnRefusedStore: a Redis that refuses the store's
// configuration (credentials, database) stops serve with one line that
// does not quote the password (issue 19, point 9); before, serve started
// and answered 503 to every request.
func TestServeStopsOnRefusedStore(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	url, _, _ := testservers.RedisWith(t, "--requirepass", "the-password")
	host := strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")
	for _, store := range []string{
		"redis://:not-the-password@" + host + "/0", // a wrong password
		"redis://" + host + "/0",                   // none
		"redis://:the-password@" + host + "/99",    // no such database
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := cli.Run(ctx, []string{"authsvc", "serve", "--addr", "127.0.0.1:0", "--users", harness.WriteTestUsers(t), "--store", store}, func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut {
			t.Errorf("serve --store %s = %v (timed out %v); want it to stop at once with an error", store, err, timedOut)
			continue
		}
		var line strings.Builder
		code := cli.ExitStatus(err, &line)
		if code != 1 || strings.Count(line.String(), "\n") != 1 || !strings.Contains(line.String(), "refuses") || strings.Contains(line.String(), "not-the-password") {
			t.Errorf("serve --store %s: exit %d, %q; want exit 1, one line saying the store refuses, without the password", store, code, line.String())
		}
	}
}

// TestServeWaitsForStore: a Redis not up yet is waited for: serve starts,
// /readyz answers 503 until Redis answers, then 200, and logins work, with
// no restart.
func TestServeWaitsForStore(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	url, stop, restart := testservers.Redis(t)
	if stop == nil {
		t.Skip("needs a Redis it can stop: unset AUTHSVC_TEST_REDIS")
	}
	stop()
	base, log, stopServer := harness.StartServer(t, nil, "--users", harness.WriteTestUsers(t), "--store", url, "--store-prefix", testservers.UniquePrefix(), "--cost", "4")
	defer stopServer()
	log.WaitFor(t, regexp.MustCompile(`token store not reachable yet`))
	readyz := func() int {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := readyz(); code != 503 {
		t.Errorf("/readyz with Redis down = %d; want 503", code)
	}
	restart()
	deadline := time.Now().Add(5 * time.Second)
	for readyz() != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still not 200 5 s after Redis came up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	servertest.LoginToken(t, base, "alice", "alice-pw")
}
