package usersfile_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// TestResetLinkLeavesUsersFile: a reset link, mailed or not, is kept
// beside the users file, whose bytes and modification time stay as they
// were (API.md: a reset request never rewrites the users file), and it
// works on another instance reading the same file.
func TestResetLinkLeavesUsersFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	hash := passwordtest.MustHash(t, "alice-pw", passwordtest.Cost)
	if err := usersfile.Write(path, []users.User{{Username: "alice", PasswordHash: hash, Email: "alice@example.com", Groups: []string{}}}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := usersfile.Open(path, log)
	if err != nil {
		t.Fatal(err)
	}
	b, err := usersfile.Open(path, log)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil { // a rewrite within the clock's grain shows all the same
		t.Fatal(err)
	}
	was, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var token string
	for i, mail := range []func(context.Context, users.Directory, string, time.Duration, time.Time) (string, string, error){
		users.NewMailedResetLink, users.NewResetLink, users.NewMailedResetLink,
	} {
		if _, token, err = mail(ctx, a, "alice", time.Hour, now); err != nil {
			t.Fatalf("link %d = %v; want nil", i+1, err)
		}
	}
	is, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(is, was) || !info.ModTime().Equal(old) {
		t.Errorf("users file after three reset links: %d bytes, modified %v; want its %d bytes as they were, modified %v",
			len(is), info.ModTime(), len(was), old)
	}
	if a.Writes() != 0 {
		t.Errorf("Writes() after three reset links = %d; want 0", a.Writes())
	}
	if err := users.ConfirmReset(ctx, b, "alice", token, hash, now); err != nil {
		t.Fatalf("ConfirmReset on the other instance = %v; want nil", err)
	}
	if err := users.ConfirmReset(ctx, a, "alice", token, hash, now); !errors.Is(err, users.ErrBadResetLink) {
		t.Errorf("ConfirmReset again on the first instance = %v; want ErrBadResetLink", err)
	}
	// An older users file put back does not revive the spent link.
	if err := os.WriteFile(path, was, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := users.ConfirmReset(ctx, a, "alice", token, hash, now); !errors.Is(err, users.ErrBadResetLink) {
		t.Errorf("ConfirmReset after an older users file was put back = %v; want ErrBadResetLink", err)
	}
}

// TestResetsFileCompacted: the resets file does not grow with every link:
// records of no use (superseded, their mails over an hour old) are dropped
// by an append, and the live link and the hour's mails survive it.
func TestResetsFileCompacted(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	hash := passwordtest.MustHash(t, "alice-pw", passwordtest.Cost)
	if err := usersfile.Write(path, []users.User{{Username: "alice", PasswordHash: hash, Email: "a@example.com", Groups: []string{}}}); err != nil {
		t.Fatal(err)
	}
	d, err := usersfile.Open(path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 2 {
		if _, _, err := users.NewMailedResetLink(ctx, d, "alice", time.Hour, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	var token string
	for range 300 {
		if _, token, err = users.NewResetLink(ctx, d, "alice", time.Hour, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := users.NewMailedResetLink(ctx, d, "alice", time.Hour, now.Add(time.Minute)); err != nil {
		t.Fatalf("a 3rd mail = %v; want nil", err)
	}
	if _, token, err = users.NewResetLink(ctx, d, "alice", time.Hour, now); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(usersfile.ResetsPath(path))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > 2*64+3 {
		t.Errorf("resets file after 302 links of one user: %d records; want at most %d", n, 2*64+3)
	}
	if _, _, err := users.NewMailedResetLink(ctx, d, "alice", time.Hour, now.Add(time.Minute)); !errors.Is(err, users.ErrResetMailLimit) {
		t.Errorf("a 4th mail after compactions = %v; want ErrResetMailLimit: the hour's mails survive them", err)
	}
	if err := users.ConfirmReset(ctx, d, "alice", token, hash, now); err != nil {
		t.Errorf("ConfirmReset of the last link after compactions = %v; want nil", err)
	}
}
