package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A directoryFactory makes a fresh, empty backing and returns a function
// that opens a Directory on it; each call opens another handle, as another
// process or instance would.
type directoryFactory func(t *testing.T) (open func() Directory)

// testDirectoryConformance checks the Directory contract (directory.go)
// against one implementation. Every Directory runs it unchanged.
func testDirectoryConformance(t *testing.T, factory directoryFactory) {
	ctx := context.Background()
	hash := mustHash(t, "alice-pw", testCost)
	alice := User{Username: "alice", PasswordHash: hash, Name: "Alice", Email: "alice@example.com", Groups: []string{"dev"}}

	t.Run("empty", func(t *testing.T) {
		d := factory(t)()
		if u, err := d.Lookup(ctx, "alice"); !errors.Is(err, errUserNotFound) {
			t.Errorf("Lookup(alice) in an empty directory = %v, %v; want errUserNotFound", u, err)
		}
		if n := d.Len(); n != 0 {
			t.Errorf("Len() = %d; want 0", n)
		}
		if s := d.Slowest(); s == nil || s.hash == nil {
			t.Errorf("Slowest() = %v; want a hash to compare unknown users against", s)
		}
	})

	t.Run("bootstrap leaves users alone", func(t *testing.T) {
		d := factory(t)()
		if err := d.Add(ctx, alice); err != nil {
			t.Fatalf("Add(alice) = %v", err)
		}
		admin := User{Username: "admin", PasswordHash: hash, Groups: []string{}, Admin: true}
		if added, err := d.Bootstrap(ctx, admin); added || err != nil {
			t.Errorf("Bootstrap(admin) of a directory with alice = %v, %v; want false, nil", added, err)
		}
		if u, err := d.Lookup(ctx, "admin"); !errors.Is(err, errUserNotFound) {
			t.Errorf("Lookup(admin) after Bootstrap = %v, %v; want errUserNotFound", u, err)
		}
		if d.Len() != 1 {
			t.Errorf("Len() after Bootstrap = %d; want 1", d.Len())
		}
	})

	t.Run("add, look up, list", func(t *testing.T) {
		d := factory(t)()
		if err := d.Add(ctx, alice); err != nil {
			t.Fatalf("Add(alice) = %v", err)
		}
		u, err := d.Lookup(ctx, "alice")
		if err != nil {
			t.Fatalf("Lookup(alice) after Add = %v; want the user", err)
		}
		if u.Info().Name != "Alice" || u.Info().Email != "alice@example.com" || len(u.Info().Groups) != 1 || u.Admin() || u.Disabled() {
			t.Errorf("Lookup(alice) = %+v; want Alice's fields as added", u.Info())
		}
		if d.Len() != 1 {
			t.Errorf("Len() = %d; want 1", d.Len())
		}
		if err := d.Add(ctx, alice); !errors.Is(err, errUserExists) {
			t.Errorf("Add(alice) again = %v; want errUserExists", err)
		}
		users, err := d.List(ctx)
		if err != nil || len(users) != 1 || users[0].Username != "alice" || users[0].PasswordHash != hash {
			t.Errorf("List() = %+v, %v; want alice with her hash", users, err)
		}
	})

	t.Run("add all in one write", func(t *testing.T) {
		d := factory(t)()
		if err := d.Add(ctx, alice); err != nil {
			t.Fatal(err)
		}
		bob, carol := alice, alice
		bob.Username, carol.Username = "bob", "carol"
		existing, err := d.AddAll(ctx, []User{bob, alice, carol})
		if err != nil || len(existing) != 1 || existing[0] != "alice" {
			t.Fatalf("AddAll(bob, alice, carol) = %v, %v; want [alice] taken", existing, err)
		}
		if d.Len() != 3 {
			t.Errorf("Len() after AddAll = %d; want 3", d.Len())
		}
	})

	t.Run("update and delete", func(t *testing.T) {
		d := factory(t)()
		if err := d.Add(ctx, alice); err != nil {
			t.Fatal(err)
		}
		if err := d.Update(ctx, "alice", func(u *User) error { u.Disabled = true; return nil }); err != nil {
			t.Fatalf("Update(alice) = %v", err)
		}
		if u, err := d.Lookup(ctx, "alice"); err != nil || !u.Disabled() {
			t.Errorf("Lookup(alice) after disabling = %v, %v; want disabled", u, err)
		}
		refused := errors.New("refused")
		if err := d.Update(ctx, "alice", func(u *User) error { u.Disabled = false; return refused }); !errors.Is(err, refused) {
			t.Errorf("Update(alice) with a failing change = %v; want its error", err)
		}
		if u, _ := d.Lookup(ctx, "alice"); u == nil || !u.Disabled() {
			t.Errorf("a failed Update wrote its change")
		}
		if err := d.Update(ctx, "bob", func(*User) error { return nil }); !errors.Is(err, errUserNotFound) {
			t.Errorf("Update(bob) = %v; want errUserNotFound", err)
		}
		if err := d.Delete(ctx, "alice"); err != nil {
			t.Fatalf("Delete(alice) = %v", err)
		}
		if _, err := d.Lookup(ctx, "alice"); !errors.Is(err, errUserNotFound) {
			t.Errorf("Lookup(alice) after Delete = %v; want errUserNotFound", err)
		}
		if err := d.Delete(ctx, "alice"); !errors.Is(err, errUserNotFound) {
			t.Errorf("Delete(alice) again = %v; want errUserNotFound", err)
		}
	})

	t.Run("another handle sees writes after Reload", func(t *testing.T) {
		open := factory(t)
		a, b := open(), open()
		if err := a.Add(ctx, alice); err != nil {
			t.Fatal(err)
		}
		if err := b.Reload(ctx); err != nil {
			t.Fatalf("Reload() = %v", err)
		}
		if _, err := b.Lookup(ctx, "alice"); err != nil {
			t.Errorf("Lookup(alice) on another handle after Reload = %v; want the user", err)
		}
	})

	t.Run("Watch brings another handle's writes", func(t *testing.T) {
		open := factory(t)
		a, b := open(), open()
		if err := b.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		reloads := make(chan error, 16)
		go b.Watch(wctx, 10*time.Millisecond, nil, watchHooks{reloaded: func(err error) {
			select {
			case reloads <- err:
			default:
			}
		}})
		if err := a.Add(ctx, alice); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second) // API.md: changes reach every instance within 5 s
		for {
			if _, err := b.Lookup(ctx, "alice"); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("alice, added on one handle, not visible on a watching handle after 5 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := <-reloads; err != nil {
			t.Errorf("Watch reported reload error %v; want nil", err)
		}
	})

	t.Run("concurrent writers lose nothing", func(t *testing.T) {
		open := factory(t)
		const writers = 12
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				u := alice
				u.Username = fmt.Sprintf("user%d", i)
				errs <- open().Add(ctx, u)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("concurrent Add = %v", err)
			}
		}
		users, err := open().List(ctx)
		if err != nil || len(users) != writers {
			t.Errorf("List() after %d concurrent Adds = %d users, %v; want %d", writers, len(users), err, writers)
		}
	})

	t.Run("authenticate through the directory", func(t *testing.T) {
		d := factory(t)()
		if err := d.Add(ctx, alice); err != nil {
			t.Fatal(err)
		}
		compare := verifyHere
		for _, tt := range []struct {
			username, password string
			ok                 bool
		}{
			{"alice", "alice-pw", true},
			{"alice", "wrong", false},
			{"nobody", "alice-pw", false},
		} {
			if _, ok := authenticate(ctx, d, tt.username, tt.password, compare); ok != tt.ok {
				t.Errorf("authenticate(%q, %q) = %v; want %v", tt.username, tt.password, ok, tt.ok)
			}
		}
	})
}

func TestFileDirectoryConformance(t *testing.T) {
	testDirectoryConformance(t, func(t *testing.T) func() Directory {
		path := filepath.Join(t.TempDir(), "users.json")
		if err := writeUsersFile(path, nil); err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		return func() Directory {
			d, err := openFileDirectory(path, log)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	})
}

// TestFileDirectoryRewrittenWhileRead: a file rewritten in place while a
// reload reads it (a hand edit, or cat >) is refused half-written, and the
// finished file is then picked up within 5 s, with no SIGHUP.
func TestFileDirectoryRewrittenWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	alice := User{Username: "alice", PasswordHash: mustHash(t, "alice-pw", testCost), Groups: []string{}}
	bob := User{Username: "bob", PasswordHash: mustHash(t, "bob-pw", testCost), Groups: []string{}}
	if err := writeUsersFile(path, []User{alice}); err != nil {
		t.Fatal(err)
	}
	d, err := openFileDirectory(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := writeUsersFile(path+".full", []User{alice, bob}); err != nil {
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
	go d.Watch(ctx, 10*time.Millisecond, nil, watchHooks{})
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
