package users

import (
	"context"
	"errors"
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

// TestFileRecheckRefusedFile: a users file changed into one that does not
// load leaves the users in force older than the file, so Recheck cannot
// say, and a token its copy finds dead is neither refused nor removed on
// the strength of that copy: SessionUser answers an error (503), not nil.
// A token the copy finds live is answered from it as before.
func TestFileRecheckRefusedFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	alice := User{Username: "alice", PasswordHash: mustHash(t, "alice-pw", passwordtest.Cost), Groups: []string{}, TokensAfter: t0}
	if err := WriteFile(path, []User{alice}); err != nil {
		t.Fatal(err)
	}
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"users": [{"username": "alice"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if u, err := d.Recheck(ctx, "alice"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Recheck(alice) of a file changed into one that does not load = %q, %v; want ErrUnavailable", userName(u), err)
	}
	// Again: the refused file is remembered, and still not trusted.
	if u, err := d.Recheck(ctx, "alice"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a second Recheck(alice) of the refused file = %q, %v; want ErrUnavailable", userName(u), err)
	}
	newer := SessionGeneration(1) // a token of a password change the broken file may hold
	if u, err := SessionUser(ctx, d, "alice", t0.Add(time.Hour), newer); u != nil || !errors.Is(err, ErrUnavailable) {
		t.Errorf("SessionUser(alice, a token the copy finds dead) with the file refused = %q, %v; want nil, ErrUnavailable", userName(u), err)
	}
	if u, err := SessionUser(ctx, d, "alice", t0.Add(time.Hour), SessionGeneration(0)); u == nil || err != nil {
		t.Errorf("SessionUser(alice, a token the copy finds live) with the file refused = %q, %v; want alice", userName(u), err)
	}
	// The file mended: Recheck reads it again.
	if err := WriteFile(path, []User{alice}); err != nil {
		t.Fatal(err)
	}
	if u, err := d.Recheck(ctx, "alice"); err != nil || userName(u) != "alice" {
		t.Errorf("Recheck(alice) once the file loads again = %q, %v; want alice", userName(u), err)
	}
}

// TestNextCutoff: a change's cut-off is now to the millisecond, and later
// than the one it replaces even when that one is ahead of this clock.
func TestNextCutoff(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		prev, now, want time.Time
	}{
		{time.Time{}, t0.Add(1500 * time.Microsecond), t0.Add(time.Millisecond)},
		{t0, t0.Add(time.Second), t0.Add(time.Second)},
		{t0, t0, t0.Add(time.Millisecond)},                                // the same millisecond
		{t0.Add(time.Minute), t0, t0.Add(time.Minute + time.Millisecond)}, // a clock ahead wrote prev
	} {
		if got := NextCutoff(tt.prev, tt.now); !got.Equal(tt.want) {
			t.Errorf("NextCutoff(%v, %v) = %v; want %v", tt.prev, tt.now, got, tt.want)
		}
	}
}
