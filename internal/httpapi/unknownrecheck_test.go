package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/servertest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// recheckCounting is the real users file, counting Recheck's calls.
type recheckCounting struct {
	*usersfile.Directory
	rechecks atomic.Int64
}

func (d *recheckCounting) Recheck(ctx context.Context, username string) (*users.Account, error) {
	d.rechecks.Add(1)
	return d.Directory.Recheck(ctx, username)
}

// TestLoginRightAfterUserAdd: a user added to the users file (the CLI,
// another instance) logs in at once, before any reload would have loaded
// them; a flood of unknown names from one client rechecks the file once
// per 100 ms at most, and each client has its own turn. The test's clock
// stands still, so each client rechecks exactly once.
func TestLoginRightAfterUserAdd(t *testing.T) {
	t.Parallel()
	var dir *recheckCounting
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.directory = func(f *usersfile.Directory) users.Directory {
			dir = &recheckCounting{Directory: f}
			return dir
		}
	})
	login := func(client, username, pw string) int {
		req := httptest.NewRequest("POST", "/api/auth/login/", strings.NewReader(`{"username":"`+username+`","password":"`+pw+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = client + ":4711"
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, req)
		return w.Code
	}
	hash := passwordtest.MustHash(t, "zoe-pw", servertest.TestCost)
	if err := usersfile.New(e.usersPath, nil).Add(context.Background(), users.User{Username: "zoe", PasswordHash: hash, Groups: []string{}}); err != nil {
		t.Fatal(err)
	}
	if code := login("192.0.2.7", "zoe", "zoe-pw"); code != http.StatusOK {
		t.Fatalf("login(zoe) right after her add = %d; want 200, the file rechecked", code)
	}
	before := dir.rechecks.Load()
	for i := range 50 {
		if code := login("192.0.2.8", "nobody"+string(rune('a'+i%26)), "x"); code != http.StatusUnauthorized {
			t.Fatalf("login of an unknown user = %d; want 401", code)
		}
	}
	if n := dir.rechecks.Load() - before; n != 1 {
		t.Errorf("50 logins of unknown users from one client at one moment rechecked the file %d times; want 1", n)
	}
	if code := login("192.0.2.9", "nobody", "x"); code != http.StatusUnauthorized || dir.rechecks.Load()-before != 2 {
		t.Errorf("an unknown user's login from another client = %d after %d rechecks; want 401 after 2: its own turn", code, dir.rechecks.Load()-before)
	}
	e.clock.Advance(100 * time.Millisecond)
	if login("192.0.2.8", "nobody", "x"); dir.rechecks.Load()-before != 3 {
		t.Errorf("rechecks after 100 ms more = %d; want 3: the first client's next turn", dir.rechecks.Load()-before)
	}
}

// TestLoginRightAfterUserEnable: a user the loaded copy holds disabled,
// enabled in the file since (by another process, before any reload),
// logs in at once: a login of a disabled user rechecks the file as an
// unknown one's does, at most once per client per 100 ms.
func TestLoginRightAfterUserEnable(t *testing.T) {
	t.Parallel()
	e := newTestEnvConfig(t, nil, nil)
	ctx := context.Background()
	hash := passwordtest.MustHash(t, "zoe-pw", servertest.TestCost)
	if err := e.users.Add(ctx, users.User{Username: "zoe", PasswordHash: hash, Groups: []string{}, Disabled: true}); err != nil {
		t.Fatal(err)
	}
	login := func() int {
		req := httptest.NewRequest("POST", "/api/auth/login/", strings.NewReader(`{"username":"zoe","password":"zoe-pw"}`))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, req)
		return w.Code
	}
	if code := login(); code != http.StatusUnauthorized {
		t.Fatalf("login(zoe) while disabled = %d; want 401", code)
	}
	other := usersfile.New(e.usersPath, nil) // another process: user enable
	if err := users.Update(ctx, other, "zoe", func(u *users.User) error { u.Disabled = false; return nil }); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(100 * time.Millisecond) // the client's next turn to recheck
	if code := login(); code != http.StatusOK {
		t.Fatalf("login(zoe) right after her enable = %d; want 200, the file rechecked", code)
	}
}

// BenchmarkUnknownUserFlood: logins of made-up names from one client, as
// fast as the hasher takes them, on the real clock. Reports the users
// file's rechecks per login ("rechecks/op"); `make bench` holds it under
// 0.1 (one a client per 100 ms, against logins that take milliseconds).
func BenchmarkUnknownUserFlood(b *testing.B) {
	var dir *recheckCounting
	e := newTestEnvConfig(b, nil, func(c *envConfig) {
		c.realTime = true
		c.throttle.PairFailures, c.throttle.UserFailures, c.throttle.AddrRate, c.throttle.AddrBurst = 1<<30, 1<<30, 1e9, 1<<30
		c.directory = func(f *usersfile.Directory) users.Directory {
			dir = &recheckCounting{Directory: f}
			return dir
		}
	})
	before := dir.rechecks.Load()
	b.ResetTimer()
	for i := range b.N {
		w := e.do("POST", "/api/auth/login/", `{"username":"nobody`+strconv.Itoa(i)+`","password":"x"}`, jsonCT)
		if w.Code != http.StatusUnauthorized {
			b.Fatalf("login of an unknown user = %d %s; want 401", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(dir.rechecks.Load()-before)/float64(b.N), "rechecks/op")
}
