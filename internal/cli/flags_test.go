package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEnvName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ flag, want string }{
		{"users", "AUTHSVC_USERS"},
		{"token-ttl", "AUTHSVC_TOKEN_TTL"},
		{"max-tokens-per-user", "AUTHSVC_MAX_TOKENS_PER_USER"},
	} {
		if got := envName(tt.flag); got != tt.want {
			t.Errorf("envName(%q) = %q; want %q", tt.flag, got, tt.want)
		}
	}
}

// parsedFlags is what one parseFlags call produced, for comparison.
type parsedFlags struct {
	users      string
	ttl        time.Duration
	admin      bool
	groups     []string
	positional []string
}

// parseTestFlags runs parseFlags on a flag set like the CLI's: users and ttl
// take their defaults from AUTHSVC_USERS and AUTHSVC_TTL; admin does not.
func parseTestFlags(args []string, env map[string]string) (parsedFlags, string, error) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	users := fs.String("users", "users.json", "users file")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	admin := fs.Bool("admin", false, "admin")
	var groups stringList
	fs.Var(&groups, "group", "group (repeatable)")
	var stdout bytes.Buffer
	fs.Lookup("ttl").Usage = "`DURATION` of a lifetime"
	err := parseFlags(fs, help{synopsis: "test", about: "Tests."}, args, func(k string) string { return env[k] }, []string{"users", "ttl"}, &stdout)
	return parsedFlags{*users, *ttl, *admin, groups, fs.Args()}, stdout.String(), err
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	def := parsedFlags{users: "users.json", ttl: time.Hour, positional: []string{}}
	with := func(change func(p *parsedFlags)) parsedFlags {
		p := def
		change(&p)
		return p
	}
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want parsedFlags
	}{
		{nil, nil, def},
		{nil, map[string]string{"AUTHSVC_USERS": "/env.json", "AUTHSVC_TTL": "5m"},
			with(func(p *parsedFlags) { p.users, p.ttl = "/env.json", 5*time.Minute })},
		{[]string{"--users", "/flag.json", "--ttl=1m"}, map[string]string{"AUTHSVC_USERS": "/env.json", "AUTHSVC_TTL": "5m"},
			with(func(p *parsedFlags) { p.users, p.ttl = "/flag.json", time.Minute })},
		// Only the flags named in fromEnv read the environment.
		{nil, map[string]string{"AUTHSVC_ADMIN": "true", "AUTHSVC_GROUP": "x"}, def},
		// An empty variable is no default.
		{nil, map[string]string{"AUTHSVC_TTL": ""}, def},
		// Flags may follow and surround positional arguments.
		{[]string{"a", "--admin", "b", "--users", "x.json", "c"}, nil,
			with(func(p *parsedFlags) { p.admin, p.users, p.positional = true, "x.json", []string{"a", "b", "c"} })},
		{[]string{"--group", "dev", "alice", "-group=ops"}, nil,
			with(func(p *parsedFlags) { p.groups, p.positional = []string{"dev", "ops"}, []string{"alice"} })},
		{[]string{"-", "--admin"}, nil,
			with(func(p *parsedFlags) { p.admin, p.positional = true, []string{"-"} })},
		// "--" ends the flags, wherever it is.
		{[]string{"--admin", "--", "--users", "x.json"}, nil,
			with(func(p *parsedFlags) { p.admin, p.positional = true, []string{"--users", "x.json"} })},
		{[]string{"--", "bob", "--admin"}, nil,
			with(func(p *parsedFlags) { p.positional = []string{"bob", "--admin"} })},
		{[]string{"a", "--", "-b", "--admin"}, nil,
			with(func(p *parsedFlags) { p.positional = []string{"a", "-b", "--admin"} })},
		{[]string{"a", "--", "--"}, nil,
			with(func(p *parsedFlags) { p.positional = []string{"a", "--"} })},
		// ... but not when it is a flag's value.
		{[]string{"--users", "--", "x", "--admin"}, nil,
			with(func(p *parsedFlags) { p.users, p.admin, p.positional = "--", true, []string{"x"} })},
		{[]string{"--users", "--", "--", "--admin"}, nil,
			with(func(p *parsedFlags) { p.users, p.positional = "--", []string{"--admin"} })},
		{[]string{"--admin", "--users", "--", "--group", "g"}, nil,
			with(func(p *parsedFlags) { p.admin, p.users, p.groups = true, "--", []string{"g"} })},
	} {
		got, stdout, err := parseTestFlags(tt.args, tt.env)
		if got.positional == nil {
			got.positional = []string{}
		}
		call := fmt.Sprintf("parseFlags(%q, env %v)", tt.args, tt.env)
		if err != nil {
			t.Errorf("%s = %v; want nil error", call, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s = %+v; want %+v", call, got, tt.want)
		}
		if stdout != "" {
			t.Errorf("%s printed %q; want nothing", call, stdout)
		}
	}
}

func TestParseFlagsUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string // in the message
	}{
		{nil, map[string]string{"AUTHSVC_TTL": "forever"}, `test: invalid value "forever" for AUTHSVC_TTL: want a duration such as 24h, 90m or 1.5s`},
		{[]string{"--bogus"}, nil, "test: flag provided but not defined: -bogus"},
		{[]string{"alice", "--bogus"}, nil, "flag provided but not defined: -bogus"},
		{[]string{"--users"}, nil, "flag needs an argument: -users"},
		{[]string{"--ttl", "soon"}, nil, `test: invalid value "soon" for --ttl: want a duration such as 24h, 90m or 1.5s`},
		{[]string{"--admin=maybe"}, nil, `invalid boolean value "maybe" for -admin`},
	} {
		_, stdout, err := parseTestFlags(tt.args, tt.env)
		call := fmt.Sprintf("parseFlags(%q, env %v)", tt.args, tt.env)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%s = %v (%T); want a *usageError", call, err, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s = %q; want one line containing %q", call, msg, tt.want)
		}
		if stdout != "" {
			t.Errorf("%s printed %q; want nothing", call, stdout)
		}
	}
}

func TestParseFlagsHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"}, {"-help"}, {"-h"}, {"alice", "--help"}, {"--admin", "-h", "--bogus"},
	} {
		_, stdout, err := parseTestFlags(args, nil)
		if !errors.Is(err, errHelpShown) {
			t.Errorf("parseFlags(%q) = %v; want errHelpShown", args, err)
		}
		if !strings.HasPrefix(stdout, "usage: test\n") || !strings.Contains(stdout, "--ttl DURATION") {
			t.Errorf("parseFlags(%q) printed %q; want the test command's usage and flags", args, stdout)
		}
	}
}

func TestStringList(t *testing.T) {
	t.Parallel()
	var l stringList
	for _, v := range []string{"a", "b", ""} {
		if err := l.Set(v); err != nil {
			t.Fatalf("Set(%q) = %v; want nil", v, err)
		}
	}
	if got, want := l.String(), "a,b,"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}

func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	got, err := parsePrefixes([]string{"10.1.2.3/8", "192.0.2.1", " 2001:db8::/32 "})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.1/32", "2001:db8::/32"}
	if len(got) != len(want) {
		t.Fatalf("parsePrefixes = %v; want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("parsePrefixes[%d] = %s; want %s", i, got[i], want[i])
		}
	}
	if _, err := parsePrefixes([]string{"10.0.0.0/33"}); err == nil {
		t.Errorf("parsePrefixes(10.0.0.0/33) = nil error; want one")
	}
}
