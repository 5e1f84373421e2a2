package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/tokens"
)

// challengeAttempts is the attempts API.md gives an mfa_token.
const challengeAttempts = 5

// MustPutChallenge puts c under a fresh token's digest at now and returns
// the digest.
func MustPutChallenge(t *testing.T, st tokens.Store, c tokens.Challenge, now time.Time) tokens.Digest {
	t.Helper()
	_, d := tokens.New()
	if err := st.PutChallenge(context.Background(), d, c, now); err != nil {
		t.Fatalf("PutChallenge(%s, stamp %d) = %v; want nil", c.Username, c.Stamp, err)
	}
	return d
}

// aliceChallenge is alice's challenge of a login at now: five minutes
// and challengeAttempts attempts.
func aliceChallenge(now time.Time) tokens.Challenge {
	return tokens.Challenge{Username: "alice", Stamp: 1, ExpiresAt: now.Add(5 * time.Minute), Attempts: challengeAttempts}
}

// putTwice puts c at now under two fresh digests: d, which the test
// works on, and other, which what it does must leave alone.
func putTwice(t *testing.T, st tokens.Store, c tokens.Challenge, now time.Time) (d, other tokens.Digest) {
	t.Helper()
	return MustPutChallenge(t, st, c, now), MustPutChallenge(t, st, c, now)
}

// WantChallenge takes one attempt of d's challenge at now and checks that
// it stands for want, with left attempts left after it.
func WantChallenge(t *testing.T, st tokens.Store, d tokens.Digest, now time.Time, want tokens.Challenge, left int) {
	t.Helper()
	got, err := st.TryChallenge(context.Background(), d, now)
	if err != nil {
		t.Fatalf("TryChallenge(%x) = %v; want %s's challenge", d[:4], err, want.Username)
	}
	if got.Username != want.Username || got.Stamp != want.Stamp || got.Attempts != left ||
		!got.ExpiresAt.Truncate(time.Millisecond).Equal(want.ExpiresAt.Truncate(time.Millisecond)) {
		t.Fatalf("TryChallenge(%x) = %+v; want %+v with %d attempts left", d[:4], got, want, left)
	}
}

// WantNoChallenge checks that TryChallenge of d at now is ErrNotFound.
func WantNoChallenge(t *testing.T, st tokens.Store, d tokens.Digest, now time.Time) {
	t.Helper()
	got, err := st.TryChallenge(context.Background(), d, now)
	wantGone(t, "TryChallenge", d, got, err)
}

// challengeFound reports whether TryChallenge of d at now succeeds; errors
// other than ErrNotFound fail t.
func challengeFound(t *testing.T, st tokens.Store, d tokens.Digest, now time.Time) bool {
	t.Helper()
	_, err := st.TryChallenge(context.Background(), d, now)
	return present(t, "TryChallenge", d, err, "a challenge")
}

// testChallengeRoundTrip: a challenge comes back as put, with its issue
// time the now of PutChallenge, and only under its own digest.
func testChallengeRoundTrip(t *testing.T, st tokens.Store) {
	now := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	alice := tokens.Challenge{Username: "alice", Stamp: 3, ExpiresAt: now.Add(5*time.Minute + 123456789), Attempts: challengeAttempts}
	bob := tokens.Challenge{Username: "bob:w:x|y ü*", Stamp: 1 << 16, ExpiresAt: now.Add(time.Hour).UTC(), Attempts: 1}
	da := MustPutChallenge(t, st, alice, now)
	db := MustPutChallenge(t, st, bob, now)
	got, err := st.TryChallenge(context.Background(), da, now.Add(time.Second))
	if err != nil {
		t.Fatalf("TryChallenge(alice's) = %v; want her challenge", err)
	}
	if got.Username != alice.Username || got.Stamp != alice.Stamp || got.Attempts != challengeAttempts-1 || !got.IssuedAt.Equal(now) ||
		!got.ExpiresAt.Truncate(time.Millisecond).Equal(alice.ExpiresAt.Truncate(time.Millisecond)) {
		t.Fatalf("TryChallenge(alice's) = %+v; want %+v issued at %v with %d attempts left", got, alice, now, challengeAttempts-1)
	}
	WantChallenge(t, st, db, now, bob, 0)
	WantNoChallenge(t, st, RandomDigest(), now)
}

// testChallengeAttempts: a challenge gives exactly its attempts, counting
// down, and then none.
func testChallengeAttempts(t *testing.T, st tokens.Store) {
	now := time.Now()
	c := aliceChallenge(now)
	d, other := putTwice(t, st, c, now)
	for i := range challengeAttempts {
		WantChallenge(t, st, d, now, c, challengeAttempts-1-i)
	}
	WantNoChallenge(t, st, d, now)
	WantNoChallenge(t, st, d, now)
	WantChallenge(t, st, other, now, c, challengeAttempts-1) // attempts are the challenge's own
}

// atOnce calls f(0) … f(n-1) on n goroutines released together, so that
// they race as requests on n instances would, and waits for them all.
func atOnce(n int, f func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// testChallengeAttemptsParallel: of many attempts at once (on other
// instances, as far as the store can tell), exactly the challenge's
// attempts succeed.
func testChallengeAttemptsParallel(t *testing.T, st tokens.Store) {
	const parallel = 20
	now := time.Now()
	for round := range 5 {
		d := MustPutChallenge(t, st, aliceChallenge(now), now)
		var succeeded atomic.Int32
		atOnce(parallel, func(int) {
			_, err := st.TryChallenge(context.Background(), d, now)
			switch {
			case err == nil:
				succeeded.Add(1)
			case !errors.Is(err, tokens.ErrNotFound):
				t.Errorf("TryChallenge = %v; want a challenge or %v", err, tokens.ErrNotFound)
			}
		})
		if n := succeeded.Load(); n != challengeAttempts {
			t.Fatalf("round %d: %d parallel TryChallenge succeeded %d times; want %d", round, parallel, n, challengeAttempts)
		}
	}
}

// testChallengeExpiryByNow: the now given to TryChallenge decides: a
// challenge whose ExpiresAt <= now is gone.
func testChallengeExpiryByNow(t *testing.T, st tokens.Store) {
	now := time.Now().Truncate(time.Millisecond)
	c := aliceChallenge(now)
	d := MustPutChallenge(t, st, c, now)
	WantChallenge(t, st, d, c.ExpiresAt.Add(-time.Millisecond), c, challengeAttempts-1)
	WantNoChallenge(t, st, d, c.ExpiresAt)
	WantNoChallenge(t, st, d, c.ExpiresAt.Add(time.Hour))
	// Sweep counts no session for expired challenges, and leaves a live one.
	swept := MustPutChallenge(t, st, c, now)
	live := MustPutChallenge(t, st, tokens.Challenge{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour), Attempts: challengeAttempts}, now)
	if n := st.Sweep(c.ExpiresAt); n != 0 {
		t.Errorf("Sweep(expiry) with only challenges stored = %d; want 0 sessions", n)
	}
	WantNoChallenge(t, st, swept, c.ExpiresAt)
	WantChallenge(t, st, live, c.ExpiresAt, tokens.Challenge{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, challengeAttempts-1)
}

// testChallengeExpiryRealTime: a challenge dies when its time comes, even
// in a store (Redis) that expires keys by its own clock.
func testChallengeExpiryRealTime(t *testing.T, st tokens.Store) {
	c := tokens.Challenge{Username: "alice", Stamp: 1, ExpiresAt: time.Now().Add(300 * time.Millisecond), Attempts: 1000}
	d := MustPutChallenge(t, st, c, time.Now())
	deadline := time.Now().Add(3 * time.Second)
	for challengeFound(t, st, d, time.Now()) {
		if time.Now().After(deadline) {
			t.Fatalf("TryChallenge(%x) 3s after PutChallenge found a challenge that expired after 300ms", d[:4])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testSpendChallenge: a spent challenge is gone; spending is idempotent.
func testSpendChallenge(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	c := aliceChallenge(now)
	d, other := putTwice(t, st, c, now)
	WantChallenge(t, st, d, now, c, challengeAttempts-1)
	if err := st.SpendChallenge(ctx, d); err != nil {
		t.Fatalf("SpendChallenge(%x) = %v; want nil", d[:4], err)
	}
	WantNoChallenge(t, st, d, now)
	if err := st.SpendChallenge(ctx, d); err != nil {
		t.Fatalf("SpendChallenge(%x) again = %v; want nil", d[:4], err)
	}
	if err := st.SpendChallenge(ctx, RandomDigest()); err != nil {
		t.Fatalf("SpendChallenge(unknown) = %v; want nil", err)
	}
	WantChallenge(t, st, other, now, c, challengeAttempts-1)
}

// claim calls ClaimChallenge of d at now, failing t on an error.
func claim(t *testing.T, st tokens.Store, d tokens.Digest, now time.Time) bool {
	t.Helper()
	ok, err := st.ClaimChallenge(context.Background(), d, now)
	if err != nil {
		t.Fatalf("ClaimChallenge(%x) = %v; want no error", d[:4], err)
	}
	return ok
}

// unclaim calls UnclaimChallenge of d, failing t on an error.
func unclaim(t *testing.T, st tokens.Store, d tokens.Digest) {
	t.Helper()
	if err := st.UnclaimChallenge(context.Background(), d); err != nil {
		t.Fatalf("UnclaimChallenge(%x) = %v; want nil", d[:4], err)
	}
}

// testClaimChallenge: a challenge is claimed once; while claimed it is
// neither tried nor claimed again; given back, it has the attempts it
// had; spent, it is gone. The attempt that leaves none can still claim.
func testClaimChallenge(t *testing.T, st tokens.Store) {
	now := time.Now()
	c := aliceChallenge(now)
	d, other := putTwice(t, st, c, now)
	WantChallenge(t, st, d, now, c, challengeAttempts-1)
	if !claim(t, st, d, now) {
		t.Fatalf("ClaimChallenge(%x) = false; want true: the first claim", d[:4])
	}
	if claim(t, st, d, now) {
		t.Fatalf("ClaimChallenge(%x) again = true; want false: claimed", d[:4])
	}
	WantNoChallenge(t, st, d, now)
	WantChallenge(t, st, other, now, c, challengeAttempts-1) // claims are the challenge's own
	unclaim(t, st, d)
	WantChallenge(t, st, d, now, c, challengeAttempts-2)
	if !claim(t, st, d, now) {
		t.Fatalf("ClaimChallenge(%x) after UnclaimChallenge = false; want true", d[:4])
	}
	if err := st.SpendChallenge(context.Background(), d); err != nil {
		t.Fatalf("SpendChallenge(%x) of a claimed challenge = %v; want nil", d[:4], err)
	}
	unclaim(t, st, d) // a late give-back brings nothing back
	WantNoChallenge(t, st, d, now)
	if claim(t, st, d, now) {
		t.Fatalf("ClaimChallenge(%x) after SpendChallenge = true; want false", d[:4])
	}
	if claim(t, st, RandomDigest(), now) {
		t.Fatalf("ClaimChallenge(unknown) = true; want false")
	}
	unclaim(t, st, RandomDigest())

	// The last attempt's code can be claimed, even after a further
	// attempt was refused.
	c.Attempts = 1
	last := MustPutChallenge(t, st, c, now)
	WantChallenge(t, st, last, now, c, 0)
	WantNoChallenge(t, st, last, now)
	if !claim(t, st, last, now) {
		t.Fatalf("ClaimChallenge(%x) after its last attempt = false; want true", last[:4])
	}
	unclaim(t, st, last)
	WantNoChallenge(t, st, last, now) // given back with no attempt left

	// An expired challenge is not claimed.
	expired := MustPutChallenge(t, st, c, now)
	if claim(t, st, expired, c.ExpiresAt) {
		t.Fatalf("ClaimChallenge(%x) at its expiry = true; want false", expired[:4])
	}
}

// testClaimChallengeEnds: RevokeUser and Supersede remove a claimed
// challenge; giving the claim back does not bring it back.
func testClaimChallengeEnds(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	c := aliceChallenge(now)
	for _, end := range []struct {
		name string
		do   func()
	}{
		{"RevokeUser", func() {
			if _, err := st.RevokeUser(ctx, "alice"); err != nil {
				t.Fatal(err)
			}
		}},
		{"Supersede", func() { supersede(t, st, "alice", 1, now.Add(time.Second), time.Time{}) }},
	} {
		d := MustPutChallenge(t, st, c, now)
		if !claim(t, st, d, now) {
			t.Fatalf("ClaimChallenge(%x) = false; want true", d[:4])
		}
		end.do()
		unclaim(t, st, d)
		WantNoChallenge(t, st, d, now)
		if claim(t, st, d, now) {
			t.Fatalf("ClaimChallenge(%x) after %s and UnclaimChallenge = true; want false", d[:4], end.name)
		}
		now = now.Add(2 * time.Second) // past the cut-off
	}
}

// testClaimChallengeParallel: of callers who each take an attempt and
// then claim at once (on other instances, as far as the store can tell),
// exactly one claims: the second step hands out one token per mfa_token.
func testClaimChallengeParallel(t *testing.T, st tokens.Store) {
	const parallel = 20
	now := time.Now()
	for round := range 5 {
		d := MustPutChallenge(t, st, aliceChallenge(now), now)
		var tried, claimed atomic.Int32
		atOnce(parallel, func(i int) {
			if i < challengeAttempts { // these take an attempt first, as the second step does
				if _, err := st.TryChallenge(context.Background(), d, now); err == nil {
					tried.Add(1)
				} else if !errors.Is(err, tokens.ErrNotFound) {
					t.Errorf("TryChallenge = %v; want a challenge or %v", err, tokens.ErrNotFound)
				}
			}
			ok, err := st.ClaimChallenge(context.Background(), d, now)
			switch {
			case err != nil:
				t.Errorf("ClaimChallenge = %v; want no error", err)
			case ok:
				claimed.Add(1)
			}
		})
		if n := claimed.Load(); n != 1 {
			t.Fatalf("round %d: %d parallel ClaimChallenge (%d after an attempt) claimed %d times; want 1", round, parallel, tried.Load(), n)
		}
	}
}

// testPutChallengeSuperseded: a challenge on a stamp other than its user's
// current one is refused and stored nowhere, as Issue refuses a session;
// one on the current stamp, or of another user, is taken; and a challenge
// without an expiry or an attempt is a bug.
func testPutChallengeSuperseded(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	supersede(t, st, "alice", 2, now.Add(-time.Minute), time.Time{})
	c := aliceChallenge(now)
	_, d := tokens.New()
	if err := st.PutChallenge(ctx, d, c, now); !errors.Is(err, tokens.ErrSuperseded) {
		t.Fatalf("PutChallenge(alice, stamp 1) after Supersede(stamp 2) = %v; want %v", err, tokens.ErrSuperseded)
	}
	WantNoChallenge(t, st, d, now)
	c.Stamp = 2
	WantChallenge(t, st, MustPutChallenge(t, st, c, now), now, c, challengeAttempts-1)
	bob := tokens.Challenge{Username: "bob", Stamp: 1, ExpiresAt: now.Add(5 * time.Minute), Attempts: challengeAttempts}
	WantChallenge(t, st, MustPutChallenge(t, st, bob, now), now, bob, challengeAttempts-1)

	for _, bad := range []tokens.Challenge{
		{Username: "bob", Stamp: 1, Attempts: challengeAttempts},
		{Username: "bob", Stamp: 1, ExpiresAt: now.Add(5 * time.Minute)},
	} {
		_, d := tokens.New()
		if err := st.PutChallenge(ctx, d, bad, now); !errors.Is(err, tokens.ErrBadChallenge) {
			t.Errorf("PutChallenge(%+v) = %v; want %v", bad, err, tokens.ErrBadChallenge)
		}
		WantNoChallenge(t, st, d, now)
	}
}

// testChallengeNotSession: a challenge is no session and a session no
// challenge: neither look-up returns the other, nor List a challenge.
func testChallengeNotSession(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	c := aliceChallenge(now)
	dc := MustPutChallenge(t, st, c, now)
	WantNotFound(t, st, dc, now)
	if listed, err := st.List(ctx, "alice", now); err != nil || len(listed) != 0 {
		t.Fatalf("List(alice) with only a challenge = %d sessions, %v; want none", len(listed), err)
	}
	s := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	ds := MustIssue(t, st, s, 0, now)
	WantNoChallenge(t, st, ds, now)
	if listed, err := st.List(ctx, "alice", now); err != nil || len(listed) != 1 || listed[0].Digest != ds {
		t.Fatalf("List(alice) = %+v, %v; want her one session", listed, err)
	}
	WantFound(t, st, ds, now, s)
	WantChallenge(t, st, dc, now, c, challengeAttempts-1)
}

// testChallengeSupersede: Supersede removes the user's challenges as it
// removes sessions, those put before Before whatever their stamp and those
// put later on another stamp, counting none of them, and leaves the rest
// and other users' alone; with stamp 0, Before alone judges.
func testChallengeSupersede(t *testing.T, st tokens.Store) {
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	at := func(stamp uint64) tokens.Challenge {
		return tokens.Challenge{Username: "alice", Stamp: stamp, ExpiresAt: t0.Add(time.Hour), Attempts: challengeAttempts}
	}
	oldEarly := MustPutChallenge(t, st, at(1), t0)
	newEarly := MustPutChallenge(t, st, at(2), t0) // the current stamp, but before the cut-off
	oldLate := MustPutChallenge(t, st, at(1), t0.Add(3*time.Second))
	newLate := MustPutChallenge(t, st, at(2), t0.Add(3*time.Second))
	legacyLate := MustPutChallenge(t, st, at(maxStamp+1), t0.Add(3*time.Second)) // judged by Before alone
	bob := tokens.Challenge{Username: "bob", Stamp: 1, ExpiresAt: t0.Add(time.Hour), Attempts: challengeAttempts}
	bobs := MustPutChallenge(t, st, bob, t0)
	if n := supersede(t, st, "alice", 2, t0.Add(2*time.Second), time.Time{}); n != 0 {
		t.Errorf("Supersede(alice, 2, t0+2s) with only challenges = %d; want 0 sessions", n)
	}
	now := t0.Add(4 * time.Second)
	for _, d := range []tokens.Digest{oldEarly, newEarly, oldLate} {
		WantNoChallenge(t, st, d, now)
	}
	WantChallenge(t, st, newLate, now, at(2), challengeAttempts-1)
	WantChallenge(t, st, legacyLate, now, at(maxStamp+1), challengeAttempts-1)
	WantChallenge(t, st, bobs, now, bob, challengeAttempts-1)
	// Stamp 0 (a deleted user): the cut-off alone, within the millisecond
	// erring towards removal.
	inside := MustPutChallenge(t, st, at(2), t0.Add(5*time.Second+100*time.Microsecond))
	kept := MustPutChallenge(t, st, at(2), t0.Add(10*time.Second))
	supersede(t, st, "alice", 0, t0.Add(5*time.Second+500*time.Microsecond), time.Time{})
	for _, d := range []tokens.Digest{newLate, legacyLate, inside} {
		WantNoChallenge(t, st, d, now)
	}
	WantChallenge(t, st, kept, now, at(2), challengeAttempts-1)
	WantChallenge(t, st, bobs, now, bob, challengeAttempts-2)
}

// testChallengeRevokeUser: RevokeUser removes the user's challenges,
// counting only sessions, and no other user's.
func testChallengeRevokeUser(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	c := aliceChallenge(now)
	bob := tokens.Challenge{Username: "bob", Stamp: 1, ExpiresAt: now.Add(5 * time.Minute), Attempts: challengeAttempts}
	mine := []tokens.Digest{MustPutChallenge(t, st, c, now), MustPutChallenge(t, st, c, now)}
	MustIssue(t, st, tokens.Session{Username: "alice", Stamp: 1}, 0, now)
	bobs := MustPutChallenge(t, st, bob, now)
	if n, err := st.RevokeUser(ctx, "alice"); n != 1 || err != nil {
		t.Fatalf("RevokeUser(alice) = %d, %v; want 1 (her session; challenges uncounted), nil", n, err)
	}
	for _, d := range mine {
		WantNoChallenge(t, st, d, now)
	}
	WantChallenge(t, st, bobs, now, bob, challengeAttempts-1)
	// Challenges alone are ended too.
	d := MustPutChallenge(t, st, c, now)
	if n, err := st.RevokeUser(ctx, "alice"); n != 0 || err != nil {
		t.Fatalf("RevokeUser(alice) with only a challenge = %d, %v; want 0, nil", n, err)
	}
	WantNoChallenge(t, st, d, now)
}

// useCounter calls st.UseTOTPCounter and fails t on an error.
func useCounter(t *testing.T, st tokens.Store, username string, counter, floor int64, now, until time.Time) bool {
	t.Helper()
	ok, err := st.UseTOTPCounter(context.Background(), username, counter, floor, now, until)
	if err != nil {
		t.Fatalf("UseTOTPCounter(%s, %d, floor %d) = %v; want nil", username, counter, floor, err)
	}
	return ok
}

// wantCounter checks that UseTOTPCounter reports want.
func wantCounter(t *testing.T, st tokens.Store, username string, counter, floor int64, now, until time.Time, want bool) {
	t.Helper()
	if got := useCounter(t, st, username, counter, floor, now, until); got != want {
		t.Fatalf("UseTOTPCounter(%s, %d, floor %d) = %v; want %v", username, counter, floor, got, want)
	}
}

// testTOTPCounter: a counter is taken once, only above the last one taken
// and the floor, per user; Supersede keeps it unless the user is deleted,
// and RevokeUser keeps it.
func testTOTPCounter(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	until := now.Add(90 * time.Second)
	const c = 59_000_000 // a 30-second step of 2026
	wantCounter(t, st, "alice", c, -1, now, until, true)
	wantCounter(t, st, "alice", c, -1, now, until, false) // replayed
	wantCounter(t, st, "alice", c-1, -1, now, until, false)
	wantCounter(t, st, "alice", c+1, -1, now, until, true)
	wantCounter(t, st, "alice", c+1, -1, now, until, false)
	wantCounter(t, st, "alice", c, -1, now, until, false) // lower than the last
	wantCounter(t, st, "bob", c, -1, now, until, true)    // another user's
	// The floor: the directory's last_t of an imported device.
	wantCounter(t, st, "carol", c, c, now, until, false)
	wantCounter(t, st, "carol", c-5, c, now, until, false)
	wantCounter(t, st, "carol", c+1, c, now, until, true)
	wantCounter(t, st, "carol", c+3, c+5, now, until, false) // a floor above the kept counter wins
	wantCounter(t, st, "carol", c+6, c+5, now, until, true)
	wantCounter(t, st, "dave", 0, -1, now, until, true) // counter 0 above no floor
	wantCounter(t, st, "dave", 0, -1, now, until, false)

	// Password changes and logouts leave a used code used.
	supersede(t, st, "alice", 2, now, time.Time{})
	if _, err := st.RevokeUser(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	wantCounter(t, st, "alice", c+1, -1, now, until, false)
	// A deleted user's is forgotten: one added again under the name starts over.
	supersede(t, st, "alice", 0, now, time.Time{})
	wantCounter(t, st, "alice", c, -1, now, until, true)
	wantCounter(t, st, "carol", c+6, -1, now, until, false)
}

// testTOTPCounterParallel: of parallel uses of one code (on other
// instances, as far as the store can tell), exactly one is taken.
func testTOTPCounterParallel(t *testing.T, st tokens.Store) {
	const parallel = 20
	now := time.Now()
	for round := range 10 {
		var taken atomic.Int32
		atOnce(parallel, func(int) {
			ok, err := st.UseTOTPCounter(context.Background(), "alice", int64(1000+round), -1, now, now.Add(90*time.Second))
			if err != nil {
				t.Errorf("UseTOTPCounter = %v; want nil", err)
			}
			if ok {
				taken.Add(1)
			}
		})
		if n := taken.Load(); n != 1 {
			t.Fatalf("round %d: %d parallel UseTOTPCounter of one counter took it %d times; want exactly 1", round, parallel, n)
		}
	}
}

// testTOTPCounterUntil: a counter counts until its until, judged by now,
// and is forgotten then; one kept for ever is not.
func testTOTPCounterUntil(t *testing.T, st tokens.Store) {
	now := time.Now().Truncate(time.Millisecond)
	until := now.Add(time.Minute)
	wantCounter(t, st, "alice", 10, -1, now, until, true)
	wantCounter(t, st, "bob", 10, -1, now, time.Time{}, true)
	wantCounter(t, st, "alice", 5, -1, until.Add(-time.Millisecond), until, false)
	st.Sweep(until.Add(-time.Millisecond))
	wantCounter(t, st, "alice", 5, -1, until.Add(-time.Millisecond), until, false)
	wantCounter(t, st, "alice", 5, -1, until, until.Add(time.Minute), true)
	wantCounter(t, st, "bob", 5, -1, now.AddDate(1, 0, 0), time.Time{}, false)
	st.Sweep(now.AddDate(1, 0, 0))
	wantCounter(t, st, "bob", 5, -1, now.AddDate(1, 0, 0), time.Time{}, false)
}

// testTOTPCounterRealTime: a counter is forgotten when its until comes,
// even in a store (Redis) that forgets it by its own clock.
func testTOTPCounterRealTime(t *testing.T, st tokens.Store) {
	until := time.Now().Add(300 * time.Millisecond)
	wantCounter(t, st, "alice", 10, -1, time.Now(), until, true)
	deadline := time.Now().Add(3 * time.Second)
	for !useCounter(t, st, "alice", 5, -1, time.Now(), time.Now().Add(time.Minute)) {
		if time.Now().After(deadline) {
			t.Fatal("UseTOTPCounter(alice, 5) refused 3s after the counter 10 kept for 300ms; want it forgotten")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testChallengeSupersedeRace: challenges put on the old stamp while a
// Supersede runs (on other instances, as far as the store can tell) are
// each removed by it or refused: none is live once it returns.
func testChallengeSupersedeRace(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	const rounds, putters = 20, 4
	for round := range rounds {
		username := "racer" + string(rune('a'+round))
		var (
			mu  sync.Mutex // guards put
			put []tokens.Digest
		)
		stop := make(chan struct{})
		started := make(chan struct{}, putters)
		var wg sync.WaitGroup
		for range putters {
			wg.Go(func() {
				once := false
				defer func() { // a putter that failed at once must not hold the Supersede up
					if !once {
						started <- struct{}{}
					}
				}()
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, d := tokens.New()
					err := st.PutChallenge(ctx, d, tokens.Challenge{Username: username, Stamp: 1, ExpiresAt: time.Now().Add(5 * time.Minute), Attempts: challengeAttempts}, time.Now())
					switch {
					case err == nil:
						mu.Lock()
						put = append(put, d)
						mu.Unlock()
					case !errors.Is(err, tokens.ErrSuperseded):
						t.Errorf("PutChallenge(%s, stamp 1) = %v; want nil or %v", username, err, tokens.ErrSuperseded)
						return
					}
					if !once {
						once = true
						started <- struct{}{}
					}
				}
			})
		}
		for range putters {
			<-started
		}
		supersede(t, st, username, 2, time.Now(), time.Time{})
		close(stop)
		wg.Wait()
		live := 0
		for _, d := range put {
			if challengeFound(t, st, d, time.Now()) {
				live++
			}
		}
		if live != 0 {
			t.Fatalf("round %d: %d of %d challenges on the superseded stamp are live after Supersede returned; want none", round, live, len(put))
		}
	}
}
