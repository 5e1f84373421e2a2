package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// revocationResult is TestRevocationP99's measure: from a logout's 204 on
// one instance to the first 401 for that token on another, both on one
// Redis and caching the tokens they check, under /info load.
type revocationResult struct {
	p50, p99 float64 // ms
	line     string  // the test's own log line
	err      error
}

var reRevocation = regexp.MustCompile(`revocation p99 ([\d.]+) ms, p50 ([\d.]+) ms.*`)

// revocation runs TestRevocationP99 from integration/faults' test binary (it
// starts its own redis-server and two servers of the authsvc binary) and
// reads its log line.
func (d *driver) revocation() revocationResult {
	if d.cfg.redisSkip != "" {
		return revocationResult{err: fmt.Errorf("%s", d.cfg.redisSkip)}
	}
	d.logf("== revocation p99: TestRevocationP99 (1,000 logouts on one instance, each polled on another)")
	cmd := exec.CommandContext(d.ctx, d.cfg.integrationbin, "-test.run", "^TestRevocationP99$", "-test.v", "-test.count", "1", "-test.timeout", "10m")
	// AUTHSVC_TEST_BINARY: the authsvc built for the bench, not one that
	// integration/faults' TestMain builds.
	// AUTHSVC_BENCH=1: the test's full 1,000 revocations, not go test's 100.
	cmd.Env = append(os.Environ(), "AUTHSVC_REQUIRE_REDIS=1", "AUTHSVC_BENCH=1", "AUTHSVC_TEST_BINARY="+d.cfg.authsvc)
	out, err := cmd.CombinedOutput()
	m := reRevocation.FindStringSubmatch(string(out))
	if m == nil {
		if err == nil {
			err = fmt.Errorf("no p99 line in its output")
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return revocationResult{err: fmt.Errorf("TestRevocationP99: %v: %s", err, strings.Join(lines[max(0, len(lines)-3):], " "))}
	}
	r := revocationResult{line: m[0]}
	r.p99, _ = strconv.ParseFloat(m[1], 64)
	r.p50, _ = strconv.ParseFloat(m[2], 64)
	d.logf("%s", m[0])
	return r
}
