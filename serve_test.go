package main

import (
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUsageListsEveryServeFlag keeps --help and the serve flags in step, both ways.
func TestUsageListsEveryServeFlag(t *testing.T) {
	var c serveConfig
	var trusted, cors stringList
	fs := serveFlagSet(&c, &trusted, &cors)
	defined := make(map[string]bool)
	fs.VisitAll(func(f *flag.Flag) {
		defined[f.Name] = true
		if !strings.Contains(usage, "--"+f.Name+" ") {
			t.Errorf("usage does not list serve flag --%s", f.Name)
		}
	})
	serveSection := usage[:strings.Index(usage, "authsvc user add")]
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z-]+)`).FindAllStringSubmatch(serveSection, -1) {
		if !defined[m[1]] {
			t.Errorf("usage lists --%s, which serve does not define", m[1])
		}
	}
}

func TestParseServeFlags(t *testing.T) {
	env := map[string]string{"AUTHSVC_TOKEN_TTL": "1h", "AUTHSVC_TRUSTED_PROXY": "10.0.0.0/8,192.0.2.1", "AUTHSVC_LOGIN_FAILURES": "7"}
	getenv := func(k string) string { return env[k] }
	c, err := parseServeFlags([]string{"--login-failures", "3", "--cors-origin", "https://a.example"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.tokenTTL != time.Hour || c.throttle.PairFailures != 3 || len(c.trustedProxies) != 2 || len(c.corsOrigins) != 1 {
		t.Errorf("parseServeFlags = ttl %v, failures %d, proxies %v, origins %v; want 1h (env), 3 (flag wins), 2 proxies (env), 1 origin",
			c.tokenTTL, c.throttle.PairFailures, c.trustedProxies, c.corsOrigins)
	}
	c, err = parseServeFlags([]string{"--trusted-proxy", "127.0.0.1"}, getenv, io.Discard)
	if err != nil || len(c.trustedProxies) != 1 || c.trustedProxies[0].String() != "127.0.0.1/32" {
		t.Errorf("--trusted-proxy on the command line with AUTHSVC_TRUSTED_PROXY set = %v, %v; want only the flag's proxy", c.trustedProxies, err)
	}
	for _, args := range [][]string{
		{"--token-ttl", "-1s"}, {"--log-format", "xml"}, {"--login-rate", "0"}, {"--bcrypt-slots", "0"},
		{"--refusal-delay", "-1s"}, {"--trusted-proxy", "nonsense"}, {"--cors-origin", "*"}, {"extra"},
	} {
		if _, err := parseServeFlags(args, getenv, io.Discard); err == nil {
			t.Errorf("parseServeFlags(%q) = nil error; want a usage error", args)
		} else if _, ok := err.(*usageError); !ok {
			t.Errorf("parseServeFlags(%q) = %v; want a *usageError (exit 2)", args, err)
		}
	}
}
