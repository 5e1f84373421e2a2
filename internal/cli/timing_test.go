package cli

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"

	"golang.org/x/crypto/bcrypt"
)

// timingUsers are alice and a disabled carol hashed at the production cost
// (12), and dave at cost 4 (a mix of costs, as raising the cost over time
// leaves), built once per process: each cost-12 hash takes about 0.3 s.
var timingUsers = sync.OnceValues(func() ([]users.User, error) {
	var list []users.User
	for _, u := range []users.User{
		{Username: "alice", Name: "Alice", Groups: []string{"dev"}},
		{Username: "carol", Groups: []string{}, Disabled: true},
		{Username: "dave", Groups: []string{}},
	} {
		cost := password.DefaultBcryptCost
		if u.Username == "dave" {
			cost = bcrypt.MinCost
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(u.Username+"-pw"), cost)
		if err != nil {
			return nil, err
		}
		u.PasswordHash = string(hash)
		list = append(list, u)
	}
	return list, nil
})

// BenchmarkLoginTiming times the real login handler for each way a login
// can end, at bcrypt cost 12. Unknown user, disabled user and wrong
// password must take the same time (API.md): compare their ns/op, side by
// side in one run, e.g.
//
//	go test -run '^$' -bench LoginTiming -benchtime 20x -count 5 .
func BenchmarkLoginTiming(b *testing.B) {
	list, err := timingUsers()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "users.json")
	if err := usersfile.Write(path, list); err != nil {
		b.Fatal(err)
	}
	cfg := defaultServeConfig()
	cfg.usersPath = path
	cfg.tokenTTL = time.Hour
	// A throttle that never refuses, and a slot always free.
	cfg.throttle = throttle.Config{PairFailures: 1 << 30, UserFailures: 1 << 30, AddrRate: 1e9, AddrBurst: 1 << 30}
	cfg.passwordSlots, cfg.passwordQueue, cfg.passwordWait = 2, 8, time.Minute
	d, closeDeps, err := buildDeps(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) // the niced compare threads, as serve runs them
	defer closeDeps()
	if err != nil {
		b.Fatal(err)
	}
	if s := d.Users.Slowest(); s.Hash.Cost != password.DefaultBcryptCost { // the cost-12 dummy hash
		b.Fatalf("slowest check = %s; want cost %d", s.Shape, password.DefaultBcryptCost)
	}
	handler := httpapi.NewServer(d)
	for _, c := range []struct {
		name, body string
		want       int
	}{
		{"wrong-password", `{"username":"alice","password":"wrong-pw"}`, 401},
		{"unknown-user", `{"username":"nobody","password":"alice-pw"}`, 401},
		{"disabled-user", `{"username":"carol","password":"carol-pw"}`, 401},
		{"wrong-password-cost-4", `{"username":"dave","password":"wrong-pw"}`, 401},
		{"right-password", `{"username":"alice","password":"alice-pw"}`, 200},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("POST", "/api/auth/login/", strings.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				handler.ServeHTTP(w, req)
				if w.Code != c.want {
					b.Fatalf("login = %d %s; want %d", w.Code, w.Body, c.want)
				}
			}
		})
	}
}

// BenchmarkLoginSchemes times a successful login through the real handler
// for a user hashed at the default argon2id parameters and one at bcrypt
// cost 12, side by side in one run:
//
//	go test -run '^$' -bench LoginSchemes -benchtime 20x -count 5 .
func BenchmarkLoginSchemes(b *testing.B) {
	argon, err := password.DefaultHashPolicy().Hash([]byte("argon-user-pw"))
	if err != nil {
		b.Fatal(err)
	}
	bc := password.DefaultHashPolicy()
	bc.Scheme = password.SchemeBcrypt
	bcryptHash, err := bc.Hash([]byte("bcrypt-user-pw"))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "users.json")
	if err := usersfile.Write(path, []users.User{{Username: "argon", PasswordHash: argon, Groups: []string{}}, {Username: "bcrypt", PasswordHash: bcryptHash, Groups: []string{}}}); err != nil {
		b.Fatal(err)
	}
	// Each user under its own scheme's policy, so that no login rehashes.
	handlers := make(map[string]http.Handler)
	for name, policy := range map[string]password.HashPolicy{"argon": password.DefaultHashPolicy(), "bcrypt": bc} {
		cfg := defaultServeConfig()
		cfg.usersPath = path
		cfg.hashPolicy = policy
		cfg.throttle = throttle.Config{PairFailures: 1 << 30, UserFailures: 1 << 30, AddrRate: 1e9, AddrBurst: 1 << 30}
		d, closeDeps, err := buildDeps(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		defer closeDeps()
		if err != nil {
			b.Fatal(err)
		}
		handlers[name] = httpapi.NewServer(d)
	}
	for _, name := range []string{"argon", "bcrypt"} {
		b.Run(name, func(b *testing.B) {
			body := `{"username":"` + name + `","password":"` + name + `-user-pw"}`
			for b.Loop() {
				req := httptest.NewRequest("POST", "/api/auth/login/", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				handlers[name].ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("login = %d %s; want 200", w.Code, w.Body)
				}
			}
		})
	}
}
