package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"authsvc/internal/tokens"
)

// Run runs the Store contract (see tokens.Store) against the
// stores that newStore returns, a fresh and empty one per subtest. newStore
// registers the store's cleanup with t.
//
// Expiry times are compared at millisecond precision: Redis keeps
// milliseconds, the memory store nanoseconds.
func Run(t *testing.T, newStore func(t *testing.T) tokens.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s tokens.Store)
	}{
		{"IssueLookup", testIssueLookup},
		{"LookupUnknown", testLookupUnknown},
		{"ExpiryByNow", testExpiryByNow},
		{"ExpiryRealTime", testExpiryRealTime},
		{"NoExpiry", testNoExpiry},
		{"Revoke", testRevoke},
		{"RevokeUser", testRevokeUser},
		{"SupersedeBefore", testSupersedeBefore},
		{"SupersedeRefusesIssue", testSupersedeRefusesIssue},
		{"SupersedeRemoves", testSupersedeRemoves},
		{"SupersedeLegacyStamps", testSupersedeLegacyStamps},
		{"SupersedeUntil", testSupersedeUntil},
		{"SupersedeRacesIssue", testSupersedeRacesIssue},
		{"SupersedeStale", testSupersedeStale},
		{"IssuedAt", testIssuedAt},
		{"SessionRecord", testSessionRecord},
		{"Enrolment", testEnrolment},
		{"ListNewestFirst", testListNewestFirst},
		{"RevokeID", testRevokeID},
		{"Touch", testTouch},
		{"ConcurrentSessions", testConcurrentSessions},
		{"Limit", testLimit},
		{"Unlimited", testUnlimited},
		{"SweepLen", testSweepLen},
		{"Import", testImport},
		{"ImportAgain", testImportAgain},
		{"ImportLeavesIssued", testImportLeavesIssued},
		{"ImportStamp", testImportStamp},
		{"ImportDryRun", testImportDryRun},
		{"ChallengeRoundTrip", testChallengeRoundTrip},
		{"ChallengeAttempts", testChallengeAttempts},
		{"ChallengeAttemptsParallel", testChallengeAttemptsParallel},
		{"ChallengeExpiryByNow", testChallengeExpiryByNow},
		{"ChallengeExpiryRealTime", testChallengeExpiryRealTime},
		{"SpendChallenge", testSpendChallenge},
		{"ClaimChallenge", testClaimChallenge},
		{"ClaimChallengeEnds", testClaimChallengeEnds},
		{"ClaimChallengeParallel", testClaimChallengeParallel},
		{"PutChallengeSuperseded", testPutChallengeSuperseded},
		{"ChallengeNotSession", testChallengeNotSession},
		{"ChallengeSupersede", testChallengeSupersede},
		{"ChallengeRevokeUser", testChallengeRevokeUser},
		{"ChallengeSupersedeRace", testChallengeSupersedeRace},
		{"TOTPCounter", testTOTPCounter},
		{"TOTPCounterParallel", testTOTPCounterParallel},
		{"TOTPCounterUntil", testTOTPCounterUntil},
		{"TOTPCounterRealTime", testTOTPCounterRealTime},
		{"Ping", testPing},
		{"Concurrent", testConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, newStore(t))
		})
	}
}

// RandomDigest returns a digest no test has issued.
func RandomDigest() tokens.Digest {
	var d tokens.Digest
	rand.Read(d[:])
	return d
}

// MustIssue issues a fresh session for s and returns its digest.
func MustIssue(t *testing.T, st tokens.Store, s tokens.Session, limit int, now time.Time) tokens.Digest {
	t.Helper()
	_, d := tokens.New()
	if _, err := st.Issue(context.Background(), d, s, limit, now); err != nil {
		t.Fatalf("Issue(%s) = %v; want nil", s.Username, err)
	}
	return d
}

// WantFound checks that d stands for want at now.
func WantFound(t *testing.T, st tokens.Store, d tokens.Digest, now time.Time, want tokens.Session) {
	t.Helper()
	got, err := st.Lookup(context.Background(), d, now)
	if err != nil {
		t.Fatalf("Lookup(%x) = %v; want %+v", d[:4], err, want)
	}
	if got.Username != want.Username || got.Stamp != want.Stamp ||
		!got.ExpiresAt.Truncate(time.Millisecond).Equal(want.ExpiresAt.Truncate(time.Millisecond)) {
		t.Fatalf("Lookup(%x) = %+v; want %+v", d[:4], got, want)
	}
}

// WantNotFound checks that d stands for no session at now.
func WantNotFound(t *testing.T, st tokens.Store, d tokens.Digest, now time.Time) {
	t.Helper()
	got, err := st.Lookup(context.Background(), d, now)
	wantGone(t, "Lookup", d, got, err)
}

// Found reports whether d stands for a session at now; other errors fail t.
func Found(t *testing.T, st tokens.Store, d tokens.Digest, now time.Time) bool {
	t.Helper()
	_, err := st.Lookup(context.Background(), d, now)
	return present(t, "Lookup", d, err, "a session")
}

// wantGone fails t unless err, of call on d, which gave got, is
// ErrNotFound.
func wantGone(t *testing.T, call string, d tokens.Digest, got any, err error) {
	t.Helper()
	if !errors.Is(err, tokens.ErrNotFound) {
		t.Fatalf("%s(%x) = %+v, %v; want %v", call, d[:4], got, err, tokens.ErrNotFound)
	}
}

// present reports whether err, of call on d, says there is what (nil) or
// nothing (ErrNotFound); another error fails t.
func present(t *testing.T, call string, d tokens.Digest, err error, what string) bool {
	t.Helper()
	switch {
	case err == nil:
		return true
	case errors.Is(err, tokens.ErrNotFound):
		return false
	}
	t.Fatalf("%s(%x) = %v; want %s or %v", call, d[:4], err, what, tokens.ErrNotFound)
	return false
}

func testIssueLookup(t *testing.T, st tokens.Store) {
	now := time.Now()
	sessions := []tokens.Session{
		{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour + 123456789)}, // sub-millisecond part
		{Username: "bob:u:x|y ü*", Stamp: math.MaxUint64, ExpiresAt: now.Add(24 * time.Hour).UTC()},
		{Username: "carol", Stamp: 0, ExpiresAt: now.Add(time.Minute).In(time.FixedZone("X", 3600))},
	}
	digests := make([]tokens.Digest, len(sessions))
	for i, s := range sessions {
		digests[i] = MustIssue(t, st, s, 0, now)
	}
	for i, s := range sessions {
		WantFound(t, st, digests[i], now, s)
	}
}

func testLookupUnknown(t *testing.T, st tokens.Store) {
	MustIssue(t, st, tokens.Session{Username: "alice", Stamp: 1}, 0, time.Now())
	WantNotFound(t, st, RandomDigest(), time.Now())
}

// testExpiryByNow checks that the now passed to Lookup decides: a session
// whose ExpiresAt <= now is not found.
func testExpiryByNow(t *testing.T, st tokens.Store) {
	now := time.Now().Truncate(time.Millisecond)
	s := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	d := MustIssue(t, st, s, 0, now)
	WantFound(t, st, d, s.ExpiresAt.Add(-time.Millisecond), s)
	WantNotFound(t, st, d, s.ExpiresAt)
	WantNotFound(t, st, d, s.ExpiresAt.Add(time.Hour))
}

// testExpiryRealTime checks that a session dies when its time comes, even
// for a store (Redis) that expires keys by its own clock.
func testExpiryRealTime(t *testing.T, st tokens.Store) {
	s := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: time.Now().Add(500 * time.Millisecond)}
	d := MustIssue(t, st, s, 0, time.Now())
	WantFound(t, st, d, time.Now(), s)
	deadline := time.Now().Add(3 * time.Second)
	for Found(t, st, d, time.Now()) {
		if time.Now().After(deadline) {
			t.Fatalf("Lookup(%x) 3s after issue found a session that expired after 500ms", d[:4])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testNoExpiry(t *testing.T, st tokens.Store) {
	now := time.Now()
	s := tokens.Session{Username: "alice", Stamp: 7}
	d := MustIssue(t, st, s, 0, now)
	WantFound(t, st, d, now.AddDate(100, 0, 0), s)
}

func testRevoke(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	s := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	d := MustIssue(t, st, s, 0, now)
	other := MustIssue(t, st, s, 0, now)
	if err := st.Revoke(ctx, d); err != nil {
		t.Fatalf("Revoke(%x) = %v; want nil", d[:4], err)
	}
	WantNotFound(t, st, d, now)
	WantFound(t, st, other, now, s)
	if err := st.Revoke(ctx, d); err != nil {
		t.Fatalf("Revoke(%x) again = %v; want nil", d[:4], err)
	}
	unknown := RandomDigest()
	if err := st.Revoke(ctx, unknown); err != nil {
		t.Fatalf("Revoke(unknown) = %v; want nil", err)
	}
	// The revoked session no longer counts for its user.
	if n, err := st.RevokeUser(ctx, "alice"); n != 1 || err != nil {
		t.Fatalf("RevokeUser(alice) = %d, %v; want 1, nil", n, err)
	}
}

// testSessionRecord: a session keeps its id, client and user agent, and
// starts with its last use at its creation.
func testSessionRecord(t *testing.T, st tokens.Store) {
	now := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	in := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour), ID: tokens.NewSessionID(), Client: "203.0.113.7", UserAgent: "curl/8.5.0"}
	d := MustIssue(t, st, in, 0, now)
	got, err := st.Lookup(context.Background(), d, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !got.LastUsedAt.Equal(got.IssuedAt) {
		t.Errorf("Lookup().LastUsedAt = %v; want IssuedAt %v before the first use", got.LastUsedAt, got.IssuedAt)
	}
	listed, err := st.List(context.Background(), "alice", time.Now())
	if err != nil || len(listed) != 1 {
		t.Fatalf("List(alice) = %d sessions, %v; want 1", len(listed), err)
	}
	ls := listed[0]
	if ls.Digest != d || ls.ID != in.ID || ls.Stamp != in.Stamp || ls.Username != "alice" || ls.Client != in.Client || ls.UserAgent != in.UserAgent ||
		!ls.IssuedAt.Equal(now) || !ls.ExpiresAt.Truncate(time.Millisecond).Equal(in.ExpiresAt.Truncate(time.Millisecond)) {
		t.Errorf("List(alice)[0] = %+v; want %+v issued at %v", ls, in, now)
	}
	if bytes.Contains([]byte(ls.ID.String()), []byte(fmt.Sprintf("%x", d[:4]))) {
		t.Errorf("session id %s holds part of the digest", ls.ID)
	}
}

// testEnrolment: a session's Enrolment mark comes back from Lookup (fresh
// and cached) and List as Issue stored it, and issuing the digest again
// without the mark, as confirming an authenticator does after the
// Supersede that removed it, makes the session a full one.
func testEnrolment(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	in := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour), ID: tokens.NewSessionID(), Enrolment: true}
	d := MustIssue(t, st, in, 0, now)
	full := MustIssue(t, st, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour), ID: tokens.NewSessionID()}, 0, now)
	for _, fresh := range []bool{true, false, false} {
		c := ctx
		if fresh {
			c = tokens.WithFresh(ctx)
		}
		if got, err := st.Lookup(c, d, now); err != nil || !got.Enrolment {
			t.Fatalf("Lookup(enrolment session, fresh %v).Enrolment = %v, %v; want true", fresh, got.Enrolment, err)
		}
		if got, err := st.Lookup(c, full, now); err != nil || got.Enrolment {
			t.Fatalf("Lookup(full session, fresh %v).Enrolment = %v, %v; want false", fresh, got.Enrolment, err)
		}
	}
	listed, err := st.List(ctx, "alice", now)
	if err != nil || len(listed) != 2 {
		t.Fatalf("List(alice) = %d sessions, %v; want 2", len(listed), err)
	}
	for _, l := range listed {
		if l.Enrolment != (l.Digest == d) {
			t.Errorf("List(alice): session %s Enrolment = %v; want %v", l.ID, l.Enrolment, l.Digest == d)
		}
	}
	later := now.Add(time.Second)
	if _, err := st.Supersede(ctx, tokens.Supersession{Username: "alice", Stamp: 2, MaxStamp: 1 << 40, Before: later}); err != nil {
		t.Fatal(err)
	}
	out := in
	out.Stamp, out.Enrolment = 2, false
	if _, err := st.Issue(ctx, d, out, 0, later); err != nil {
		t.Fatal(err)
	}
	for _, fresh := range []bool{true, false} {
		c := ctx
		if fresh {
			c = tokens.WithFresh(ctx)
		}
		if got, err := st.Lookup(c, d, later); err != nil || got.Enrolment {
			t.Errorf("Lookup(session issued again without the mark, fresh %v).Enrolment = %v, %v; want false", fresh, got.Enrolment, err)
		}
	}
}

// testListNewestFirst: List gives only the user's live sessions, newest first.
func testListNewestFirst(t *testing.T, st tokens.Store) {
	now := time.Now().Truncate(time.Millisecond)
	var ids []tokens.SessionID
	for i := range 3 {
		s := tokens.Session{Username: "alice", Stamp: 1, ID: tokens.NewSessionID(), ExpiresAt: now.Add(time.Hour)}
		MustIssue(t, st, s, 0, now.Add(time.Duration(i)*time.Second))
		ids = append(ids, s.ID)
	}
	MustIssue(t, st, tokens.Session{Username: "alice", Stamp: 1, ID: tokens.NewSessionID(), ExpiresAt: now.Add(time.Millisecond)}, 0, now) // expired below
	MustIssue(t, st, tokens.Session{Username: "bob", Stamp: 2, ID: tokens.NewSessionID()}, 0, now)
	listed, err := st.List(context.Background(), "alice", now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var got []tokens.SessionID
	for _, ls := range listed {
		got = append(got, ls.ID)
	}
	if want := []tokens.SessionID{ids[2], ids[1], ids[0]}; !slices.Equal(got, want) {
		t.Errorf("List(alice) ids = %v; want %v (newest first, no expired, no bob)", got, want)
	}
	if listed, err := st.List(context.Background(), "nobody", now); err != nil || len(listed) != 0 {
		t.Errorf("List(nobody) = %v, %v; want none", listed, err)
	}
}

// testRevokeID: RevokeID ends exactly the named session of the named user.
func testRevokeID(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	a1 := tokens.Session{Username: "alice", Stamp: 1, ID: tokens.NewSessionID()}
	a2 := tokens.Session{Username: "alice", Stamp: 1, ID: tokens.NewSessionID()}
	b := tokens.Session{Username: "bob", Stamp: 2, ID: tokens.NewSessionID()}
	d1, d2, db := MustIssue(t, st, a1, 0, now), MustIssue(t, st, a2, 0, now), MustIssue(t, st, b, 0, now)
	if found, err := st.RevokeID(ctx, "alice", b.ID); found || err != nil {
		t.Errorf("RevokeID(alice, bob's id) = %v, %v; want false: an id is only its user's", found, err)
	}
	if found, err := st.RevokeID(ctx, "alice", a1.ID); !found || err != nil {
		t.Fatalf("RevokeID(alice, a1) = %v, %v; want true", found, err)
	}
	WantNotFound(t, st, d1, now)
	WantFound(t, st, d2, now, a2)
	WantFound(t, st, db, now, b)
	if found, err := st.RevokeID(ctx, "alice", a1.ID); found || err != nil {
		t.Errorf("RevokeID(alice, a1) again = %v, %v; want false", found, err)
	}
	if listed, _ := st.List(ctx, "alice", now); len(listed) != 1 {
		t.Errorf("List(alice) after RevokeID = %d sessions; want 1", len(listed))
	}
}

// testTouch: a use moves LastUsedAt on (the store may write it a little
// later), never back, and never brings a revoked token back.
func testTouch(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	d := MustIssue(t, st, tokens.Session{Username: "alice", Stamp: 1, ID: tokens.NewSessionID()}, 0, t0)
	st.Touch(ctx, d, t0.Add(10*time.Minute))
	waitLastUsed(t, st, d, t0.Add(10*time.Minute))
	st.Touch(ctx, d, t0.Add(5*time.Minute)) // an older use
	time.Sleep(50 * time.Millisecond)
	waitLastUsed(t, st, d, t0.Add(10*time.Minute))
	if err := st.Revoke(ctx, d); err != nil {
		t.Fatal(err)
	}
	st.Touch(ctx, d, t0.Add(20*time.Minute))
	time.Sleep(50 * time.Millisecond)
	WantNotFound(t, st, d, time.Now())
}

// waitLastUsed waits up to 10 s for d's LastUsedAt to be want.
func waitLastUsed(t *testing.T, st tokens.Store, d tokens.Digest, want time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // a failed batch is retried; a loaded machine is slow
	for {
		got, err := st.Lookup(context.Background(), d, time.Now())
		if err == nil && got.LastUsedAt.Equal(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Lookup().LastUsedAt = %v, %v; want %v", got.LastUsedAt, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testConcurrentSessions: touches, lists and revocations by id from many
// goroutines at once (run it under -race).
func testConcurrentSessions(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 30 {
				s := tokens.Session{Username: fmt.Sprint("user", g%3), Stamp: 1, ID: tokens.NewSessionID()}
				_, d := tokens.New()
				if _, err := st.Issue(ctx, d, s, 5, now); err != nil {
					t.Errorf("Issue = %v", err)
					return
				}
				st.Touch(ctx, d, now.Add(time.Duration(i)*time.Second))
				if _, err := st.List(ctx, s.Username, now); err != nil {
					t.Errorf("List = %v", err)
				}
				if i%2 == 0 {
					if _, err := st.RevokeID(ctx, s.Username, s.ID); err != nil {
						t.Errorf("RevokeID = %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	for u := range 3 {
		listed, err := st.List(ctx, fmt.Sprint("user", u), now)
		if err != nil || len(listed) > 5 {
			t.Errorf("List(user%d) = %d sessions, %v; want at most the limit 5", u, len(listed), err)
		}
	}
}

// testIssuedAt: a session's IssuedAt is the now it was issued at.
func testIssuedAt(t *testing.T, st tokens.Store) {
	now := time.Now().Add(-time.Hour)
	d := MustIssue(t, st, tokens.Session{Username: "alice", Stamp: 1}, 0, now)
	got, err := st.Lookup(context.Background(), d, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got.IssuedAt.After(now) || now.Sub(got.IssuedAt) >= time.Millisecond {
		t.Errorf("Lookup().IssuedAt = %v; want %v to the millisecond, never later", got.IssuedAt, now)
	}
}

// testSupersedeBefore: a Supersede with no stamp (a deleted user's)
// removes only the sessions issued before its cut-off, and only the user's.
func testSupersedeBefore(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	alice := tokens.Session{Username: "alice", Stamp: 1}
	old1 := MustIssue(t, st, alice, 0, t0)
	old2 := MustIssue(t, st, alice, 0, t0.Add(time.Second))
	bobs := MustIssue(t, st, tokens.Session{Username: "bob", Stamp: 2}, 0, t0)
	newer := MustIssue(t, st, alice, 0, t0.Add(3*time.Second))
	if n, err := st.Supersede(ctx, tokens.Supersession{Username: "alice", Before: t0.Add(2 * time.Second)}); n != 2 || err != nil {
		t.Fatalf("Supersede(alice, before t0+2s) = %d, %v; want 2, nil", n, err)
	}
	now := time.Now()
	WantNotFound(t, st, old1, now)
	WantNotFound(t, st, old2, now)
	WantFound(t, st, newer, now, alice)
	WantFound(t, st, bobs, now, tokens.Session{Username: "bob", Stamp: 2})
	// A cut-off inside a session's millisecond, after it: the session goes.
	inside := MustIssue(t, st, alice, 0, t0.Add(5*time.Second+100*time.Microsecond))
	if n, err := st.Supersede(ctx, tokens.Supersession{Username: "alice", Before: t0.Add(5*time.Second + 500*time.Microsecond)}); n < 1 || err != nil {
		t.Fatalf("Supersede(alice, before just after a session) = %d, %v; want it removed", n, err)
	}
	WantNotFound(t, st, inside, now)
	if n, err := st.Supersede(ctx, tokens.Supersession{Username: "nobody", Before: now}); n != 0 || err != nil {
		t.Fatalf("Supersede(nobody) = %d, %v; want 0, nil", n, err)
	}
}

func testRevokeUser(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now()
	alice := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	bob := tokens.Session{Username: "bob", Stamp: 2} // never expires
	var aliceDigests, bobDigests []tokens.Digest
	for range 3 {
		aliceDigests = append(aliceDigests, MustIssue(t, st, alice, 0, now))
		bobDigests = append(bobDigests, MustIssue(t, st, bob, 0, now))
	}
	if n, err := st.RevokeUser(ctx, "alice"); n != 3 || err != nil {
		t.Fatalf("RevokeUser(alice) = %d, %v; want 3, nil", n, err)
	}
	for _, d := range aliceDigests {
		WantNotFound(t, st, d, now)
	}
	for _, d := range bobDigests {
		WantFound(t, st, d, now, bob)
	}
	if n, err := st.RevokeUser(ctx, "alice"); n != 0 || err != nil {
		t.Fatalf("RevokeUser(alice) again = %d, %v; want 0, nil", n, err)
	}
	if n, err := st.RevokeUser(ctx, "nobody"); n != 0 || err != nil {
		t.Fatalf("RevokeUser(nobody) = %d, %v; want 0, nil", n, err)
	}
}

// testLimit issues limit+k sessions at one instant: the oldest k are gone,
// the newest limit remain, and other users are untouched.
func testLimit(t *testing.T, st tokens.Store) {
	const limit, k = 3, 2
	now := time.Now()
	s := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	bob := tokens.Session{Username: "bob", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	bobDigest := MustIssue(t, st, bob, limit, now)
	var digests []tokens.Digest
	for range limit + k {
		digests = append(digests, MustIssue(t, st, s, limit, now))
	}
	for i, d := range digests {
		if i < k {
			WantNotFound(t, st, d, now)
		} else {
			WantFound(t, st, d, now, s)
		}
	}
	WantFound(t, st, bobDigest, now, bob)
	if n, err := st.RevokeUser(context.Background(), "alice"); n != limit || err != nil {
		t.Fatalf("RevokeUser(alice) = %d, %v; want %d, nil", n, err, limit)
	}
}

// testUnlimited checks that limit 0 evicts nothing.
func testUnlimited(t *testing.T, st tokens.Store) {
	now := time.Now()
	s := tokens.Session{Username: "alice", Stamp: 1}
	var digests []tokens.Digest
	for range 20 {
		digests = append(digests, MustIssue(t, st, s, 0, now))
	}
	for _, d := range digests {
		WantFound(t, st, d, now, s)
	}
}

// testSweepLen: Sweep removes what expired at now and nothing else, and
// reports it unless the backing expires sessions on its own; Len, where the
// store counts, follows.
func testSweepLen(t *testing.T, st tokens.Store) {
	now := time.Now().Truncate(time.Millisecond)
	short := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Minute)}
	long := tokens.Session{Username: "bob", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	a := MustIssue(t, st, short, 0, now)
	b := MustIssue(t, st, long, 0, now)
	n, counts := st.Len()
	if counts && n != 2 {
		t.Fatalf("Len() = %d, true; want 2", n)
	}
	if n := st.Sweep(now); n != 0 {
		t.Errorf("Sweep(now) = %d; want 0: nothing has expired", n)
	}
	later := now.Add(time.Minute)
	swept := st.Sweep(later)
	switch {
	case counts && swept != 1:
		t.Errorf("Sweep(now+1m) = %d; want 1", swept)
	case !counts && swept != 0 && swept != 1:
		t.Errorf("Sweep(now+1m) = %d; want 1, or 0 from a store that expires on its own", swept)
	}
	WantNotFound(t, st, a, later)
	WantFound(t, st, b, later, long)
	if n, ok := st.Len(); ok != counts || (counts && n != 1) {
		t.Errorf("Len() after Sweep = %d, %v; want 1, %v", n, ok, counts)
	}
}

func testPing(t *testing.T, st tokens.Store) {
	if err := st.Ping(context.Background()); err != nil {
		t.Fatalf("Ping() = %v; want nil", err)
	}
}

// testConcurrent has goroutines issue, look up and revoke sessions of a few
// users with a limit, then checks that each user holds at most limit
// sessions and that the user index and the sessions agree.
func testConcurrent(t *testing.T, st tokens.Store) {
	const (
		users      = 3
		limit      = 4
		goroutines = 8
		rounds     = 40
	)
	ctx := context.Background()
	now := time.Now()
	session := func(u int) tokens.Session {
		return tokens.Session{Username: fmt.Sprintf("user%d", u), Stamp: uint64(u), ExpiresAt: now.Add(time.Hour)}
	}

	var (
		mu     sync.Mutex // guards issued
		issued [users][]tokens.Digest
	)
	errc := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			errc <- func() error {
				for i := range rounds {
					u := (g + i) % users
					d, err := issueChecked(ctx, st, session(u), limit, now, i%3 == 0)
					if err != nil {
						return err
					}
					mu.Lock()
					issued[u] = append(issued[u], d)
					mu.Unlock()
				}
				return nil
			}()
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}

	for u := range users {
		wantIndexed(t, st, session(u).Username, issued[u], limit, now)
	}
}

// issueChecked issues a session want at now, looks it up, and when revoke
// is set revokes it and looks again: one round of testConcurrent.
func issueChecked(ctx context.Context, st tokens.Store, want tokens.Session, limit int, now time.Time, revoke bool) (tokens.Digest, error) {
	_, d := tokens.New()
	if _, err := st.Issue(ctx, d, want, limit, now); err != nil {
		return d, fmt.Errorf("Issue(%s) = %v; want nil", want.Username, err)
	}
	// Concurrent logins may have evicted d already.
	got, err := st.Lookup(ctx, d, now)
	if err != nil && !errors.Is(err, tokens.ErrNotFound) {
		return d, fmt.Errorf("Lookup(%x) = %v; want a session or %v", d[:4], err, tokens.ErrNotFound)
	}
	if err == nil && got.Username != want.Username {
		return d, fmt.Errorf("Lookup(%x) = %+v; want %+v", d[:4], got, want)
	}
	if revoke {
		if err := st.Revoke(ctx, d); err != nil {
			return d, fmt.Errorf("Revoke(%x) = %v; want nil", d[:4], err)
		}
		if _, err := st.Lookup(ctx, d, now); !errors.Is(err, tokens.ErrNotFound) {
			return d, fmt.Errorf("Lookup(%x) after Revoke = %v; want %v", d[:4], err, tokens.ErrNotFound)
		}
	}
	return d, nil
}

// wantIndexed checks that name holds at most limit of the sessions
// issued, and that RevokeUser ends exactly the live ones.
func wantIndexed(t *testing.T, st tokens.Store, name string, issued []tokens.Digest, limit int, now time.Time) {
	t.Helper()
	live := 0
	for _, d := range issued {
		if Found(t, st, d, now) {
			live++
		}
	}
	if live > limit {
		t.Errorf("%s holds %d sessions; want at most %d", name, live, limit)
	}
	// The index names exactly the live sessions: no entry without its
	// session (the count would be higher), no session outside the
	// index (it would survive RevokeUser).
	if n, err := st.RevokeUser(context.Background(), name); n != live || err != nil {
		t.Errorf("RevokeUser(%s) = %d, %v; want %d, nil", name, n, err, live)
	}
	for _, d := range issued {
		if Found(t, st, d, now) {
			t.Errorf("Lookup(%x) after RevokeUser(%s) found a session; want %v", d[:4], name, tokens.ErrNotFound)
		}
	}
}
