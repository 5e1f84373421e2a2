package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/redisstore"
	"authsvc/internal/users"
)

// testStores are the token stores a handler test runs on: the memory
// store and a real Redis (testservers), each new for the test.
var testStores = []struct {
	name string
	new  func(t *testing.T) tokens.Store // nil: the env's memory store
}{
	{"memory", nil},
	{"redis", func(t *testing.T) tokens.Store {
		url, _, _ := testservers.Redis(t)
		client, err := redisstore.Dial(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close() })
		s := redisstore.New(client, testservers.UniquePrefix())
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

// watchLikeServe watches the env's users file as serve does: every load
// that cuts a user's tokens, a write through the directory included, tells
// the token store at once (internal/cli's endTokens). It returns once the
// hooks are in place.
func (e *testEnv) watchLikeServe() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	hup := make(chan os.Signal, 1)
	reloaded := make(chan struct{}, 1)
	store, policy := e.deps.Store, e.deps.Policy
	go e.users.Watch(ctx, time.Hour, hup, users.WatchHooks{
		Reloaded: func(error) {
			select {
			case reloaded <- struct{}{}:
			default:
			}
		},
		Cut: func(c users.Cut) {
			store.Supersede(ctx, policy.Supersession(c.Username, c.Stamp, c.Before, time.Now()))
		},
	})
	hup <- syscall.SIGHUP // answered once Watch has its hooks
	<-reloaded
}

// TestRebindKeepsSession: a token re-bound by a TOTP confirm or a factor
// removal keeps its session id, expires_at, client and user agent (API.md,
// Two-factor authentication), on every store (issue 37, point 5), though
// the change's own write has told the store to end the user's tokens, the
// presenting one included, before it is re-bound (as serve's watch does).
// Real time: Redis expires keys by the wall clock.
func TestRebindKeepsSession(t *testing.T) {
	t.Parallel()
	for _, st := range testStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnvConfig(t, nil, func(c *envConfig) {
				c.tokenTTL, c.realTime = time.Hour, true
				if st.new != nil {
					c.store = st.new(t)
				}
			})
			w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT, "User-Agent: rebind/1")
			token, _ := reply(t, w)["token"].(string)
			if w.Code != http.StatusOK || token == "" {
				t.Fatalf("login(alice) = %d %s; want 200", w.Code, w.Body)
			}
			e.watchLikeServe()
			e.login("alice") // another session, which each change ends
			before := e.listSessions(token, "")
			if len(before) != 2 || !before[1].Current || before[1].UserAgent != "rebind/1" || before[1].Client != "192.0.2.1" {
				t.Fatalf("sessions before = %+v; want two, the older one current with client 192.0.2.1 and user agent rebind/1", before)
			}
			want := before[1]
			kept := func(after string) {
				t.Helper()
				got := e.listSessions(token, "")
				if len(got) != 1 {
					t.Fatalf("sessions after %s = %+v; want the presenting one alone", after, got)
				}
				g := got[0]
				if g.ID != want.ID || g.Client != want.Client || g.UserAgent != want.UserAgent || !g.Current ||
					g.ExpiresAt == nil || !g.ExpiresAt.Equal(*want.ExpiresAt) {
					t.Errorf("session after %s = id %s, client %q, user agent %q, expires_at %v; want id %s, client %q, user agent %q, expires_at %v",
						after, g.ID, g.Client, g.UserAgent, g.ExpiresAt, want.ID, want.Client, want.UserAgent, want.ExpiresAt)
				}
			}

			w = e.mfaDo("POST", "/api/auth/mfa/totp/", token, `{"password":"alice-pw"}`)
			secret32, _ := reply(t, w)["secret"].(string)
			if w.Code != http.StatusOK {
				t.Fatalf("POST /api/auth/mfa/totp/ = %d %s; want 200", w.Code, w.Body)
			}
			w = e.mfaDo("POST", "/api/auth/mfa/totp/confirm/", token, `{"code":"`+totpCode(t, secret32, time.Now())+`"}`)
			var codes struct {
				RecoveryCodes []string `json:"recovery_codes"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &codes); w.Code != http.StatusOK || err != nil || len(codes.RecoveryCodes) == 0 {
				t.Fatalf("POST /api/auth/mfa/totp/confirm/ = %d %s; want 200 with recovery codes", w.Code, w.Body)
			}
			kept("a TOTP confirm")

			// Another session, by a code now.
			w = e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+codes.RecoveryCodes[0]+`"}`)
			if w.Code != http.StatusOK {
				t.Fatalf("one-step login with a recovery code = %d %s; want 200", w.Code, w.Body)
			}
			w = e.mfaDo("DELETE", "/api/auth/mfa/totp/", token, `{"password":"alice-pw","code":"`+codes.RecoveryCodes[1]+`"}`)
			if w.Code != http.StatusNoContent {
				t.Fatalf("DELETE /api/auth/mfa/totp/ = %d %s; want 204", w.Code, w.Body)
			}
			kept("a factor removal")
		})
	}
}
