package cli

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/redisstore"
	"authsvc/internal/users/usersfile"
)

// TestHearUserNotices: serve's hook on a Redis store. A notice for a user
// makes the directory read the users file again, so a change written
// behind its back is seen with no reload of its own (no Watch runs here);
// a notice for every user, which a link made again after a break brings,
// asks Watch for a reload as SIGHUP does.
func TestHearUserNotices(t *testing.T) {
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(path)
	cfg.store, cfg.storePrefix, cfg.storeCache = redisURL, testservers.UniquePrefix(), 0
	deps, closeDeps, err := buildDeps(cfg, slog.New(slog.DiscardHandler))
	t.Cleanup(closeDeps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reload := make(chan os.Signal, 1)
	hearUserNotices(ctx, deps, reload)

	renamed := servertest.TestUsers(t)
	for i := range renamed {
		if renamed[i].Username == "alice" {
			renamed[i].Name = "Alice Renamed"
		}
	}
	if err := usersfile.Write(path, renamed); err != nil {
		t.Fatal(err)
	}
	notifier := deps.Store.(tokens.UserNotifier)
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Again and again: the subscription is made in the background,
		// and a notice sent before it is lost.
		if err := notifier.NotifyUser(ctx, "alice"); err != nil {
			t.Fatalf("NotifyUser(alice) = %v", err)
		}
		time.Sleep(20 * time.Millisecond)
		u, err := deps.Users.Lookup(ctx, "alice")
		if err != nil {
			t.Fatalf("Lookup(alice) = %v", err)
		}
		if u.Info().Name == "Alice Renamed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lookup(alice).Info().Name = %q 5 s after notices; want %q read again from the file", u.Info().Name, "Alice Renamed")
		}
	}
	select {
	case sig := <-reload:
		t.Fatalf("reload asked (%v) on a notice for alice; want none", sig)
	default:
	}

	raw, err := redisstore.Dial(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case sig := <-reload:
		if sig != syscall.SIGHUP {
			t.Errorf("reload asked with %v after a link break; want SIGHUP", sig)
		}
	case <-time.After(5 * time.Second):
		t.Error("no reload asked within 5 s of a link break; want one, since notices may have been lost")
	}
}
