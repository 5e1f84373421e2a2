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

// TestLoginAfterFactorsRemovedElsewhere: another process (user
// reset-mfa, or an admin on another instance) removed alice's second
// factor, and this instance has not loaded the change yet. Her login with
// her password and a recovery code of the factor she had (which this
// instance's copy still holds) is decided on her as the directory has her
// now, who needs the password alone: 200, as on an instance that has
// loaded the change. Before, the code's spend found no codes and the
// login was 401 invalid_credentials.
func TestLoginAfterFactorsRemovedElsewhere(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"spendable", "wrong"} {
		t.Run(code, func(t *testing.T) {
			e := newTestEnvConfig(t, nil, func(c *envConfig) { c.tokenTTL = time.Hour })
			ctx := context.Background()
			factors, codes := recoveryFactors(t, e.keys.Current(), 2)
			if err := e.users.Update(ctx, "alice", func(u *users.User) error { u.MFA = factors; return nil }); err != nil {
				t.Fatal(err)
			}
			otp := codes[0]
			if code == "wrong" {
				otp = "aaaaaa-aaaaaa-aaaaaa-aaaaaa"
			}
			if _, _, err := users.ResetFactors(ctx, usersfile.New(e.usersPath, nil), "alice"); err != nil {
				t.Fatal(err)
			}
			if u, err := e.users.Lookup(ctx, "alice"); err != nil || !u.HasSecondFactor() {
				t.Fatalf("this instance's alice = %v, %v; want her with the factor still (not reloaded)", u, err)
			}
			w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw","otp":"`+otp+`"}`, jsonCT)
			if w.Code != 200 {
				t.Fatalf("login of alice with her password and a %s recovery code of a factor removed elsewhere = %d %s; want 200", code, w.Code, w.Body)
			}
			token, _ := reply(t, w)["token"].(string)
			if err := e.users.Reload(ctx); err != nil {
				t.Fatal(err)
			}
			if s := e.infoStatus(token); s != 200 {
				t.Errorf("info with that login's token once the change is loaded = %d; want 200", s)
			}
			if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"not hers","otp":"`+otp+`"}`, jsonCT); w.Code != 401 {
				t.Errorf("login with a wrong password and the code = %d %s; want 401", w.Code, w.Body)
			}
		})
	}
}

// TestSecondStepAfterFactorsRemovedElsewhere: alice's second step, with
// a recovery code of the factor another process removed after her first
// step (this instance has not loaded it), is a wrong code, 401
// invalid_credentials, never a server error; once the instance has
// loaded the removal, her login needs her password alone.
func TestSecondStepAfterFactorsRemovedElsewhere(t *testing.T) {
	t.Parallel()
	e := newTestEnvConfig(t, nil, func(c *envConfig) { c.tokenTTL = time.Hour })
	ctx := context.Background()
	factors, codes := recoveryFactors(t, e.keys.Current(), 2)
	if err := e.users.Update(ctx, "alice", func(u *users.User) error { u.MFA = factors; return nil }); err != nil {
		t.Fatal(err)
	}
	tok := e.mfaToken("alice")
	if _, _, err := users.ResetFactors(ctx, usersfile.New(e.usersPath, nil), "alice"); err != nil {
		t.Fatal(err)
	}
	w := e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+tok+`","code":"`+codes[0]+`"}`)
	if w.Code != 401 || errorCode(t, w) != "invalid_credentials" {
		t.Errorf("second step with a code of a factor removed elsewhere = %d %s; want 401 invalid_credentials", w.Code, w.Body)
	}
	if err := e.users.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT); w.Code != 200 {
		t.Errorf("the next login with her password alone = %d %s; want 200", w.Code, w.Body)
	}
}
