package usersfile

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// TestFreshTokenSurvivesFastReload: two instances on one users file and one
// token store, B reloading in a tight loop (--reload-interval 5ms), A
// changing alice's password as its API does (the write, Supersede with the
// new stamp and cut-off, a session issued on them). The session must stay
// live in the store and on both copies. Before, B could read the change's
// cut-off record while the new users file was still being written, load
// the old entry under the new cut-off, and tell the store Supersede(old
// stamp, new cut-off) after A's, which removed the fresh session: 9 tokens
// in 20 at 60,000 users. B's load here waits, between reading the file
// and parsing it, until A has issued the round's session: a parse of a
// big file that outlasts A's reply.
func TestFreshTokenSurvivesFastReload(t *testing.T) {
	const rounds, others = 10, 1000
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	hash := passwordtest.MustHash(t, "alice-pw", passwordtest.Cost)
	list := []users.User{{Username: "alice", PasswordHash: hash, Groups: []string{}}}
	for i := range others {
		// Enough users that the write of the file takes a while: B's
		// loads find the change under way.
		list = append(list, users.User{Username: fmt.Sprintf("user%05d", i), PasswordHash: hash, Groups: []string{}})
	}
	if err := Write(path, list); err != nil {
		t.Fatal(err)
	}
	a, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := tokens.NewMemoryStore()
	supersede := func(username string, stamp uint64, before time.Time) {
		t.Helper()
		sup := tokens.Supersession{Username: username, Stamp: stamp, MaxStamp: users.MaxSessionGeneration, Before: before}
		if _, err := store.Supersede(ctx, sup); err != nil {
			t.Errorf("Supersede(%s) = %v", username, err)
		}
	}
	var round atomic.Int64 // the round under way, an index into issued
	issued := make([]chan struct{}, rounds+1)
	for r := range issued {
		issued[r] = make(chan struct{})
	}
	close(issued[0])
	b.afterRead = func() {
		select {
		case <-issued[round.Load()]:
		case <-time.After(2 * time.Second): // A stuck: its own failure says why
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		b.Watch(wctx, time.Millisecond, nil, users.WatchHooks{Cut: func(c users.Cut) { supersede(c.Username, c.Stamp, c.Before) }})
	}()
	defer func() { cancel(); <-watched }()

	died := 0
	for r := 1; r <= rounds; r++ {
		round.Store(int64(r))
		var cutoff time.Time
		var generation uint64
		if err := a.Update(ctx, "alice", func(u *users.User) error {
			u.PasswordGeneration++
			u.TokensAfter = users.NextCutoff(u.TokensAfter, time.Now())
			cutoff, generation = u.TokensAfter, u.PasswordGeneration
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		stamp := users.SessionGeneration(generation)
		supersede("alice", stamp, cutoff)
		at := users.Later(time.Now(), cutoff)
		digest := tokens.Digest{byte(r), 1}
		if _, err := store.Issue(ctx, digest, tokens.Session{Username: "alice", Stamp: stamp, ExpiresAt: at.Add(time.Hour)}, 1000, at); err != nil {
			t.Fatalf("round %d: Issue of the session after the change = %v; want it stored", r, err)
		}
		close(issued[r])
		// Once B's copy has the change, every load of B that read the
		// change half done has told the store what it told it: its loads
		// run one at a time.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			if u, err := b.Lookup(ctx, "alice"); err == nil && u.SessionGeneration() == stamp {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: B's copy 5 s after the change has not got it", r)
			}
		}
		_, storeErr := store.Lookup(ctx, digest, at)
		onA, errA := users.SessionUser(ctx, a, "alice", at, stamp)
		onB, errB := users.SessionUser(ctx, b, "alice", at, stamp)
		if storeErr != nil || onA == nil || onB == nil {
			died++
			t.Errorf("round %d: the session issued after the password change: store Lookup = %v; SessionUser on A = %v, %v; on B = %v, %v; want it live everywhere",
				r, storeErr, onA != nil, errA, onB != nil, errB)
		}
	}
	if died > 0 {
		t.Errorf("%d of %d sessions issued after a password change died; want none", died, rounds)
	}
}
