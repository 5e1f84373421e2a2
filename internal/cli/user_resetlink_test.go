package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"authsvc/internal/servertest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// resetNote is user reset-link's line on stderr; its group is the expiry.
var resetNote = regexp.MustCompile(`^reset link for "[^"]*" in \S+, valid until (\S+Z); it works once\n$`)

// resetTokenAtEnd is a reset token at the end of a link: every pattern
// of these tests ends in {token}.
var resetTokenAtEnd = regexp.MustCompile(`[A-Za-z0-9_-]{43}$`)

// resetLink runs user reset-link on the users file path and fails t
// unless it prints one link on stdout and its note on stderr; it returns
// the link and when the note says it expires.
func resetLink(t *testing.T, path string, env map[string]string, args ...string) (link string, expires time.Time) {
	t.Helper()
	code, stdout, stderr := runCLI(t, "", env, append([]string{"user", "reset-link", "--users", path}, args...)...)
	if code != 0 {
		t.Fatalf("user reset-link %s = exit %d, stderr %q; want 0", strings.Join(args, " "), code, stderr)
	}
	link, ok := strings.CutSuffix(stdout, "\n")
	if !ok || link == "" || strings.Contains(link, "\n") {
		t.Fatalf("user reset-link %s: stdout %q; want a link alone on one line", strings.Join(args, " "), stdout)
	}
	m := resetNote.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("user reset-link %s: stderr %q; want one line matching %s", strings.Join(args, " "), stderr, resetNote)
	}
	if token := resetTokenAtEnd.FindString(link); token == "" || strings.Contains(stderr, token) {
		t.Errorf("user reset-link: link %q, stderr %q; want a link that ends in its token, and the token on stdout alone", link, stderr)
	}
	expires, err := time.Parse(time.RFC3339, m[1])
	if err != nil {
		t.Fatalf("user reset-link: the note's expiry %q: %v", m[1], err)
	}
	return link, expires
}

// splitResetLink returns the uid and token of a link of the default
// pattern, {uid}/{token}.
func splitResetLink(t *testing.T, link string) (uid, token string) {
	t.Helper()
	uid, token, ok := strings.Cut(link, "/")
	if !ok || strings.Contains(token, "/") {
		t.Fatalf("link %q; want {uid}/{token}", link)
	}
	return uid, token
}

// confirmReset spends token of username's reset link in the users file
// path, setting a new password hash, as the confirm endpoint does.
func confirmReset(t *testing.T, path, username, token string) error {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("a new password"), servertest.TestCost)
	if err != nil {
		t.Fatal(err)
	}
	return users.ConfirmReset(context.Background(), usersfile.New(path, slog.New(slog.DiscardHandler)), username, token, string(hash), time.Now())
}

// storedResetLink returns the last reset link that the resets file beside
// the users file at path keeps for username (USERS.resets: a link never
// rewrites the users file), as its digest and expiry; nil for none.
func storedResetLink(t *testing.T, path, username string) *users.ResetLink {
	t.Helper()
	data, err := os.ReadFile(usersfile.ResetsPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var last *users.ResetLink
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var rec struct {
			Username string `json:"username"`
			users.ResetLink
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("%s: %q: %v", usersfile.ResetsPath(path), line, err)
		}
		if rec.Username == username && rec.Digest != "" {
			last = &users.ResetLink{Digest: rec.Digest, ExpiresAt: rec.ExpiresAt}
		}
	}
	return last
}

// TestCLIResetLinkWorksOnce: the link printed names the user in its uid,
// sets a password once through its token, and the resets file beside the
// users file keeps the token's digest alone, the users file left as it
// was; the note on stderr never carries the token.
func TestCLIResetLinkWorksOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	addUser(t, path, "bob", "pw")
	before := time.Now()
	was, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	link, expires := resetLink(t, path, nil, "alice")
	uid, token := splitResetLink(t, link)
	if got, err := users.ParseResetUID(uid); err != nil || got != "alice" {
		t.Errorf("ParseResetUID(%q) = %q, %v; want alice", uid, got, err)
	}
	if len(token) != 43 {
		t.Errorf("token %q: %d characters; want 43 (32 bytes in base64url)", token, len(token))
	}
	if d := expires.Sub(before); d < time.Hour-time.Second || d > time.Hour+time.Minute {
		t.Errorf("the note's expiry is %v after the command started; want 1h, the default", d)
	}

	if data, err := os.ReadFile(path); err != nil || !bytes.Equal(data, was) {
		t.Errorf("the users file after user reset-link: %d bytes, %v; want the %d bytes of before", len(data), err, len(was))
	}
	data, err := os.ReadFile(usersfile.ResetsPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(token)) {
		t.Errorf("the resets file holds the reset token %q; want its digest alone", token)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(token)
	digest := sha256.Sum256(raw)
	if stored := storedResetLink(t, path, "alice"); stored == nil || stored.Digest != hex.EncodeToString(digest[:]) {
		t.Fatalf("alice's stored reset link = %+v; want one, with the token's digest", stored)
	}

	if err := confirmReset(t, path, "bob", token); !errors.Is(err, users.ErrBadResetLink) {
		t.Errorf("ConfirmReset(bob, alice's token) = %v; want ErrBadResetLink", err)
	}
	if err := confirmReset(t, path, "alice", token); err != nil {
		t.Fatalf("ConfirmReset(alice, the token printed) = %v; want nil", err)
	}
	if err := confirmReset(t, path, "alice", token); !errors.Is(err, users.ErrBadResetLink) {
		t.Errorf("ConfirmReset again with the same token = %v; want ErrBadResetLink (a link works once)", err)
	}
}

// TestCLIResetLinkSupersedes: a newer link makes the older one dead.
func TestCLIResetLinkSupersedes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	_, old := splitResetLink(t, linkOf(resetLink(t, path, nil, "alice")))
	_, newer := splitResetLink(t, linkOf(resetLink(t, path, nil, "alice")))
	if err := confirmReset(t, path, "alice", old); !errors.Is(err, users.ErrBadResetLink) {
		t.Errorf("ConfirmReset(the older link) = %v; want ErrBadResetLink", err)
	}
	if err := confirmReset(t, path, "alice", newer); err != nil {
		t.Errorf("ConfirmReset(the newer link) = %v; want nil", err)
	}
}

// linkOf returns a link, dropping its expiry.
func linkOf(link string, _ time.Time) string { return link }

// TestCLIResetLinkTTLAndPattern: --ttl sets the expiry, in the note and
// the record alike, and so does serve's AUTHSVC_RESET_TTL without it, the
// flag winning; --reset-url and AUTHSVC_RESET_URL shape the link, the
// flag winning.
func TestCLIResetLinkTTLAndPattern(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "zoë", "pw")
	before := time.Now()
	_, expires := resetLink(t, path, nil, "--ttl", "30m", "zoë")
	stored := storedResetLink(t, path, "zoë")
	if d := expires.Sub(before); d < 30*time.Minute-time.Second || d > 31*time.Minute {
		t.Errorf("--ttl 30m: the note's expiry is %v after the command started; want 30m", d)
	}
	if stored == nil || !stored.ExpiresAt.Truncate(time.Second).Equal(expires) {
		t.Errorf("--ttl 30m: stored link %+v; want it to expire at %v, as the note says", stored, expires)
	}

	for _, tt := range []struct {
		env  map[string]string
		args []string
		want time.Duration
	}{
		{map[string]string{"AUTHSVC_RESET_TTL": "10m"}, nil, 10 * time.Minute},
		{map[string]string{"AUTHSVC_RESET_TTL": "10m"}, []string{"--ttl", "2h"}, 2 * time.Hour},
		{nil, nil, users.DefaultResetTTL},
	} {
		before := time.Now()
		_, expires := resetLink(t, path, tt.env, append(tt.args, "zoë")...)
		if d := expires.Sub(before); d < tt.want-time.Second || d > tt.want+time.Minute {
			t.Errorf("user reset-link %v (env %v): the note's expiry is %v after the command started; want %v", tt.args, tt.env, d, tt.want)
		}
	}

	uid := users.ResetUID("zoë")
	env := map[string]string{"AUTHSVC_RESET_URL": "https://env.example/r?u={uid}&t={token}"}
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want *regexp.Regexp
	}{
		{env, nil, regexp.MustCompile(`^https://env\.example/r\?u=` + uid + `&t=[A-Za-z0-9_-]{43}$`)},
		{env, []string{"--reset-url", "https://app.example/reset/{uid}/{token}"}, regexp.MustCompile(`^https://app\.example/reset/` + uid + `/[A-Za-z0-9_-]{43}$`)},
	} {
		link, _ := resetLink(t, path, tt.env, append(tt.args, "zoë")...)
		if !tt.want.MatchString(link) {
			t.Errorf("user reset-link %v (env %v) = %q; want a match of %s", tt.args, tt.env, link, tt.want)
		}
	}
}

// TestCLIResetLinkRefused: a disabled or unknown user is exit 1, a bad
// --ttl or --reset-url exit 2, each one line on stderr, and none leaves
// a link in the users file.
func TestCLIResetLinkRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	addUser(t, path, "alice", "pw")
	addUser(t, path, "gone", "pw")
	mustRunCLI(t, "", "user", "disable", "--users", path, "gone")
	for _, tt := range []struct {
		args []string
		env  map[string]string
		code int
		want string
	}{
		{[]string{"gone"}, nil, 1, `user reset-link: user "gone" is disabled; enable it first`},
		{[]string{"nobody"}, nil, 1, `user reset-link: no user "nobody"`},
		{[]string{"--ttl", "0", "alice"}, nil, 2, "user reset-link: --ttl 0: want a duration above 0"},
		{[]string{"--ttl", "-5m", "alice"}, nil, 2, "user reset-link: --ttl -5m: want a duration above 0"},
		{[]string{"--ttl", "soon", "alice"}, nil, 2, "user reset-link: invalid value"},
		{[]string{"--reset-url", "https://app.example/reset/{token}", "alice"}, nil, 2, "user reset-link: --reset-url \"https://app.example/reset/{token}\": want a pattern with {uid} and {token}"},
		{[]string{"--reset-url", "{uid}/{token}\nX-Evil: 1", "alice"}, nil, 2, "user reset-link: --reset-url \"{uid}/{token}\\nX-Evil: 1\": a control character"},
		{[]string{"alice"}, map[string]string{"AUTHSVC_RESET_URL": "{uid}"}, 2, "want a pattern with {uid} and {token}"},
		{[]string{"alice"}, map[string]string{"AUTHSVC_RESET_TTL": "soon"}, 2, `user reset-link: invalid value "soon" for AUTHSVC_RESET_TTL`},
		{[]string{"alice"}, map[string]string{"AUTHSVC_RESET_TTL": "0s"}, 2, "user reset-link: --ttl 0: want a duration above 0"},
		{nil, nil, 2, "user reset-link: want exactly one USERNAME"},
	} {
		code, stdout, stderr := runCLI(t, "", tt.env, append([]string{"user", "reset-link", "--users", path}, tt.args...)...)
		if code != tt.code || stdout != "" || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("user reset-link %q (env %v) = exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, one line with %q",
				tt.args, tt.env, code, stdout, stderr, tt.code, tt.want)
		}
	}
	for name, u := range mustReadUsers(t, path) {
		if u.ResetLink != nil {
			t.Errorf("user %q has a reset link after only refusals; want none", name)
		}
	}
}

// TestCLIResetLinkHelp: user reset-link --help prints its usage and flags.
func TestCLIResetLinkHelp(t *testing.T) {
	t.Parallel()
	for _, args := range []string{"user reset-link --help", "user reset-link alice -h"} {
		code, stdout, stderr := runCLI(t, "", nil, strings.Fields(args)...)
		if code != 0 || stderr != "" {
			t.Errorf("authsvc %s = exit %d, stderr %q; want exit 0, nothing on stderr", args, code, stderr)
		}
		checkGolden(t, "user-reset-link-help.golden", stdout)
	}
}
