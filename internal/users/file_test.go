package users

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
)

// TestFileDirectoryRewrittenWhileRead: a file rewritten in place while a
// reload reads it (a hand edit, or cat >) is refused half-written, and the
// finished file is then picked up within 5 s, with no SIGHUP.
func TestFileDirectoryRewrittenWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	alice := User{Username: "alice", PasswordHash: mustHash(t, "alice-pw", passwordtest.Cost), Groups: []string{}}
	bob := User{Username: "bob", PasswordHash: mustHash(t, "bob-pw", passwordtest.Cost), Groups: []string{}}
	if err := WriteFile(path, []User{alice}); err != nil {
		t.Fatal(err)
	}
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path+".full", []User{alice, bob}); err != nil {
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
	go d.Watch(ctx, 10*time.Millisecond, nil, WatchHooks{})
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
	alice := User{Username: "alice", PasswordHash: testHash, Groups: []string{}}
	bob := User{Username: "bob", PasswordHash: testHash, Groups: []string{}}
	carol := User{Username: "carol", PasswordHash: testHash, Groups: []string{}, Disabled: true}
	if err := WriteFile(path, []User{alice, bob, carol}); err != nil {
		t.Fatal(err)
	}
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
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
	go d.Watch(ctx, time.Hour, hup, WatchHooks{
		Cut:      func(c Cut) { cuts <- cut{c.Username, c.Before} },
		Reloaded: func(err error) { reloaded <- err },
	})
	for _, step := range []struct {
		name  string
		users []User
		want  string // the one user cut
	}{
		{"alice disabled", []User{{Username: "alice", PasswordHash: testHash, Groups: []string{}, Disabled: true}, bob, carol}, "alice"},
		{"bob deleted", []User{{Username: "alice", PasswordHash: testHash, Groups: []string{}, Disabled: true}, carol}, "bob"},
	} {
		if err := WriteFile(path, step.users); err != nil {
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
