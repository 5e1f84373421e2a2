package httpapi_test

import (
	"context"
	"os"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/servertest"
	"authsvc/internal/users/usersfile"
)

// TestTokenCheckRemovesDeadToken: a token refused because its user died is
// removed from the store on the spot, so that an older users file put back
// afterwards (the user enabled again, no cut-off) does not revive it, even
// on a server whose reload has not ended it in the store.
func TestTokenCheckRemovesDeadToken(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	tok := e.login("alice")
	older, err := os.ReadFile(e.usersPath)
	if err != nil {
		t.Fatal(err)
	}
	list := servertest.TestUsers(t)
	list[0].Disabled, list[0].TokensAfter = true, e.clock.Now().Add(time.Second)
	if err := usersfile.Write(e.usersPath, list); err != nil {
		t.Fatal(err)
	}
	if err := e.users.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok); w.Code != 401 {
		t.Fatalf("info with alice disabled = %d; want 401", w.Code)
	}
	if err := os.WriteFile(e.usersPath, older, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.users.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok); w.Code != 401 || errorCode(t, w) != "invalid_token" {
		t.Errorf("info with a token refused once, after the older users file is put back = %d %s; want 401 invalid_token (dead stays dead)", w.Code, w.Body)
	}
}
