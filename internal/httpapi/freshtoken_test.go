package httpapi_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"authsvc/internal/httpapi"
	"authsvc/internal/servertest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// TestStoreStampFollowsDirectory: a password change the token store was
// never told of (the reload that would have told it failed while Redis was
// away, say) leaves the store holding an older password stamp. The
// directory decides: the right password of the directory logs in, and the
// password the store's stamp came from does not. Before, the store refused
// every login on the directory's password until its stamp expired (a day).
func TestStoreStampFollowsDirectory(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	token := e.login("alice")
	if w := e.do("POST", "/api/auth/password/", changeBody("alice-pw", "a second passphrase"), "Content-Type: application/json", "Authorization: Token "+token); w.Code != 200 {
		t.Fatalf("password change = %d %s; want 200", w.Code, w.Body)
	}
	// Another process (user passwd) changes it again; this instance loads
	// the file without telling the store (no Watch runs here).
	hash, err := bcrypt.GenerateFromPassword([]byte("a third passphrase"), servertest.TestCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := usersfile.New(e.usersPath, nil).Update(context.Background(), "alice", func(u *users.User) error {
		u.PasswordHash, u.TokensAfter = string(hash), e.clock.Now().Add(time.Second)
		u.PasswordGeneration++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.users.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second)
	for _, tt := range []struct {
		password string
		status   int
	}{
		{"a third passphrase", 200},
		{"a second passphrase", 401},
		{"a third passphrase", 200},
		{"alice-pw", 401},
	} {
		w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"`+tt.password+`"}`, "Content-Type: application/json")
		if w.Code != tt.status {
			t.Errorf("login of alice with %q after a change the store was not told of = %d %s; want %d", tt.password, w.Code, w.Body, tt.status)
		}
	}
}

// TestTokenNotBornDead: a login on an instance whose clock is behind the
// user's cut-off (written by another instance, or user logout, with a
// clock ahead) gets a token that lives: it is issued at the cut-off, not
// before it.
func TestTokenNotBornDead(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	ahead := e.clock.Now().Add(5 * time.Second)
	if err := usersfile.New(e.usersPath, nil).Update(context.Background(), "alice", func(u *users.User) error {
		u.TokensAfter = ahead
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.users.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	token := e.login("alice")
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+token); w.Code != 200 {
		t.Errorf("info with a token issued while this clock is behind alice's cut-off = %d %s; want 200", w.Code, w.Body)
	}
}
