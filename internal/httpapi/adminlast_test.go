package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
	"authsvc/internal/users"
	"authsvc/internal/users/postgres"
	"authsvc/internal/users/usersfile"
)

// A barrier lets its writes through once n of them have arrived, or
// after a while (a request refused before its write never arrives).
type barrier struct {
	mu   sync.Mutex // guards n
	n    int
	open chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, open: make(chan struct{})} }

func (b *barrier) arrive() {
	b.mu.Lock()
	if b.n--; b.n == 0 {
		close(b.open)
	}
	b.mu.Unlock()
	select {
	case <-b.open:
	case <-time.After(5 * time.Second):
	}
}

// gatedDirectory is a real directory whose next write waits at a
// barrier: two instances' requests are both past their checks before
// either writes, the window two admins racing each other hit by luck.
type gatedDirectory struct {
	users.Directory
	mu   sync.Mutex // guards gate
	gate *barrier   // nil: writes go at once
}

// wait holds the caller at the gate, once.
func (d *gatedDirectory) wait() {
	d.mu.Lock()
	g := d.gate
	d.gate = nil
	d.mu.Unlock()
	if g != nil {
		g.arrive()
	}
}

func (d *gatedDirectory) UpdateAll(ctx context.Context, changes map[string]func(*users.User) error, opts ...users.WriteOption) (map[string]error, error) {
	d.wait()
	return d.Directory.UpdateAll(ctx, changes, opts...)
}

func (d *gatedDirectory) Delete(ctx context.Context, name string, opts ...users.WriteOption) error {
	d.wait()
	return d.Directory.Delete(ctx, name, opts...)
}

// LookupConfirmed is the real directory's, as without the gate.
func (d *gatedDirectory) LookupConfirmed(ctx context.Context, username string) (*users.Account, error) {
	return users.LookupConfirmed(ctx, d.Directory, username)
}

// twoAdmins is testUsers with alice an admin too: bob and alice are the
// only enabled admins.
func twoAdmins(t *testing.T) []users.User {
	list := servertest.TestUsers(t)
	list[0].Admin = true
	return list
}

// sharedBackings returns, by name, a function that makes a fresh backing
// holding list and returns a function that opens another instance's
// directory on it: a users file two directories share, and a PostgreSQL
// database.
func sharedBackings() map[string]func(t *testing.T, list []users.User) func() users.Directory {
	log := slog.New(slog.DiscardHandler)
	return map[string]func(t *testing.T, list []users.User) func() users.Directory{
		"file": func(t *testing.T, list []users.User) func() users.Directory {
			path := filepath.Join(t.TempDir(), "users.json")
			if err := usersfile.Write(path, list); err != nil {
				t.Fatal(err)
			}
			return func() users.Directory {
				d, err := usersfile.Open(path, log)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
		},
		"postgres": func(t *testing.T, list []users.User) func() users.Directory {
			pgURL := testservers.SharedPostgres(t)
			db := testservers.NewDatabase(t, pgURL)
			open := func() users.Directory {
				d, err := postgres.Open(context.Background(), db, 16, log)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				return d
			}
			if _, err := open().AddAll(context.Background(), list); err != nil {
				t.Fatal(err)
			}
			return open
		},
	}
}

// TestAdminLastAdminRace: two admins, each on their own instance sharing
// one users file or one PostgreSQL database, demote, disable or delete
// each other at the same moment (both requests past their checks before
// either writes): exactly one succeeds, the other is 409 conflict, and
// one enabled admin remains (API.md, Admin API; issue 37, point 9).
//
// Before the fix both succeeded, leaving no admin.
func TestAdminLastAdminRace(t *testing.T) {
	t.Parallel()
	hashes := make(map[string]string)
	for _, u := range twoAdmins(t) {
		hashes[u.Username] = u.PasswordHash
	}
	for backend, makeBacking := range sharedBackings() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			open := makeBacking(t, twoAdmins(t))
			inner := [2]users.Directory{open(), open()}
			gated := [2]*gatedDirectory{{Directory: inner[0]}, {Directory: inner[1]}}
			var envs [2]*testEnv
			for i := range envs {
				envs[i] = newTestEnvConfig(t, nil, func(c *envConfig) {
					c.realTime = true // the cut-offs the operations write are real time
					c.directory = func(*usersfile.Directory) users.Directory { return gated[i] }
				})
			}
			admins := [2]string{"bob", "alice"} // admins[i] acts on instance i against the other
			ctx := context.Background()
			for _, action := range []struct {
				name, method, body string
				want               int
			}{
				{"demote", "PATCH", `{"admin":false}`, http.StatusOK},
				{"disable", "PATCH", `{"disabled":true}`, http.StatusOK},
				{"delete", "DELETE", "", http.StatusNoContent},
			} {
				for round := range 5 {
					// Both enabled admins again, logged in on their instances.
					for _, name := range admins {
						restore := func(u *users.User) error { u.Admin, u.Disabled = true, false; return nil }
						if err := users.Update(ctx, inner[0], name, restore); err != nil {
							if _, err := users.Create(ctx, inner[0], users.NewUser{Username: name, PasswordHash: hashes[name], Admin: true}); err != nil {
								t.Fatalf("%s round %d: restore %s: %v", action.name, round, name, err)
							}
						}
					}
					var tokens [2]string
					for i, e := range envs {
						if err := inner[i].Reload(ctx); err != nil {
							t.Fatal(err)
						}
						tokens[i] = e.login(admins[i])
					}
					gate := newBarrier(2)
					for _, g := range gated {
						g.mu.Lock()
						g.gate = gate
						g.mu.Unlock()
					}
					var replies [2]*httptest.ResponseRecorder
					var wg sync.WaitGroup
					for i, e := range envs {
						wg.Go(func() { replies[i] = e.mfaDo(action.method, "/api/admin/users/"+admins[1-i], tokens[i], action.body) })
					}
					wg.Wait()
					won := 0
					for i, w := range replies {
						switch {
						case w.Code == action.want:
							won++
						case w.Code != http.StatusConflict || errorCode(t, w) != "conflict":
							t.Errorf("%s round %d: %s's %s %s = %d %s; want %d or 409 conflict", action.name, round, admins[i], action.method, admins[1-i], w.Code, w.Body, action.want)
						}
					}
					list, err := inner[1].List(ctx)
					if err != nil {
						t.Fatal(err)
					}
					remain := 0
					for i := range list {
						if users.EnabledAdmin(&list[i]) {
							remain++
						}
					}
					if won != 1 || remain != 1 {
						t.Errorf("%s round %d: the mutual %s = %d %s and %d %s: %d succeeded, %d enabled admins remain; want 1 and 1",
							action.name, round, action.name, replies[0].Code, replies[0].Body, replies[1].Code, replies[1].Body, won, remain)
					}
				}
			}
		})
	}
}
