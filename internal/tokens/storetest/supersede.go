package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"authsvc/internal/tokens"
)

// maxStamp is the largest password stamp the Supersede tests give
// (users.MaxSessionGeneration); larger ones are legacy stamps.
const maxStamp = 1 << 16

// supersede calls st.Supersede and fails t on an error.
func supersede(t *testing.T, st tokens.Store, username string, stamp uint64, before, until time.Time) int {
	t.Helper()
	n, err := st.Supersede(context.Background(), tokens.Supersession{Username: username, Stamp: stamp, MaxStamp: maxStamp, Before: before, Until: until})
	if err != nil {
		t.Fatalf("Supersede(%s, stamp %d) = %v; want nil", username, stamp, err)
	}
	return n
}

// wantSuperseded checks that issuing s at now is refused with
// ErrSuperseded and stores nothing.
func wantSuperseded(t *testing.T, st tokens.Store, s tokens.Session, now time.Time) {
	t.Helper()
	ctx := context.Background()
	before, err := st.List(ctx, s.Username, now)
	if err != nil {
		t.Fatal(err)
	}
	_, d := tokens.New()
	if _, err := st.Issue(ctx, d, s, 0, now); !errors.Is(err, tokens.ErrSuperseded) {
		t.Fatalf("Issue(%s, stamp %d) = %v; want %v", s.Username, s.Stamp, err, tokens.ErrSuperseded)
	}
	WantNotFound(t, st, d, now)
	if after, err := st.List(ctx, s.Username, now); err != nil || len(after) != len(before) {
		t.Fatalf("List(%s) after a refused Issue = %d sessions, %v; want %d: nothing stored", s.Username, len(after), err, len(before))
	}
}

// testSupersedeRefusesIssue: once a user's stamp is superseded, Issue
// refuses any other stamp of that user, whatever its issue time, and takes
// the current one; other users are untouched; a Supersede with stamp 0
// forgets the stamp, and any is taken again.
func testSupersedeRefusesIssue(t *testing.T, st tokens.Store) {
	now := time.Now()
	alice := func(stamp uint64) tokens.Session {
		return tokens.Session{Username: "alice", Stamp: stamp, ExpiresAt: now.Add(time.Hour), ID: tokens.NewSessionID()}
	}
	// Never superseded: any stamp.
	MustIssue(t, st, alice(1), 0, now)
	MustIssue(t, st, alice(7), 0, now)
	supersede(t, st, "alice", 2, now, time.Time{})
	wantSuperseded(t, st, alice(1), now.Add(time.Second))
	wantSuperseded(t, st, alice(3), now.Add(time.Second)) // neither older nor newer: another
	wantSuperseded(t, st, alice(maxStamp+1), now.Add(time.Second))
	d := MustIssue(t, st, alice(2), 0, now.Add(time.Second))
	WantFound(t, st, d, now, alice(2))
	bob := tokens.Session{Username: "bob", Stamp: 1}
	WantFound(t, st, MustIssue(t, st, bob, 0, now), now, bob)
	// Another Supersede wins, back to an earlier stamp included (stamps wrap).
	supersede(t, st, "alice", 1, now.Add(2*time.Second), time.Time{})
	wantSuperseded(t, st, alice(2), now.Add(3*time.Second))
	MustIssue(t, st, alice(1), 0, now.Add(3*time.Second))
	// A deleted user's stamp is forgotten: a user added again under the
	// name starts over.
	supersede(t, st, "alice", 0, now.Add(4*time.Second), time.Time{})
	MustIssue(t, st, alice(5), 0, now.Add(5*time.Second))
	MustIssue(t, st, alice(1), 0, now.Add(5*time.Second))
}

// testSupersedeStale: a Supersede whose Before is earlier than the latest
// one's is stale (an instance that read the user before the change the
// store was told last) and changes nothing: the sessions of the newer
// password live, Issue still takes its stamp and refuses the stale one.
// Of two with one Before the later call wins (an older users file put
// back); a deletion's Before holds against stale ones too.
func testSupersedeStale(t *testing.T, st tokens.Store) {
	t0 := time.Now().Truncate(time.Millisecond)
	at := func(stamp uint64) tokens.Session {
		return tokens.Session{Username: "alice", Stamp: stamp, ExpiresAt: t0.Add(time.Hour), ID: tokens.NewSessionID()}
	}
	supersede(t, st, "alice", 2, t0.Add(time.Second), time.Time{})
	supersede(t, st, "alice", 3, t0.Add(2*time.Second), time.Time{})
	fresh := MustIssue(t, st, at(3), 0, t0.Add(3*time.Second))
	if n := supersede(t, st, "alice", 2, t0.Add(time.Second), time.Time{}); n != 0 {
		t.Errorf("a stale Supersede(alice, 2, t0+1s) after (3, t0+2s) = %d; want 0", n)
	}
	WantFound(t, st, fresh, t0.Add(3*time.Second), at(3))
	MustIssue(t, st, at(3), 0, t0.Add(4*time.Second))
	wantSuperseded(t, st, at(2), t0.Add(4*time.Second))

	// The same Before: the later call wins.
	supersede(t, st, "alice", 1, t0.Add(2*time.Second), time.Time{})
	WantNotFound(t, st, fresh, t0.Add(4*time.Second))
	MustIssue(t, st, at(1), 0, t0.Add(4*time.Second))

	// Deleted, then added again: a stale Supersede from before the
	// deletion removes none of the new user's sessions.
	supersede(t, st, "alice", 0, t0.Add(5*time.Second), time.Time{})
	again := MustIssue(t, st, at(1), 0, t0.Add(6*time.Second))
	if n := supersede(t, st, "alice", 3, t0.Add(2*time.Second), time.Time{}); n != 0 {
		t.Errorf("a stale Supersede(alice, 3, t0+2s) after her deletion at t0+5s = %d; want 0", n)
	}
	WantFound(t, st, again, t0.Add(6*time.Second), at(1))
	MustIssue(t, st, at(7), 0, t0.Add(6*time.Second))
}

// testSupersedeRemoves: Supersede removes the user's sessions issued
// before Before, whatever their stamp, and those issued later on another
// stamp (a login that checked the old password while the change was
// written), and reports how many; it keeps the rest, and other users'.
func testSupersedeRemoves(t *testing.T, st tokens.Store) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	at := func(stamp uint64) tokens.Session { return tokens.Session{Username: "alice", Stamp: stamp} }
	oldEarly := MustIssue(t, st, at(1), 0, t0)
	newEarly := MustIssue(t, st, at(2), 0, t0) // the current stamp, but before the cut-off
	oldLate := MustIssue(t, st, at(1), 0, t0.Add(3*time.Second))
	otherLate := MustIssue(t, st, at(maxStamp), 0, t0.Add(3*time.Second))
	newLate := MustIssue(t, st, at(2), 0, t0.Add(3*time.Second))
	bobs := MustIssue(t, st, tokens.Session{Username: "bob", Stamp: 1}, 0, t0.Add(3*time.Second))
	if n := supersede(t, st, "alice", 2, t0.Add(2*time.Second), time.Time{}); n != 4 {
		t.Errorf("Supersede(alice, 2, t0+2s) = %d; want 4", n)
	}
	now := time.Now()
	for _, d := range []tokens.Digest{oldEarly, newEarly, oldLate, otherLate} {
		WantNotFound(t, st, d, now)
	}
	WantFound(t, st, newLate, now, at(2))
	WantFound(t, st, bobs, now, tokens.Session{Username: "bob", Stamp: 1})
	if listed, err := st.List(context.Background(), "alice", now); err != nil || len(listed) != 1 {
		t.Errorf("List(alice) after Supersede = %d sessions, %v; want 1", len(listed), err)
	}
	if n := supersede(t, st, "nobody", 1, now, time.Time{}); n != 0 {
		t.Errorf("Supersede(nobody) = %d; want 0", n)
	}
	// Stamp 0 (a deleted user): the cut-off alone.
	kept := MustIssue(t, st, at(2), 0, t0.Add(10*time.Second))
	stale := MustIssue(t, st, tokens.Session{Username: "carol", Stamp: 1}, 0, t0.Add(10*time.Second))
	if n := supersede(t, st, "alice", 0, t0.Add(5*time.Second), time.Time{}); n != 1 {
		t.Errorf("Supersede(alice, 0, t0+5s) = %d; want 1 (newLate)", n)
	}
	WantNotFound(t, st, newLate, now)
	WantFound(t, st, kept, now, at(2))
	WantFound(t, st, stale, now, tokens.Session{Username: "carol", Stamp: 1})
}

// testSupersedeLegacyStamps: a session whose stamp is above MaxStamp was
// stored by an earlier version, and only Before judges it.
func testSupersedeLegacyStamps(t *testing.T, st tokens.Store) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	legacy := []tokens.Session{{Username: "alice", Stamp: maxStamp + 1}, {Username: "alice", Stamp: math.MaxUint64}}
	var early, late []tokens.Digest
	for _, s := range legacy { // in issue order: a store may bump a login's time past the user's newest
		early = append(early, MustIssue(t, st, s, 0, t0))
	}
	for _, s := range legacy {
		late = append(late, MustIssue(t, st, s, 0, t0.Add(3*time.Second)))
	}
	if n := supersede(t, st, "alice", 2, t0.Add(2*time.Second), time.Time{}); n != 2 {
		t.Errorf("Supersede(alice, 2, t0+2s) = %d; want 2: the legacy sessions before the cut-off", n)
	}
	now := time.Now()
	for i, s := range legacy {
		WantNotFound(t, st, early[i], now)
		WantFound(t, st, late[i], now, s)
	}
}

// testSupersedeUntil: the stamp is kept until Until, and then any is taken.
func testSupersedeUntil(t *testing.T, st tokens.Store) {
	until := time.Now().Add(300 * time.Millisecond)
	supersede(t, st, "alice", 2, time.Now(), until)
	supersede(t, st, "bob", 2, time.Now(), time.Time{}) // for ever
	wantSuperseded(t, st, tokens.Session{Username: "alice", Stamp: 1}, time.Now())
	time.Sleep(time.Until(until) + 50*time.Millisecond)
	MustIssue(t, st, tokens.Session{Username: "alice", Stamp: 1}, 0, time.Now())
	wantSuperseded(t, st, tokens.Session{Username: "bob", Stamp: 1}, time.Now())
	st.Sweep(time.Now())
	wantSuperseded(t, st, tokens.Session{Username: "bob", Stamp: 1}, time.Now())
}

// testSupersedeRacesIssue: logins on the old stamp that race a Supersede
// (on other instances, as far as the store can tell) never leave a live
// session of the old stamp behind: each one is removed by the Supersede
// or refused. Run many times, since the race is won or lost by chance.
func testSupersedeRacesIssue(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	const rounds, issuers = 30, 4
	for round := range rounds {
		username := fmt.Sprint("racer", round)
		var (
			mu     sync.Mutex // guards issued
			issued []tokens.Digest
		)
		stop := make(chan struct{})
		started := make(chan struct{}, issuers)
		errc := make(chan error, issuers)
		var wg sync.WaitGroup
		for range issuers {
			wg.Go(func() {
				once := false
				for {
					select {
					case <-stop:
						errc <- nil
						return
					default:
					}
					_, d := tokens.New()
					_, err := st.Issue(ctx, d, tokens.Session{Username: username, Stamp: 1, ExpiresAt: time.Now().Add(time.Hour)}, 0, time.Now())
					switch {
					case err == nil:
						mu.Lock()
						issued = append(issued, d)
						mu.Unlock()
					case !errors.Is(err, tokens.ErrSuperseded):
						errc <- fmt.Errorf("Issue(%s, stamp 1) = %v; want nil or %v", username, err, tokens.ErrSuperseded)
						return
					}
					if !once {
						once = true
						started <- struct{}{}
					}
				}
			})
		}
		for range issuers {
			<-started
		}
		cutoff := time.Now()
		if _, err := st.Supersede(ctx, tokens.Supersession{Username: username, Stamp: 2, MaxStamp: maxStamp, Before: cutoff}); err != nil {
			t.Fatal(err)
		}
		// Every Issue that starts from here on is refused.
		_, d := tokens.New()
		if _, err := st.Issue(ctx, d, tokens.Session{Username: username, Stamp: 1}, 0, time.Now()); !errors.Is(err, tokens.ErrSuperseded) {
			t.Errorf("round %d: Issue(stamp 1) after Supersede returned = %v; want %v", round, err, tokens.ErrSuperseded)
		}
		close(stop)
		wg.Wait()
		close(errc)
		for err := range errc {
			if err != nil {
				t.Fatal(err)
			}
		}
		now := time.Now()
		live := 0
		for _, d := range issued {
			if Found(t, st, d, now) {
				live++
			}
		}
		if live != 0 {
			t.Errorf("round %d: %d of %d sessions on the superseded stamp are live after Supersede returned; want none", round, live, len(issued))
		}
		if listed, err := st.List(ctx, username, now); err != nil || len(listed) != 0 {
			t.Errorf("round %d: List after Supersede = %d sessions, %v; want none", round, len(listed), err)
		}
	}
}
