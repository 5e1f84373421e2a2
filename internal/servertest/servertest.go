// Package servertest is what tests of a running authsvc share at every
// level, from internal/cli's to the process-level packages (through
// integration/harness): a log that can wait for a line, the HTTP calls of
// a login and a token check, and users-file fixtures. It knows nothing of
// the commands (internal/cli imports it in its tests), so each helper is
// written once.
package servertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"

	"golang.org/x/crypto/bcrypt"
)

// LineLog is a stderr that keeps every line and can wait for one.
type LineLog struct {
	mu    sync.Mutex // guards buf, lines and waits
	buf   []byte
	lines []string
	wake  chan struct{}
}

// NewLineLog returns an empty LineLog.
func NewLineLog() *LineLog { return &LineLog{wake: make(chan struct{})} }

func (l *LineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	close(l.wake)
	l.wake = make(chan struct{})
	return len(p), nil
}

func (l *LineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// WaitFor returns the submatches of the first line matching re, waiting up to 10 s.
func (l *LineLog) WaitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	seen := 0
	for {
		l.mu.Lock()
		for ; seen < len(l.lines); seen++ {
			if m := re.FindStringSubmatch(l.lines[seen]); m != nil {
				l.mu.Unlock()
				return m
			}
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("no log line matching %s within 60s; log:\n%s", re, l)
		}
	}
}

// PostJSON posts body, JSON, to url and returns the response and its body.
func PostJSON(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// GetInfo asks base's /api/auth/info, with query, as token's holder and
// returns the status and the body.
func GetInfo(t *testing.T, base, token, query string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/auth/info"+query, nil)
	req.Header.Set("authorization", "TOKEN "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// LoginToken logs username in on base and returns the token; it fails t
// unless the login answers 200.
func LoginToken(t *testing.T, base, username, password string) string {
	t.Helper()
	resp, body := PostJSON(t, base+"/api/auth/login/", fmt.Sprintf(`{"username":%q,"password":%q}`, username, password))
	if resp.StatusCode != 200 {
		t.Fatalf("login(%s) = %d %s; want 200", username, resp.StatusCode, body)
	}
	var reply struct{ Token string }
	json.Unmarshal([]byte(body), &reply)
	return reply.Token
}

// UsersJSON returns a users file holding the given entries, each a JSON object.
func UsersJSON(entries ...string) string {
	return `{"users": [` + strings.Join(entries, ",\n") + `]}`
}

// Entry returns a users file entry for username with the given extra fields.
func Entry(username string, extra ...string) string {
	fields := append([]string{fmt.Sprintf("%q: %q", "username", username)}, extra...)
	return "{" + strings.Join(fields, ", ") + "}"
}

// HashField is a users file entry's password_hash field of h.
func HashField(h string) string { return fmt.Sprintf(`"password_hash": %q`, h) }

// OKAlice is a users file entry of alice with a valid hash.
var OKAlice = Entry("alice", HashField(passwordtest.Hash))

// CheckMode fails t unless the file at path has permission bits mode.
func CheckMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Errorf("os.Stat(%q) = %v", path, err)
		return
	}
	if got := info.Mode().Perm(); got != mode {
		t.Errorf("mode of %s = %v; want %v", path, got, mode)
	}
}

// DirNames returns the sorted names in dir.
func DirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// SyncBuffer is a bytes.Buffer safe for a writer and a reader at once: a
// log the server's goroutines write to while a test reads it.
type SyncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Take returns what was written since the last Take.
func (b *SyncBuffer) Take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}

// TestCost keeps bcrypt fast in tests.
const TestCost = bcrypt.MinCost

// TestUsers: alice (dev), bob (admin), carol (disabled). Each password is
// the username + "-pw".
func TestUsers(t testing.TB) []users.User {
	t.Helper()
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), TestCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	return []users.User{
		{Username: "alice", PasswordHash: hash("alice-pw"), Name: "Alice", Email: "alice@example.com", Groups: []string{"dev"}},
		{Username: "bob", PasswordHash: hash("bob-pw"), Name: "Bob", Groups: []string{}, Admin: true},
		{Username: "carol", PasswordHash: hash("carol-pw"), Groups: []string{}, Disabled: true},
	}
}
