package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"authsvc/internal/password"
	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
	"authsvc/internal/users"
	"authsvc/internal/users/postgres"
	"authsvc/internal/users/usersfile"
)

// interposedDirectory is a real directory whose next Update first runs
// between: something written between a password change's check of
// current_password and its own write, on cue rather than by luck.
type interposedDirectory struct {
	users.Directory
	mu      sync.Mutex // guards between
	between func()
}

func (d *interposedDirectory) UpdateAll(ctx context.Context, changes map[string]func(*users.User) error, opts ...users.WriteOption) (map[string]error, error) {
	d.mu.Lock()
	f := d.between
	d.between = nil
	d.mu.Unlock()
	if f != nil {
		f()
	}
	return d.Directory.UpdateAll(ctx, changes, opts...)
}

// LookupConfirmed is the real directory's: a password check reads
// PostgreSQL, not its cache, as it would without the interposer.
func (d *interposedDirectory) LookupConfirmed(ctx context.Context, username string) (*users.Account, error) {
	return users.LookupConfirmed(ctx, d.Directory, username)
}

// raceDirectories returns a fresh users file and a fresh PostgreSQL
// database, each holding testUsers, by name.
func raceDirectories(t *testing.T) map[string]func(t *testing.T) users.Directory {
	return map[string]func(t *testing.T) users.Directory{
		"file": func(t *testing.T) users.Directory {
			path := filepath.Join(t.TempDir(), "users.json")
			if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
				t.Fatal(err)
			}
			dir, err := usersfile.Open(path, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			return dir
		},
		"postgres": func(t *testing.T) users.Directory {
			pgURL := testservers.SharedPostgres(t)
			dir, err := postgres.Open(context.Background(), testservers.NewDatabase(t, pgURL), 16, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dir.Close() })
			if _, err := dir.AddAll(context.Background(), servertest.TestUsers(t)); err != nil {
				t.Fatal(err)
			}
			return dir
		},
	}
}

// TestPasswordChangeRacesRehash: a password change is a compare-and-swap
// on the password current_password was checked against, not on the
// hash's bytes (issue 28, point 4; API.md, POST /api/auth/password/).
// A rehash on login written between the check and the write (another
// instance's, or this one's batch) keeps the password: the change
// succeeds. Another change written there, with the same token and
// current password, does not: this one gets 401 and the other's password
// stands. Both on a users file and on PostgreSQL.
//
// Before the fix, the change after a rehash answered 401
// invalid_credentials for the right current password: 1 in 4 under load
// after warm, login and a bcrypt user's rehash.
func TestPasswordChangeRacesRehash(t *testing.T) {
	t.Parallel()
	for name, open := range raceDirectories(t) {
		t.Run(name, func(t *testing.T) {
			for _, tt := range []struct {
				name     string
				between  func(t *testing.T, e *testEnv, inner users.Directory, token string)
				want     int
				loginsAs string // the password alice has after the change
			}{
				{"rehash", rehashAlice, 200, newPassphrase},
				{"another change", func(t *testing.T, e *testEnv, _ users.Directory, token string) {
					if w := e.do("POST", "/api/auth/password/", changeBody("alice-pw", newPassphrase+" (other)"), jsonCT, "Authorization: Token "+token); w.Code != 200 {
						t.Fatalf("the change written in between = %d %s; want 200", w.Code, w.Body)
					}
				}, 401, newPassphrase + " (other)"},
			} {
				t.Run(tt.name, func(t *testing.T) {
					inner := open(t)
					dir := &interposedDirectory{Directory: inner}
					e := newTestEnvConfig(t, nil, func(c *envConfig) {
						c.realTime = true
						c.directory = func(*usersfile.Directory) users.Directory { return dir }
					})
					token := e.login("alice")
					dir.mu.Lock()
					dir.between = func() { tt.between(t, e, inner, token) }
					dir.mu.Unlock()
					w := e.do("POST", "/api/auth/password/", changeBody("alice-pw", newPassphrase), jsonCT, "Authorization: Token "+token)
					if w.Code != tt.want {
						t.Fatalf("password change with %s written between its check and its write = %d %s; want %d", tt.name, w.Code, w.Body, tt.want)
					}
					if tt.want == 401 {
						if code := errorCode(t, w); code != "invalid_credentials" && code != "invalid_token" {
							t.Errorf("the losing change's code = %q; want invalid_credentials or invalid_token", code)
						}
					}
					for _, pw := range []string{"alice-pw", newPassphrase, newPassphrase + " (other)"} {
						want := http.StatusUnauthorized
						if pw == tt.loginsAs {
							want = http.StatusOK
						}
						if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"`+pw+`"}`, jsonCT); w.Code != want {
							t.Errorf("login with %q after the change = %d; want %d", pw, w.Code, want)
						}
					}
				})
			}
		})
	}
}

// rehashAlice writes what a rehash on login writes: alice's password,
// alice-pw, hashed again under the default policy (argon2id), over the
// bcrypt hash it replaces, with nothing else changed.
func rehashAlice(t *testing.T, _ *testEnv, dir users.Directory, _ string) {
	hash, err := password.DefaultHashPolicy().Hash([]byte("alice-pw"))
	if err != nil {
		t.Fatal(err)
	}
	err = users.Update(context.Background(), dir, "alice", func(x *users.User) error {
		x.PasswordHash = hash
		return nil
	})
	if err != nil {
		t.Fatalf("rehash: %v", err)
	}
}
