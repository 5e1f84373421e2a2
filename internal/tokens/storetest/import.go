package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"authsvc/internal/tokens"
)

// importOne imports s under d and returns its outcome; errors fail t.
func importOne(t *testing.T, st tokens.Store, d tokens.Digest, s tokens.Session, now time.Time, dryRun bool) tokens.ImportOutcome {
	t.Helper()
	out, err := st.Import(context.Background(), []tokens.Imported{{Digest: d, Session: s}}, now, dryRun)
	if err != nil || len(out) != 1 {
		t.Fatalf("Import(%s, dry run %v) = %v, %v; want one outcome", s.Username, dryRun, out, err)
	}
	return out[0]
}

// wantImport checks that importing s under d at now does want.
func wantImport(t *testing.T, st tokens.Store, d tokens.Digest, s tokens.Session, now time.Time, dryRun bool, want tokens.ImportOutcome) {
	t.Helper()
	if got := importOne(t, st, d, s, now, dryRun); got != want {
		t.Fatalf("Import(%s %x, dry run %v) = %v; want %v", s.Username, d[:4], dryRun, got, want)
	}
}

// testImport: an imported session is found with its own issue time, is
// listed, and lasts until the expiry given; outcomes come in batch order.
func testImport(t *testing.T, st tokens.Store) {
	now := time.Now().Truncate(time.Millisecond)
	created := now.Add(-400 * 24 * time.Hour)
	alice := tokens.Session{Username: "alice", Stamp: 1, IssuedAt: created, ExpiresAt: now.Add(time.Hour), ID: tokens.NewSessionID()}
	bob := tokens.Session{Username: "bob", Stamp: 3, IssuedAt: created.Add(time.Minute), ID: tokens.NewSessionID()}
	da, db := RandomDigest(), RandomDigest()
	out, err := st.Import(context.Background(), []tokens.Imported{{Digest: da, Session: alice}, {Digest: db, Session: bob}}, now, false)
	if want := []tokens.ImportOutcome{tokens.ImportAdded, tokens.ImportAdded}; err != nil || !slices.Equal(out, want) {
		t.Fatalf("Import(alice, bob) = %v, %v; want %v", out, err, want)
	}
	WantFound(t, st, da, now, alice)
	WantFound(t, st, db, now.AddDate(50, 0, 0), bob) // no expiry
	WantNotFound(t, st, da, alice.ExpiresAt)
	got, err := st.Lookup(context.Background(), da, now)
	if err != nil || !got.IssuedAt.Equal(created) {
		t.Fatalf("Lookup(imported).IssuedAt = %v, %v; want %v (the created time given)", got.IssuedAt, err, created)
	}
	// Listed, and older than a session issued now.
	fresh := MustIssue(t, st, tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}, 0, now)
	list, err := st.List(context.Background(), "alice", now)
	if err != nil || len(list) != 2 || list[0].Digest != fresh || list[1].Digest != da || list[1].ID != alice.ID {
		t.Fatalf("List(alice) = %+v, %v; want the session issued now, then the imported one", list, err)
	}
	// A password change's cut-off ends it like any other session.
	supersede(t, st, "alice", 2, now, time.Time{})
	WantNotFound(t, st, da, now)
}

// testImportAgain: importing a live imported session again refreshes its
// expiry, and importing it after its death never brings it back, however
// it died.
func testImportAgain(t *testing.T, st tokens.Store) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	s := tokens.Session{Username: "alice", Stamp: 1, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)}
	d := RandomDigest()
	wantImport(t, st, d, s, now, false, tokens.ImportAdded)
	later := s
	later.ExpiresAt = now.Add(5 * time.Hour)
	wantImport(t, st, d, later, now.Add(time.Minute), false, tokens.ImportRefreshed)
	WantFound(t, st, d, now.Add(2*time.Hour), later)
	if list, err := st.List(ctx, "alice", now); err != nil || len(list) != 1 {
		t.Fatalf("List(alice) after a second import = %d sessions, %v; want 1", len(list), err)
	}
	never := s
	never.ExpiresAt = time.Time{}
	wantImport(t, st, d, never, now.Add(time.Minute), false, tokens.ImportRefreshed)
	WantFound(t, st, d, now.AddDate(10, 0, 0), never)

	deaths := []struct {
		name string
		kill func(d tokens.Digest, s tokens.Session)
	}{
		{"revoked", func(d tokens.Digest, _ tokens.Session) { st.Revoke(ctx, d) }},
		{"its user's sessions ended", func(_ tokens.Digest, s tokens.Session) { st.RevokeUser(ctx, s.Username) }},
		{"superseded", func(_ tokens.Digest, s tokens.Session) { supersede(t, st, s.Username, s.Stamp, now, time.Time{}) }},
		{"expired", func(tokens.Digest, tokens.Session) {}},
	}
	for i, death := range deaths {
		s := tokens.Session{Username: "carol" + string(rune('a'+i)), Stamp: 4, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)}
		d := RandomDigest()
		wantImport(t, st, d, s, now, false, tokens.ImportAdded)
		death.kill(d, s)
		at := now
		if death.name == "expired" {
			at = s.ExpiresAt
		}
		s.ExpiresAt = at.Add(24 * time.Hour)
		wantImport(t, st, d, s, at, true, tokens.ImportDead)
		wantImport(t, st, d, s, at, false, tokens.ImportDead)
		WantNotFound(t, st, d, at)
	}
}

// testImportLeavesIssued: a digest that stands for a session the store
// did not import is left as it is, whoever the import names.
func testImportLeavesIssued(t *testing.T, st tokens.Store) {
	now := time.Now()
	issued := tokens.Session{Username: "alice", Stamp: 1, ExpiresAt: now.Add(time.Hour)}
	d := MustIssue(t, st, issued, 0, now)
	for _, user := range []string{"alice", "mallory"} {
		s := tokens.Session{Username: user, Stamp: 1, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(48 * time.Hour)}
		wantImport(t, st, d, s, now, false, tokens.ImportDead)
		WantFound(t, st, d, now, issued)
	}
	// Nor does an imported digest change hands.
	imported := tokens.Session{Username: "bob", Stamp: 1, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)}
	d = RandomDigest()
	wantImport(t, st, d, imported, now, false, tokens.ImportAdded)
	mallory := imported
	mallory.Username = "mallory"
	wantImport(t, st, d, mallory, now, false, tokens.ImportDead)
	WantFound(t, st, d, now, imported)
}

// testImportStamp: an imported session is refused under a stamp other than
// its user's current one, as Issue refuses it.
func testImportStamp(t *testing.T, st tokens.Store) {
	now := time.Now()
	supersede(t, st, "alice", 5, now.Add(-time.Hour), time.Time{})
	s := tokens.Session{Username: "alice", Stamp: 4, IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour)}
	d := RandomDigest()
	wantImport(t, st, d, s, now, true, tokens.ImportSuperseded)
	wantImport(t, st, d, s, now, false, tokens.ImportSuperseded)
	WantNotFound(t, st, d, now)
	s.Stamp = 5
	wantImport(t, st, d, s, now, false, tokens.ImportAdded)
	WantFound(t, st, d, now, s)
}

// testImportDryRun: a dry run reports what a real import would do and
// writes nothing: no session, no refreshed expiry, no memory of a digest.
func testImportDryRun(t *testing.T, st tokens.Store) {
	now := time.Now().Truncate(time.Millisecond)
	s := tokens.Session{Username: "alice", Stamp: 1, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)}
	d := RandomDigest()
	wantImport(t, st, d, s, now, true, tokens.ImportAdded)
	WantNotFound(t, st, d, now)
	if list, err := st.List(context.Background(), "alice", now); err != nil || len(list) != 0 {
		t.Fatalf("List(alice) after a dry run = %d sessions, %v; want 0", len(list), err)
	}
	wantImport(t, st, d, s, now, false, tokens.ImportAdded) // not remembered by the dry run
	later := s
	later.ExpiresAt = now.Add(5 * time.Hour)
	wantImport(t, st, d, later, now, true, tokens.ImportRefreshed)
	WantFound(t, st, d, now, s)
	WantNotFound(t, st, d, s.ExpiresAt)
}
