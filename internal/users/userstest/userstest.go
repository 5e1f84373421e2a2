package userstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"
)

// A Factory makes a fresh, empty backing and returns a function
// that opens a Directory on it; each call opens another handle, as another
// process or instance would.
type Factory func(t *testing.T) (open func() users.Directory)

// A fixture is what every check of Run starts from: the backing's
// factory, and alice, a user whose password hash is hash (of "alice-pw").
type fixture struct {
	factory Factory
	hash    string
	alice   users.User
}

// Run checks the Directory contract (users.Directory)
// against one implementation. Every Directory runs it unchanged.
func Run(t *testing.T, factory Factory) {
	hash := passwordtest.MustHash(t, "alice-pw", passwordtest.Cost)
	fx := fixture{
		factory: factory,
		hash:    hash,
		alice:   users.User{Username: "alice", PasswordHash: hash, Name: "Alice", Email: "alice@example.com", Groups: []string{"dev"}},
	}
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, fx fixture)
	}{
		{"empty", testEmpty},
		{"bootstrap leaves users alone", testBootstrap},
		{"add, look up, list", testAddLookUpList},
		{"add all in one write", testAddAll},
		{"update and delete", testUpdateDelete},
		{"update all in one write", testUpdateAll},
		{"update all with every change failing", testUpdateAllFailing},
		{"update all kills tokens as Update does", testUpdateAllKillsTokens},
		{"an unlock is kept", testUnlockKept},
		{"a Django hash fingerprint is kept", testDjangoHashKept},
		{"second factors are kept", testFactorsKept},
		{"second factors are given out", testFactorsGivenOut},
		{"factor keys are counted per user", testFactorKeys},
		{"a deleted user's cut-off outlives it", testCutoffOutlivesUser},
		{"another handle sees writes after Reload", testReloadSeesWrites},
		{"Recheck reads past an older copy", testRecheck},
		{"Watch brings another handle's writes", testWatch},
		{"concurrent writers lose nothing", testConcurrentWriters},
		{"the last enabled admin stays", testLastAdmin},
		{"the last enabled admin stays through a race", testLastAdminRace},
		{"operations on a user", func(t *testing.T, fx fixture) { runOps(t, fx.factory) }},
		{"authenticate through the directory", testAuthenticate},
		{"personal access tokens", runAccessTokens},
		{"password reset links", runResetLinks},
		{"pages and counts", runPage},
		{"look-ups by key", runKeys},
	} {
		// Each check opens a backing of its own (the Factory's), so the
		// checks run side by side: on PostgreSQL they wait on the
		// database, not on each other.
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, fx)
		})
	}
}

// withAlice opens a handle on a fresh backing and adds alice.
func (fx fixture) withAlice(t *testing.T) users.Directory {
	t.Helper()
	d := fx.factory(t)()
	if err := d.Add(context.Background(), fx.alice); err != nil {
		t.Fatalf("Add(alice) = %v", err)
	}
	return d
}

// aliceOnTwo opens two handles on a fresh backing, adds alice on a, and
// reloads b, which then knows her.
func (fx fixture) aliceOnTwo(t *testing.T) (a, b users.Directory) {
	t.Helper()
	open := fx.factory(t)
	a, b = open(), open()
	ctx := context.Background()
	if err := a.Add(ctx, fx.alice); err != nil {
		t.Fatalf("Add(alice) = %v", err)
	}
	if err := b.Reload(ctx); err != nil {
		t.Fatalf("Reload() = %v", err)
	}
	return a, b
}

// testEmpty: an empty directory finds no one, yet has a hash to compare
// unknown users against, answers Ping and names its backing.
func testEmpty(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.factory(t)()
	if u, err := d.Lookup(ctx, "alice"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Lookup(alice) in an empty directory = %v, %v; want users.ErrNotFound", u, err)
	}
	if n := d.Len(); n != 0 {
		t.Errorf("Len() = %d; want 0", n)
	}
	if s := d.Slowest(); s == nil || s.Hash == nil {
		t.Errorf("Slowest() = %v; want a hash to compare unknown users against", s)
	}
	if err := d.Ping(ctx); err != nil {
		t.Errorf("Ping() of a directory that answers = %v; want nil", err)
	}
	if s := d.String(); s == "" {
		t.Errorf("String() = %q; want the backing's name", s)
	}
}

// testBootstrap: Bootstrap adds no admin to a directory that has users.
func testBootstrap(t *testing.T, fx fixture) {
	ctx := context.Background()
	hash := fx.hash
	d := fx.withAlice(t)
	admin := users.User{Username: "admin", PasswordHash: hash, Groups: []string{}, Admin: true}
	if added, err := d.Bootstrap(ctx, admin); added || err != nil {
		t.Errorf("Bootstrap(admin) of a directory with alice = %v, %v; want false, nil", added, err)
	}
	if u, err := d.Lookup(ctx, "admin"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Lookup(admin) after Bootstrap = %v, %v; want users.ErrNotFound", u, err)
	}
	if d.Len() != 1 {
		t.Errorf("Len() after Bootstrap = %d; want 1", d.Len())
	}
}

// testAddLookUpList: a user added is found, counted and listed as added, and
// cannot be added twice.
func testAddLookUpList(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice, hash := fx.alice, fx.hash
	d := fx.withAlice(t)
	u, err := d.Lookup(ctx, "alice")
	if err != nil {
		t.Fatalf("Lookup(alice) after Add = %v; want the user", err)
	}
	if u.Info().Name != "Alice" || u.Info().Email != "alice@example.com" || len(u.Info().Groups) != 1 || u.Admin() || u.Disabled() {
		t.Errorf("Lookup(alice) = %+v; want Alice's fields as added", u.Info())
	}
	if d.Len() != 1 {
		t.Errorf("Len() = %d; want 1", d.Len())
	}
	if err := d.Add(ctx, alice); !errors.Is(err, users.ErrExists) {
		t.Errorf("Add(alice) again = %v; want users.ErrExists", err)
	}
	users, err := d.List(ctx)
	if err != nil || len(users) != 1 || users[0].Username != "alice" || users[0].PasswordHash != hash {
		t.Errorf("List() = %+v, %v; want alice with her hash", users, err)
	}
}

// testAddAll: AddAll adds every user not taken and names those that are.
func testAddAll(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice := fx.alice
	d := fx.withAlice(t)
	bob, carol := alice, alice
	bob.Username, carol.Username = "bob", "carol"
	existing, err := d.AddAll(ctx, []users.User{bob, alice, carol})
	if err != nil || len(existing) != 1 || existing[0] != "alice" {
		t.Fatalf("AddAll(bob, alice, carol) = %v, %v; want [alice] taken", existing, err)
	}
	if d.Len() != 3 {
		t.Errorf("Len() after AddAll = %d; want 3", d.Len())
	}
}

// testUpdateDelete: Update writes a change, and nothing of a change that fails;
// Delete removes the user; neither finds a user who is not there.
func testUpdateDelete(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAlice(t)
	if err := users.Update(ctx, d, "alice", func(u *users.User) error { u.Disabled = true; return nil }); err != nil {
		t.Fatalf("Update(alice) = %v", err)
	}
	if u, err := d.Lookup(ctx, "alice"); err != nil || !u.Disabled() {
		t.Errorf("Lookup(alice) after disabling = %v, %v; want disabled", u, err)
	}
	refused := errors.New("refused")
	if err := users.Update(ctx, d, "alice", func(u *users.User) error { u.Disabled = false; return refused }); !errors.Is(err, refused) {
		t.Errorf("Update(alice) with a failing change = %v; want its error", err)
	}
	if u, _ := d.Lookup(ctx, "alice"); u == nil || !u.Disabled() {
		t.Errorf("a failed Update wrote its change")
	}
	if err := users.Update(ctx, d, "bob", func(*users.User) error { return nil }); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Update(bob) = %v; want users.ErrNotFound", err)
	}
	if err := d.Delete(ctx, "alice"); err != nil {
		t.Fatalf("Delete(alice) = %v", err)
	}
	if _, err := d.Lookup(ctx, "alice"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Lookup(alice) after Delete = %v; want users.ErrNotFound", err)
	}
	if err := d.Delete(ctx, "alice"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Delete(alice) again = %v; want users.ErrNotFound", err)
	}
}

// testUpdateAll: UpdateAll makes every change that succeeds and reports
// the others by user, writing nothing of them and adding no one.
func testUpdateAll(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice, hash := fx.alice, fx.hash
	d := fx.factory(t)()
	bob, carol, dave := alice, alice, alice
	bob.Username, carol.Username, dave.Username = "bob", "carol", "dave"
	if existing, err := d.AddAll(ctx, []users.User{alice, bob, carol, dave}); err != nil || len(existing) != 0 {
		t.Fatalf("AddAll(alice, bob, carol, dave) = %v, %v", existing, err)
	}
	refused := errors.New("refused")
	at := time.Date(2026, 11, 25, 3, 4, 5, 6000, time.UTC)
	failed, err := d.UpdateAll(ctx, map[string]func(*users.User) error{
		"alice": func(u *users.User) error { u.Name = "Alice L."; return nil },
		"bob":   func(u *users.User) error { u.Name = "half done"; return refused },
		"carol": func(u *users.User) error { u.FailuresAfter = at; return nil },
		"dave":  func(u *users.User) error { u.PasswordHash = "not a hash"; return nil },
		"erin":  func(u *users.User) error { return nil },
	})
	if err != nil {
		t.Fatalf("UpdateAll = %v, %v; want failures by user, no error", failed, err)
	}
	if len(failed) != 3 || !errors.Is(failed["bob"], refused) || failed["dave"] == nil || !errors.Is(failed["erin"], users.ErrNotFound) {
		t.Errorf("UpdateAll's failures = %v; want bob's change's error, dave's refused hash, erin users.ErrNotFound", failed)
	}
	if u, err := d.Lookup(ctx, "alice"); err != nil || u.Info().Name != "Alice L." {
		t.Errorf("Lookup(alice) after UpdateAll = %v, %v; want her new name", u, err)
	}
	if u, err := d.Lookup(ctx, "carol"); err != nil || !u.FailuresAfter().Equal(at) {
		t.Errorf("Lookup(carol) after UpdateAll = %v, %v; want FailuresAfter %v", u, err, at)
	}
	if u, err := d.Lookup(ctx, "bob"); err != nil || u.Info().Name != "Alice" {
		t.Errorf("Lookup(bob) after his change failed = %v, %v; want him as he was", u, err)
	}
	list, err := d.List(ctx)
	if err != nil || len(list) != 4 {
		t.Fatalf("List() after UpdateAll = %v, %v; want 4 users", list, err)
	}
	for _, u := range list {
		if u.Username == "dave" && u.PasswordHash != hash {
			t.Errorf("dave's hash after a change to one that is refused = %q; want his own", u.PasswordHash)
		}
		if u.Username == "bob" && u.Name != "Alice" {
			t.Errorf("bob's name after his change failed = %q; want the one he had", u.Name)
		}
	}
	if _, err := d.Lookup(ctx, "erin"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Lookup(erin) after UpdateAll = %v; want users.ErrNotFound: UpdateAll adds no one", err)
	}
}

// testUpdateAllFailing: UpdateAll whose every change fails writes nothing, and
// UpdateAll of nothing does nothing.
func testUpdateAllFailing(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAlice(t)
	refused := errors.New("refused")
	failed, err := d.UpdateAll(ctx, map[string]func(*users.User) error{
		"alice": func(u *users.User) error { u.Disabled = true; return refused },
		"bob":   func(u *users.User) error { return nil },
	})
	if err != nil || len(failed) != 2 || !errors.Is(failed["alice"], refused) || !errors.Is(failed["bob"], users.ErrNotFound) {
		t.Errorf("UpdateAll with only failing changes = %v, %v; want alice's error and bob users.ErrNotFound, no error", failed, err)
	}
	if u, err := d.Lookup(ctx, "alice"); err != nil || u.Disabled() {
		t.Errorf("Lookup(alice) after her change failed = %v, %v; want her enabled, as she was", u, err)
	}
	if failed, err := d.UpdateAll(ctx, nil); err != nil || len(failed) != 0 {
		t.Errorf("UpdateAll(nil) = %v, %v; want nothing, nil", failed, err)
	}
}

// testUpdateAllKillsTokens: UpdateAll's disable and logout cut the users' tokens,
// on the writing handle and, through Watch, on another.
func testUpdateAllKillsTokens(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice := fx.alice
	open := fx.factory(t)
	a, b := open(), open()
	bob, carol := alice, alice
	bob.Username, carol.Username = "bob", "carol"
	if _, err := a.AddAll(ctx, []users.User{alice, bob, carol}); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards cuts
	cuts := map[string]users.Cut{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.Watch(wctx, 10*time.Millisecond, nil, users.WatchHooks{Cut: func(c users.Cut) {
		mu.Lock()
		defer mu.Unlock()
		cuts[c.Username] = c
	}})
	logout := time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)
	before := time.Now()
	failed, err := a.UpdateAll(ctx, map[string]func(*users.User) error{
		"alice": func(u *users.User) error { u.Disabled = true; return nil },
		"bob":   func(u *users.User) error { u.TokensAfter = logout; return nil },
		"carol": func(u *users.User) error { u.Name = "Carol"; return nil },
	})
	if err != nil || len(failed) != 0 {
		t.Fatalf("UpdateAll = %v, %v; want every change made", failed, err)
	}
	// The watching handle is told before anything looks alice or bob
	// up there: a look-up could fill a cache with them as they are now.
	deadline := time.Now().Add(5 * time.Second) // API.md: changes reach every instance within 5 s
	for {
		mu.Lock()
		alice, aliceCut := cuts["alice"]
		bob, bobCut := cuts["bob"]
		_, carolCut := cuts["carol"]
		mu.Unlock()
		if aliceCut && bobCut {
			if alice.Before.Before(before) || !bob.Before.Equal(logout) || carolCut {
				t.Errorf("Watch's cuts after UpdateAll = alice %+v, bob %+v, carol cut %v; want alice's at the change, bob's at %v, none of carol's", alice, bob, carolCut, logout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Watch's cuts 5 s after UpdateAll: alice %v, bob %v; want both", aliceCut, bobCut)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, d := range []users.Directory{a, b} {
		if u, err := d.Lookup(ctx, "alice"); err != nil || !u.Disabled() {
			t.Errorf("Lookup(alice) after UpdateAll = %v, %v; want disabled", u, err)
		}
		if u, err := d.Lookup(ctx, "bob"); err != nil || !u.TokensAfter().Equal(logout) {
			t.Errorf("Lookup(bob).TokensAfter() after UpdateAll = %v, %v; want %v", u, err, logout)
		}
		if u, _ := users.SessionUser(ctx, d, "bob", logout.Add(-time.Millisecond), users.MaxSessionGeneration+1); u != nil {
			t.Errorf("SessionUser(bob, a token issued before his new cut-off) = bob; want nil")
		}
	}
}

// testUnlockKept: FailuresAfter, an unlock's time, is kept to the microsecond.
func testUnlockKept(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAlice(t)
	if u, err := d.Lookup(ctx, "alice"); err != nil || !u.FailuresAfter().IsZero() {
		t.Fatalf("Lookup(alice).FailuresAfter() of a new user = %v, %v; want zero", u, err)
	}
	at := time.Date(2026, 11, 25, 3, 4, 5, 6000, time.UTC) // microseconds: what PostgreSQL keeps
	if err := users.Update(ctx, d, "alice", func(u *users.User) error { u.FailuresAfter = at; return nil }); err != nil {
		t.Fatal(err)
	}
	if u, err := d.Lookup(ctx, "alice"); err != nil || !u.FailuresAfter().Equal(at) {
		t.Errorf("Lookup(alice).FailuresAfter() after the update = %v, %v; want %v", u.FailuresAfter(), err, at)
	}
	list, err := d.List(ctx)
	if err != nil || len(list) != 1 || !list[0].FailuresAfter.Equal(at) {
		t.Errorf("List() after the update = %+v, %v; want alice with FailuresAfter %v", list, err, at)
	}
}

// testDjangoHashKept: DjangoHash is kept through Add, Update and UpdateAll,
// and a malformed one is refused.
func testDjangoHashKept(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice := fx.alice
	d := fx.factory(t)()
	fp := "0a1b2c3d:" + strings.Repeat("5e", 32)
	imported := alice
	imported.DjangoHash = fp
	if err := d.Add(ctx, imported); err != nil {
		t.Fatal(err)
	}
	wantFP := func(when, want string) {
		t.Helper()
		list, err := d.List(ctx)
		if err != nil || len(list) != 1 || list[0].DjangoHash != want {
			t.Errorf("List() %s = %+v, %v; want alice with DjangoHash %q", when, list, err, want)
		}
	}
	wantFP("after Add", fp)
	if err := users.Update(ctx, d, "alice", func(u *users.User) error { u.Email = "a@example.com"; return nil }); err != nil {
		t.Fatal(err)
	}
	wantFP("after an Update of another field", fp)
	next := "0a1b2c3d:" + strings.Repeat("6f", 32)
	if _, err := d.UpdateAll(ctx, map[string]func(*users.User) error{"alice": func(u *users.User) error { u.DjangoHash = next; return nil }}); err != nil {
		t.Fatal(err)
	}
	wantFP("after UpdateAll", next)
	err := users.Update(ctx, d, "alice", func(u *users.User) error { u.DjangoHash = "not a fingerprint"; return nil })
	if err == nil {
		t.Errorf("Update to a malformed DjangoHash = nil; want an error")
	}
	wantFP("after a refused Update", next)
}

// testCutoffOutlivesUser: a user deleted and added again keeps a cut-off after
// the deleted user's tokens.
func testCutoffOutlivesUser(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice := fx.alice
	d := fx.withAlice(t)
	issued := time.Now() // a token of alice's
	if err := d.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	again := alice
	again.TokensAfter = issued.Add(-time.Hour) // an import, say, with an older cut-off
	if existing, err := d.AddAll(ctx, []users.User{again}); err != nil || len(existing) != 0 {
		t.Fatalf("AddAll(alice) after Delete = %v, %v; want her added", existing, err)
	}
	u, err := d.Lookup(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !u.TokensAfter().After(issued) {
		t.Errorf("Lookup(alice).TokensAfter() after Delete and AddAll = %v; want after %v, the deleted alice's token", u.TokensAfter(), issued)
	}
	if err := d.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := d.Add(ctx, again); err != nil {
		t.Fatal(err)
	}
	if u, err := d.Lookup(ctx, "alice"); err != nil || !u.TokensAfter().After(issued) {
		t.Errorf("Lookup(alice) after Delete and Add = %v, %v; want her cut-off after %v", u, err, issued)
	}
}

// testReloadSeesWrites: another handle finds a user added once it reloads.
func testReloadSeesWrites(t *testing.T, fx fixture) {
	ctx := context.Background()
	_, b := fx.aliceOnTwo(t)
	if _, err := b.Lookup(ctx, "alice"); err != nil {
		t.Errorf("Lookup(alice) on another handle after Reload = %v; want the user", err)
	}
}

// testRecheck: Recheck on a handle behind another's write returns the
// write, not its copy.
func testRecheck(t *testing.T, fx fixture) {
	ctx := context.Background()
	a, b := fx.aliceOnTwo(t)
	if _, err := b.Lookup(ctx, "alice"); err != nil {
		t.Fatalf("Lookup(alice) on another handle after Reload = %v; want the user", err)
	}
	// Another instance changes alice's password; b, not watching, is
	// behind. What b's Recheck returns is the change, never the copy.
	changed := time.Now().UTC().Truncate(time.Millisecond)
	if err := users.Update(ctx, a, "alice", func(u *users.User) error {
		u.PasswordGeneration++
		u.TokensAfter = changed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if u, err := b.Recheck(ctx, "alice"); err != nil {
		t.Errorf("Recheck(alice) on a handle behind a password change = %v", err)
	} else if g, cut := u.SessionGeneration(), u.TokensAfter(); g != users.SessionGeneration(1) || !cut.Equal(changed) {
		t.Errorf("Recheck(alice) on a handle behind a password change = stamp %d, cut-off %v; want %d, %v", g, cut, users.SessionGeneration(1), changed)
	}
	if _, err := b.Recheck(ctx, "nobody"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Recheck(nobody) = %v; want users.ErrNotFound", err)
	}
	// A session issued on the new password is live on b, whatever its copy.
	if u, err := users.SessionUser(ctx, b, "alice", changed.Add(time.Millisecond), users.SessionGeneration(1)); u == nil || err != nil {
		t.Errorf("SessionUser(alice, a token of the new password) on a handle behind = %v, %v; want alice", u, err)
	}
	if err := a.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recheck(ctx, "alice"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("Recheck(alice) on a handle behind her deletion = %v; want users.ErrNotFound", err)
	}
}

// testWatch: a watching handle finds another handle's write within the
// bound API.md gives.
func testWatch(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice := fx.alice
	open := fx.factory(t)
	a, b := open(), open()
	if err := b.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reloads := make(chan error, 16)
	go b.Watch(wctx, 10*time.Millisecond, nil, users.WatchHooks{Reloaded: func(err error) {
		select {
		case reloads <- err:
		default:
		}
	}})
	if err := a.Add(ctx, alice); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second) // API.md: changes reach every instance within 5 s
	for {
		if _, err := b.Lookup(ctx, "alice"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice, added on one handle, not visible on a watching handle after 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-reloads; err != nil {
		t.Errorf("Watch reported reload error %v; want nil", err)
	}
}

// testConcurrentWriters: Adds from many handles at once are all kept. A
// backing that could not answer in time says so (ErrUnavailable: a write
// timed out on a loaded machine) and is asked again, as a caller would;
// an Add asked again that finds its user (ErrExists) had committed before
// its answer was lost. What is never allowed is a write reported done
// and then missing, or any other error.
func testConcurrentWriters(t *testing.T, fx fixture) {
	ctx := context.Background()
	alice := fx.alice
	open := fx.factory(t)
	const writers = 12
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			u := alice
			u.Username = fmt.Sprintf("user%d", i)
			d := open()
			err := d.Add(ctx, u)
			for try := 0; try < 5 && errors.Is(err, users.ErrUnavailable); try++ {
				time.Sleep(100 * time.Millisecond)
				if err = d.Add(ctx, u); errors.Is(err, users.ErrExists) {
					err = nil
				}
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Add = %v", err)
		}
	}
	users, err := open().List(ctx)
	if err != nil || len(users) != writers {
		t.Errorf("List() after %d concurrent Adds = %d users, %v; want %d", writers, len(users), err, writers)
	}
}

// testAuthenticate: users.Authenticate matches a right password only.
func testAuthenticate(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.withAlice(t)
	compare := passwordtest.Verify
	for _, tt := range []struct {
		username, password string
		ok                 bool
	}{
		{"alice", "alice-pw", true},
		{"alice", "wrong", false},
		{"nobody", "alice-pw", false},
	} {
		if _, ok, _ := users.Authenticate(ctx, d, tt.username, tt.password, compare, nil); ok != tt.ok {
			t.Errorf("authenticate(%q, %q) = %v; want %v", tt.username, tt.password, ok, tt.ok)
		}
	}
}

// jsonOf returns v as JSON, for messages.
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
