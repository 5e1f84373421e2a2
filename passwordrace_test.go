package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// TestPasswordChangeRace: of parallel changes sent with one token and the
// right current password, exactly one succeeds; the others get 401, and
// only the winner's new password logs in (issue 19: the write is a
// compare-and-swap on the hash current_password was checked against).
// Before, all of them answered 200 and the last write won.
func TestPasswordChangeRace(t *testing.T) {
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	tok := e.login("alice")
	const n = 4 // under the throttle's five attempts in flight
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			w := e.do("POST", "/api/auth/password/", changeBody("alice-pw", fmt.Sprintf("%s-%d", newPassphrase, i)), jsonCT, "Authorization: Token "+tok)
			codes[i] = w.Code
		})
	}
	wg.Wait()
	winner := -1
	for i, code := range codes {
		switch {
		case code == 200 && winner < 0:
			winner = i
		case code == 200:
			t.Errorf("changes %d and %d both answered 200; want exactly one", winner, i)
		case code != 401:
			t.Errorf("change %d = %d; want 200 or 401", i, code)
		}
	}
	if winner < 0 {
		t.Fatalf("no change answered 200: %v", codes)
	}
	for i := range n {
		want := 401
		if i == winner {
			want = 200
		}
		body := fmt.Sprintf(`{"username":"alice","password":"%s-%d"}`, newPassphrase, i)
		if w := e.do("POST", "/api/auth/login/", body, jsonCT); w.Code != want {
			t.Errorf("login with change %d's password = %d; want %d (change %d won)", i, w.Code, want, winner)
		}
	}
}

// revokeFailingStore is the real memory store whose RevokeUserBefore fails
// as an unreachable store's would: a fault injected into a real store.
type revokeFailingStore struct{ *tokens.MemoryStore }

func (revokeFailingStore) RevokeUserBefore(context.Context, string, time.Time) (int, error) {
	return 0, fmt.Errorf("injected: %w", tokens.ErrUnavailable)
}

// TestPasswordChangeAnswersOnceWritten: once the new hash is written, a
// store that cannot end the old tokens does not turn the reply into a 503
// that would tell the client its old password still stands; the old tokens
// are refused anyway, by the cut-off written with the hash.
func TestPasswordChangeAnswersOnceWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	if err := users.WriteFile(path, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	store := revokeFailingStore{tokens.NewMemoryStore()}
	d, closeDeps, err := buildDeps(testConfig(path), slog.New(slog.NewTextHandler(io.Discard, nil)), withStore(store))
	t.Cleanup(closeDeps)
	if err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, handler: httpapi.NewServer(d)}
	old := e.login("alice")
	w := e.do("POST", "/api/auth/password/", changeBody("alice-pw", newPassphrase), jsonCT, "Authorization: Token "+old)
	if w.Code != http.StatusOK {
		t.Fatalf("password change with the store failing to revoke = %d %s; want 200", w.Code, w.Body)
	}
	var reply httpapi.LoginReply
	if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil || reply.Token == "" {
		t.Fatalf("password change reply = %s; want a new token", w.Body)
	}
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+old); w.Code != 401 {
		t.Errorf("info with the old token = %d; want 401: the cut-off refuses it", w.Code)
	}
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+reply.Token); w.Code != 200 {
		t.Errorf("info with the new token = %d; want 200", w.Code)
	}
	if _, err := store.RevokeUserBefore(context.Background(), "alice", time.Now()); !errors.Is(err, tokens.ErrUnavailable) {
		t.Fatalf("the injected fault is gone: %v", err)
	}
}
