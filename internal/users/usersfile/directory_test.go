package usersfile

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"
)

// TestFileDirectoryRewrittenWhileRead: a file rewritten in place while a
// reload reads it (a hand edit, or cat >) is refused half-written, and the
// finished file is then picked up within 5 s, with no SIGHUP.
func TestFileDirectoryRewrittenWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	alice := users.User{Username: "alice", PasswordHash: passwordtest.MustHash(t, "alice-pw", passwordtest.Cost), Groups: []string{}}
	bob := users.User{Username: "bob", PasswordHash: passwordtest.MustHash(t, "bob-pw", passwordtest.Cost), Groups: []string{}}
	if err := Write(path, []users.User{alice}); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(path+".full", []users.User{alice, bob}); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(path + ".full")
	if err != nil {
		t.Fatal(err)
	}
	// The reload reads the first half; the writer finishes before the parse.
	if err := os.WriteFile(path, full[:len(full)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	d.afterRead = func() {
		d.afterRead = nil
		if err := os.WriteFile(path, full, 0o600); err != nil {
			t.Error(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Watch(ctx, 10*time.Millisecond, nil, users.WatchHooks{})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := d.Lookup(ctx, "bob"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob, in the finished file, not loaded 5 s after the write completed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchReportsCuts: a reload that Watch makes tells the Cut hook of the
// users whose tokens died in it (disabled, deleted), at the reload's time,
// and not of one that was disabled before or did not change.
func TestWatchReportsCuts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	alice := users.User{Username: "alice", PasswordHash: testHash, Groups: []string{}}
	bob := users.User{Username: "bob", PasswordHash: testHash, Groups: []string{}}
	carol := users.User{Username: "carol", PasswordHash: testHash, Groups: []string{}, Disabled: true}
	if err := Write(path, []users.User{alice, bob, carol}); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	type cut struct {
		name   string
		before time.Time
	}
	cuts := make(chan cut, 10)
	reloaded := make(chan error, 1)
	hup := make(chan os.Signal)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Watch(ctx, time.Hour, hup, users.WatchHooks{
		Cut:      func(c users.Cut) { cuts <- cut{c.Username, c.Before} },
		Reloaded: func(err error) { reloaded <- err },
	})
	for _, step := range []struct {
		name  string
		users []users.User
		want  string // the one user cut
	}{
		{"alice disabled", []users.User{{Username: "alice", PasswordHash: testHash, Groups: []string{}, Disabled: true}, bob, carol}, "alice"},
		{"bob deleted", []users.User{{Username: "alice", PasswordHash: testHash, Groups: []string{}, Disabled: true}, carol}, "bob"},
	} {
		if err := Write(path, step.users); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		hup <- os.Interrupt
		if err := <-reloaded; err != nil {
			t.Fatalf("%s: reload = %v; want nil", step.name, err)
		}
		end := time.Now()
		var got []cut
		for len(cuts) > 0 {
			got = append(got, <-cuts)
		}
		if len(got) != 1 || got[0].name != step.want || got[0].before.Before(start) || got[0].before.After(end) {
			t.Errorf("%s: Cut calls = %v; want one for %s, at the reload (between %v and %v)", step.name, got, step.want, start, end)
		}
	}
}

// TestFileRecheckRefusedFile: a users file changed into one that does not
// load leaves the users in force older than the file, so Recheck cannot
// say, and a token its copy finds dead is neither refused nor removed on
// the strength of that copy: SessionUser answers an error (503), not nil.
// A token the copy finds live is answered from it as before.
func TestFileRecheckRefusedFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	alice := users.User{Username: "alice", PasswordHash: passwordtest.MustHash(t, "alice-pw", passwordtest.Cost), Groups: []string{}, TokensAfter: t0}
	if err := Write(path, []users.User{alice}); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"users": [{"username": "alice"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if u, err := d.Recheck(ctx, "alice"); !errors.Is(err, users.ErrUnavailable) {
		t.Errorf("Recheck(alice) of a file changed into one that does not load = %q, %v; want ErrUnavailable", userName(u), err)
	}
	// Again: the refused file is remembered, and still not trusted.
	if u, err := d.Recheck(ctx, "alice"); !errors.Is(err, users.ErrUnavailable) {
		t.Errorf("a second Recheck(alice) of the refused file = %q, %v; want ErrUnavailable", userName(u), err)
	}
	newer := users.SessionGeneration(1) // a token of a password change the broken file may hold
	if u, err := users.SessionUser(ctx, d, "alice", t0.Add(time.Hour), newer); u != nil || !errors.Is(err, users.ErrUnavailable) {
		t.Errorf("SessionUser(alice, a token the copy finds dead) with the file refused = %q, %v; want nil, ErrUnavailable", userName(u), err)
	}
	if u, err := users.SessionUser(ctx, d, "alice", t0.Add(time.Hour), users.SessionGeneration(0)); u == nil || err != nil {
		t.Errorf("SessionUser(alice, a token the copy finds live) with the file refused = %q, %v; want alice", userName(u), err)
	}
	// The file mended: Recheck reads it again.
	if err := Write(path, []users.User{alice}); err != nil {
		t.Fatal(err)
	}
	if u, err := d.Recheck(ctx, "alice"); err != nil || userName(u) != "alice" {
		t.Errorf("Recheck(alice) once the file loads again = %q, %v; want alice", userName(u), err)
	}
}

func TestUserSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	if _, err := Open(path, log); err == nil {
		t.Errorf("Open(missing file) = nil error; want an error")
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, log); err == nil || !strings.Contains(err.Error(), path+": not a users file") {
		t.Errorf("Open(broken file) = %v; want an error naming the file and the problem", err)
	}

	// mtime steps forward by a second at each write, so changed() sees every one.
	mtime := time.Now().Add(-time.Hour)
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		mtime = mtime.Add(time.Second)
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	names := func(d *userIndex) []string {
		var ns []string
		for n := range d.byName {
			ns = append(ns, n)
		}
		return ns
	}

	write(usersJSON(okAlice))
	s, err := Open(path, log)
	if err != nil {
		t.Fatalf("Open(good file) = %v", err)
	}
	first := s.index()
	if got := names(first); !reflect.DeepEqual(got, []string{"alice"}) {
		t.Errorf("users after load = %q; want [alice]", got)
	}
	if s.changed() {
		t.Errorf("changed() right after load = true; want false")
	}

	// A broken rewrite is refused; alice stays.
	write(`{"users": [` + okAlice)
	if !s.changed() {
		t.Errorf("changed() after a rewrite = false; want true")
	}
	if err := s.Reload(context.Background()); err == nil {
		t.Errorf("reload(broken file) = nil; want an error")
	}
	if s.index() != first {
		t.Errorf("dir() after a refused reload changed; want the previous directory")
	}
	// logReload logs the refusal once and marks the file seen.
	s.logReload("test", users.WatchHooks{})
	if s.index() != first || s.changed() {
		t.Errorf("after logReload(broken file): dir kept %v, changed() %v; want true, false", s.index() == first, s.changed())
	}

	// A good rewrite replaces the users; the dummy hash (cost 4 both times) is kept.
	write(usersJSON(entry("bob", hashField(testHash))))
	if !s.changed() {
		t.Errorf("changed() after a good rewrite = false; want true")
	}
	s.logReload("test", users.WatchHooks{})
	if got := names(s.index()); !reflect.DeepEqual(got, []string{"bob"}) {
		t.Errorf("users after reload = %q; want [bob]", got)
	}
	if s.index().slowest != first.slowest {
		t.Errorf("reload at the same cost made a new dummy hash; want the previous one")
	}
	if s.changed() {
		t.Errorf("changed() right after reload = true; want false")
	}

	// An atomic replace (a new inode) with the same size and mtime is a change too.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	tmp := filepath.Join(dir, "new.json")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if !s.changed() {
		t.Errorf("changed() after rename over the file = false; want true")
	}
	s.logReload("test", users.WatchHooks{})

	// A removed file is a change; the reload fails and the users stay.
	cur := s.index()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !s.changed() {
		t.Errorf("changed() after remove = false; want true")
	}
	s.logReload("test", users.WatchHooks{})
	if s.index() != cur || s.changed() {
		t.Errorf("after logReload(removed file): dir kept %v, changed() %v; want true, false", s.index() == cur, s.changed())
	}
}

// userName returns u's name, or "" for nil.
func userName(u *users.Account) string {
	if u == nil {
		return ""
	}
	return u.Username()
}
