package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// createdLine is token create's line on stderr; its first group is the id.
var createdLine = regexp.MustCompile(`^created personal access token ([0-9a-f]{16}) \("[^"]*"\) of user "[^"]*" in \S+: scopes (\S+); expires (\S+)\n$`)

// createToken runs token create on the directory spec and fails t unless
// it prints a token alone on stdout and its note on stderr; it returns
// the token and its id.
func createToken(t *testing.T, spec string, env map[string]string, args ...string) (token, id string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", env, append([]string{"token", "create", "--users", spec}, args...)...)
	if code != 0 {
		t.Fatalf("token create %s = exit %d, stderr %q; want 0", strings.Join(args, " "), code, stderr)
	}
	token, ok := strings.CutSuffix(stdout, "\n")
	if !ok || !tokens.ValidPAT(token) {
		t.Fatalf("token create %s: stdout %q; want a personal access token alone on one line", strings.Join(args, " "), stdout)
	}
	m := createdLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("token create %s: stderr %q; want one line matching %s", strings.Join(args, " "), stderr, createdLine)
	}
	if strings.Contains(stderr, token) {
		t.Errorf("token create: stderr %q holds the token; want it on stdout alone", stderr)
	}
	return token, m[1]
}

// storedToken returns username's stored token id in the directory spec.
func storedToken(t *testing.T, spec, username, id string) users.AccessToken {
	t.Helper()
	for _, tok := range listUsersIn(t, spec)[username].AccessTokens {
		if tok.ID == id {
			return tok
		}
	}
	t.Fatalf("user %q in %s: no stored access token %s", username, spec, id)
	return users.AccessToken{}
}

// TestCLITokenCreateStoresDigest: token create prints a token of the
// format once, and the users file keeps its SHA-256, its prefix, its
// scopes and expiry, and never the token.
func TestCLITokenCreateStoresDigest(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	before := time.Now()
	token, id := createToken(t, path, nil, "--name", "ci deploy", "--scope", "info", "--scope", "introspect", "--expires", "48h", "alice")

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(token))
	digest := hex.EncodeToString(sum[:])
	if bytes.Contains(data, []byte(token)) || bytes.Contains(data, []byte(token[tokens.PATShownPrefix:])) {
		t.Errorf("the users file holds the token %q; want its digest alone", token)
	}
	if !bytes.Contains(data, []byte(`"digest": "`+digest+`"`)) {
		t.Errorf("the users file lacks the token's SHA-256 %s:\n%s", digest, data)
	}
	got := storedToken(t, path, "alice", id)
	want := users.AccessToken{ID: id, Name: "ci deploy", Digest: digest, Prefix: token[:tokens.PATShownPrefix],
		Scopes: []string{"info", "introspect"}, CreatedAt: got.CreatedAt, ExpiresAt: got.ExpiresAt}
	if !equalAccessTokens(got, want) {
		t.Errorf("stored token = %+v; want %+v", got, want)
	}
	if !expiresAfter(got, 48*time.Hour) || got.CreatedAt.Before(before.Add(-time.Second)) || time.Since(got.CreatedAt) > time.Minute {
		t.Errorf("stored token: created %v, expires %v; want created now and expiring 48h later", got.CreatedAt, got.ExpiresAt)
	}
}

// expiresAfter reports whether t expires d after it was made, to the
// second below (an expiry keeps whole seconds).
func expiresAfter(t users.AccessToken, d time.Duration) bool {
	ttl := t.ExpiresAt.Sub(t.CreatedAt)
	return t.ExpiresAt.Equal(t.ExpiresAt.Truncate(time.Second)) && ttl <= d && ttl > d-time.Second
}

func equalAccessTokens(a, b users.AccessToken) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Digest == b.Digest && a.Prefix == b.Prefix &&
		strings.Join(a.Scopes, " ") == strings.Join(b.Scopes, " ") && a.CreatedAt.Equal(b.CreatedAt) &&
		a.ExpiresAt.Equal(b.ExpiresAt) && a.LastUsedAt.Equal(b.LastUsedAt)
}

// TestCLITokenCreateExpiry: --expires takes a duration or an RFC 3339
// time; the default is 30 days, or --pat-max-ttl when shorter.
func TestCLITokenCreateExpiry(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	at := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	for i, tt := range []struct {
		args []string
		env  map[string]string
		want time.Duration // from creation; 0: at
	}{
		{nil, nil, 30 * 24 * time.Hour},
		{[]string{"--expires", "90m"}, nil, 90 * time.Minute},
		{[]string{"--expires", "8784h"}, nil, 8784 * time.Hour},
		{[]string{"--expires", at.Format(time.RFC3339)}, nil, 0},
		{nil, map[string]string{"AUTHSVC_PAT_MAX_TTL": "24h"}, 24 * time.Hour},
		{[]string{"--pat-max-ttl", "10000h", "--expires", "9000h"}, nil, 9000 * time.Hour},
	} {
		_, id := createToken(t, path, tt.env, append(tt.args, "--name", fmt.Sprint("token ", i), "alice")...)
		got := storedToken(t, path, "alice", id)
		if tt.want == 0 && !got.ExpiresAt.Equal(at) || tt.want != 0 && !expiresAfter(got, tt.want) {
			t.Errorf("token create %v (env %v): expires %v, created %v; want %v later, or %v", tt.args, tt.env, got.ExpiresAt, got.CreatedAt, tt.want, at)
		}
	}
}

// TestCLITokenCreateRefused: every refusal is one line on stderr, with
// exit 2 for a mistake on the command line and 1 for what the user's
// record refuses, and leaves the users file as it was.
func TestCLITokenCreateRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	addUser(t, path, "root", "pw", "--admin")
	addUser(t, path, "gone", "pw")
	mustRunCLI(t, "", "user", "disable", "--users", path, "gone")
	createToken(t, path, nil, "--name", "ci", "alice")
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tt := range []struct {
		args []string
		env  map[string]string
		code int
		want string
	}{
		{[]string{"alice"}, nil, 2, "token create: --name: empty"},
		{[]string{"--name", "a\tb", "alice"}, nil, 2, "token create: --name: control character U+0009 refused"},
		{[]string{"--name", strings.Repeat("n", 101), "alice"}, nil, 2, "token create: --name: 101 characters; at most 100"},
		{[]string{"--name", "x", "--scope", "write", "alice"}, nil, 2, `token create: --scope: unknown scope "write"`},
		{[]string{"--name", "x", "--scope", "info", "--scope", "info", "alice"}, nil, 2, `token create: --scope: scope "info" repeated`},
		{[]string{"--name", "x", "--expires", "soon", "alice"}, nil, 2, `token create: --expires "soon": want a duration such as 720h or an RFC 3339 time`},
		{[]string{"--name", "x", "--expires", "2027-03-01", "alice"}, nil, 2, `token create: --expires "2027-03-01": want a duration`},
		{[]string{"--name", "x", "--expires", "-1h", "alice"}, nil, 2, `token create: --expires "-1h": not in the future`},
		{[]string{"--name", "x", "--expires", "0s", "alice"}, nil, 2, `token create: --expires "0s": not in the future`},
		{[]string{"--name", "x", "--expires", past, "alice"}, nil, 2, `not in the future`},
		{[]string{"--name", "x", "--expires", "8785h", "alice"}, nil, 2, `token create: --expires "8785h": more than --pat-max-ttl 8784h from now`},
		{[]string{"--name", "x", "--expires", "48h", "alice"}, map[string]string{"AUTHSVC_PAT_MAX_TTL": "24h"}, 2, `more than --pat-max-ttl 24h from now`},
		{[]string{"--name", "x", "--pat-max-ttl", "0", "alice"}, nil, 2, "token create: --pat-max-ttl 0: want a duration above 0"},
		{[]string{"--name", "x", "--pat-max-ttl", "long", "alice"}, nil, 2, "token create: invalid value \"long\" for --pat-max-ttl"},
		{[]string{"--name", "x"}, nil, 2, "token create: want exactly one USERNAME"},
		{[]string{"--name", "x", "alice", "root"}, nil, 2, "token create: want exactly one USERNAME"},
		{[]string{"--name", "x", "--scope", "admin", "alice"}, nil, 1, `token create: scope admin: "alice" is not an admin`},
		{[]string{"--name", "x", "nobody"}, nil, 1, `token create: no user "nobody"`},
		{[]string{"--name", "x", "gone"}, nil, 1, `token create: user "gone" is disabled`},
		{[]string{"--name", "ci", "alice"}, nil, 1, `token create: user "alice" has a live personal access token of that name`},
	} {
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t, "", tt.env, append([]string{"token", "create", "--users", path}, tt.args...)...)
		call := "token create " + strings.Join(tt.args, " ")
		if code != tt.code || stdout != "" || !strings.HasPrefix(stderr, "authsvc: ") || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s = exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, one line with %q", call, code, stdout, stderr, tt.code, tt.want)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
			t.Errorf("%s failed, but changed the users file", call)
		}
	}
	// An admin's token may have the admin scope.
	createToken(t, path, nil, "--name", "ops", "--scope", "admin", "root")
}
