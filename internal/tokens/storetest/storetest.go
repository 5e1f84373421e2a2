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

// waitLastUsed waits up to 2 s for d's LastUsedAt to be want.
func waitLastUsed(t *testing.T, st tokens.Store, d tokens.Digest, want time.Time) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
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
