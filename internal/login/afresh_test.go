package login

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// TestAfresh: a login whose stamp the store refused is decided again only
// on the directory as it is now, and only while the password it checked is
// still the user's there (enabled, the same hash, or a hash the password
// checked matches: a rehash); when the directory is
// on another stamp than the store's, the store is told the directory's
// state and then takes a session on it.
func TestAfresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hash := passwordtest.MustHash(t, "alice-pw", passwordtest.Cost)
	other := passwordtest.MustHash(t, "another-pw", passwordtest.Cost)
	rehashed := passwordtest.MustHash(t, "alice-pw", passwordtest.Cost) // the same password, another salt
	// same checks "alice-pw", the password the login found right, against
	// the fresh hash, as a login's attempt does (samePassword).
	same := func(fresh *users.Account) bool { return fresh.Hash().Verify([]byte("alice-pw")) }
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Minute)
	for _, tt := range []struct {
		name      string
		change    func(*users.User) // the directory now, after the login read alice
		delete    bool
		noSame    bool // afresh is given no check of the password (a second step)
		wantOK    bool
		wantStamp uint64
	}{
		{name: "the store is behind", change: func(*users.User) {}, wantOK: true, wantStamp: users.SessionGeneration(0)},
		{name: "a factor change moved the stamp", change: func(u *users.User) { u.PasswordGeneration++; u.TokensAfter = t0.Add(time.Second) }, wantOK: true, wantStamp: users.SessionGeneration(1)},
		{name: "another password", change: func(u *users.User) { u.PasswordGeneration++; u.PasswordHash = other }},
		{name: "rehashed elsewhere, then a factor change", change: func(u *users.User) {
			u.PasswordHash = rehashed
			u.PasswordGeneration++
			u.TokensAfter = t0.Add(time.Second)
		}, wantOK: true, wantStamp: users.SessionGeneration(1)},
		{name: "rehashed elsewhere, no password to check", noSame: true, change: func(u *users.User) {
			u.PasswordHash = rehashed
			u.PasswordGeneration++
		}},
		{name: "disabled", change: func(u *users.User) { u.PasswordGeneration++; u.Disabled = true }},
		{name: "deleted", delete: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "users.json")
			if err := usersfile.Write(path, []users.User{{Username: "alice", PasswordHash: hash, Groups: []string{}, TokensAfter: t0}}); err != nil {
				t.Fatal(err)
			}
			dir, err := usersfile.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			checked, err := dir.Lookup(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			store := tokens.NewMemoryStore()
			// The store was told of a change the directory does not show.
			if _, err := store.Supersede(ctx, tokens.Supersession{Username: "alice", Stamp: 9, MaxStamp: users.MaxSessionGeneration, Before: t0}); err != nil {
				t.Fatal(err)
			}
			other := usersfile.New(path, nil)
			if tt.delete {
				err = other.Delete(ctx, "alice")
			} else {
				err = other.Update(ctx, "alice", func(u *users.User) error { tt.change(u); return nil })
			}
			if err != nil {
				t.Fatal(err)
			}
			l := &Logins{Users: dir, Store: store, Now: time.Now}
			check := same
			if tt.noSame {
				check = nil
			}
			fresh, stamp, ok := l.afresh(ctx, checked, checked.SessionGeneration(), check)
			if ok != tt.wantOK || ok && stamp != tt.wantStamp {
				t.Fatalf("afresh(alice) = %v, stamp %d; want %v, stamp %d", ok, stamp, tt.wantOK, tt.wantStamp)
			}
			if !ok {
				return
			}
			if fresh.Username() != "alice" {
				t.Errorf("afresh(alice) returned %q", fresh.Username())
			}
			// The store now takes a session on the stamp afresh returned,
			// whatever stamp it held before.
			_, d := tokens.New()
			sess := tokens.Session{Username: "alice", Stamp: stamp, ID: tokens.NewSessionID()}
			if _, err := store.Issue(ctx, d, sess, 0, time.Now()); err != nil {
				t.Errorf("Issue(alice, stamp %d) after afresh = %v; want nil: the store follows the directory", stamp, err)
			}
		})
	}
}
