package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/users"

	"github.com/jackc/pgx/v5"
)

// twoInstances returns two instances on a new database, the second
// watching with a poll an hour away: what reaches it comes by the change
// feed (NOTIFY).
func twoInstances(t testing.TB) (a, b *Directory) {
	url := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, url)
	a, b = openPG(t, db, 100), openPG(t, db, 100)
	watch(t, b, time.Hour, users.WatchHooks{})
	return a, b
}

// newPAT returns the digest of a fresh personal access token, and the
// record CreateAccessToken stores for it: live for a day.
func newPAT(name string) (tokens.Digest, users.AccessToken) {
	tok, digest := tokens.NewPAT()
	now := time.Now().UTC().Truncate(time.Second)
	return digest, users.AccessToken{ID: rand.Text(), Name: name, Digest: hex.EncodeToString(digest[:]), Prefix: tok[:tokens.PATShownPrefix],
		Scopes: []string{users.ScopeInfo}, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
}

// createPAT creates a token for username through d, as POST
// /api/auth/tokens/ does, and returns its digest and record.
func createPAT(t testing.TB, d users.Directory, username, name string) (tokens.Digest, users.AccessToken) {
	t.Helper()
	digest, rec := newPAT(name)
	if err := users.CreateAccessToken(context.Background(), d, username, rec); err != nil {
		t.Fatalf("CreateAccessToken(%s, %s) = %v", username, name, err)
	}
	return digest, rec
}

// addUser adds a user named name, with tokens, through d.
func addUser(t testing.TB, d users.Directory, name string, tokens ...users.AccessToken) users.User {
	t.Helper()
	u := users.User{Username: name, PasswordHash: passwordtest.MustHash(t, name+"-pw", passwordtest.Cost), Groups: []string{}, AccessTokens: tokens}
	if err := d.Add(context.Background(), u); err != nil {
		t.Fatalf("Add(%s) = %v", name, err)
	}
	return u
}

// holder returns the name of the user d finds holding the token of
// digest, from memory or the database (AccessToken), or why none.
func holder(d users.Directory, digest tokens.Digest) (string, error) {
	u, _, err := users.LookupAccessToken(context.Background(), d, digest)
	if err != nil {
		return "", err
	}
	return u.Username(), nil
}

// inMemory reports whether d answers the token of digest from memory:
// two look-ups return the same record, where each read of the database
// makes its own.
func inMemory(d *Directory, digest tokens.Digest) bool {
	ctx := context.Background()
	_, t1, err1 := users.LookupAccessToken(ctx, d, digest)
	_, t2, err2 := users.LookupAccessToken(ctx, d, digest)
	return err1 == nil && err2 == nil && t1 == t2
}

// who names u in a failure, never showing its hash: its name, or
// "none".
func who(u *users.Account) string {
	if u == nil {
		return "none"
	}
	return u.Username()
}

// sameJSON reports whether got and want encode alike: times compared as
// written, whatever their monotonic readings.
func sameJSON(got, want any) bool {
	g, err1 := json.Marshal(got)
	w, err2 := json.Marshal(want)
	return err1 == nil && err2 == nil && string(g) == string(w)
}

// TestPGAccessTokenTwoInstances: a token created on one instance is found
// on another at once (RecheckAccessToken, AccessTokenUser), then from its
// memory; revoked, it is refused at once where it was revoked, and within
// 5 s on the other, whose memory held it.
func TestPGAccessTokenTwoInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	addUser(t, a, "alice")
	if _, err := b.Lookup(ctx, "alice"); err != nil { // cached before the token
		t.Fatal(err)
	}
	digest, rec := newPAT("ci")
	if u, _, err := users.LookupAccessToken(ctx, b, digest); !errors.Is(err, users.ErrNotFound) {
		t.Fatalf("b.AccessToken before the token = %v, %v; want users.ErrNotFound", who(u), err)
	}
	if err := users.CreateAccessToken(ctx, a, "alice", rec); err != nil {
		t.Fatal(err)
	}
	if u, tok, err := users.RecheckAccessToken(ctx, b, digest); err != nil || u.Username() != "alice" || !sameJSON(tok, rec) {
		t.Fatalf("b.RecheckAccessToken just after a created it = %v, %+v, %v; want alice's token", who(u), tok, err)
	}
	if u, tok, err := users.AccessTokenUser(ctx, b, digest, time.Now()); err != nil || u == nil || tok.ID != rec.ID {
		t.Fatalf("AccessTokenUser(b) just after a created it = %v, %v, %v; want alice's token", who(u), tok, err)
	}
	if name, err := holder(a, digest); err != nil || name != "alice" {
		t.Fatalf("a.AccessToken after its own write = %q, %v; want alice", name, err)
	}
	eventually(t, 5*time.Second, "the token in b's memory", func() bool { return inMemory(b, digest) })
	start := time.Now()
	for range 1000 {
		if _, _, err := users.LookupAccessToken(ctx, b, digest); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("a token in memory: %v a look-up", time.Since(start)/1000)

	if _, err := users.RevokeAccessToken(ctx, a, "alice", rec.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Each instance looks alice up again, as a session of hers would, before
	// the token: her user read anew must not bring her revoked token back.
	if _, err := a.Lookup(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if u, tok, err := users.AccessTokenUser(ctx, a, digest, time.Now()); err != nil || u != nil {
		t.Errorf("AccessTokenUser(a) just after a revoked it = %v, %v, %v; want nil", who(u), tok, err)
	}
	if _, _, err := users.RecheckAccessToken(ctx, b, digest); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("b.RecheckAccessToken just after a revoked it = %v; want users.ErrNotFound", err)
	}
	took := eventually(t, 5*time.Second, "the revoked token gone from b", func() bool {
		if _, err := b.Lookup(ctx, "alice"); err != nil {
			return false
		}
		_, err := holder(b, digest)
		return errors.Is(err, users.ErrNotFound)
	})
	t.Logf("a revocation reached the other instance's memory in %v", took)
}

// TestPGAccessTokenEndings: what ends a user's tokens (disable, a password
// set by an operator, delete) ends them at once on the instance that
// wrote it and within 5 s on another that held them in memory; what ends
// sessions only (logout, unlock, the user's own password change) keeps them.
func TestPGAccessTokenEndings(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	newHash := passwordtest.MustHash(t, "new-pw", passwordtest.Cost)
	for _, tc := range []struct {
		name string
		op   func(d users.Directory, username string) error
		ends bool
	}{
		{"disable", func(d users.Directory, n string) error { return users.Disable(ctx, d, n) }, true},
		{"set-password", func(d users.Directory, n string) error { return users.SetPassword(ctx, d, n, newHash) }, true},
		{"delete", func(d users.Directory, n string) error { return d.Delete(ctx, n) }, true},
		{"logout", func(d users.Directory, n string) error { return users.Logout(ctx, d, n) }, false},
		{"unlock", func(d users.Directory, n string) error { return users.Unlock(ctx, d, n) }, false},
		{"own-password-change", func(d users.Directory, n string) error {
			return users.Update(ctx, d, n, func(u *users.User) error { // POST /api/auth/password/
				u.PasswordHash, u.TokensAfter = newHash, time.Now().UTC()
				u.PasswordGeneration++
				return nil
			})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "user-" + tc.name
			addUser(t, a, name)
			digest, _ := createPAT(t, a, name, "ci")
			eventually(t, 5*time.Second, "the token in b's memory", func() bool { return inMemory(b, digest) })
			if err := tc.op(a, name); err != nil {
				t.Fatal(err)
			}
			if !tc.ends {
				want, err := a.Recheck(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				eventually(t, 5*time.Second, "the change on b", func() bool {
					u, err := b.Lookup(ctx, name)
					return err == nil && u.TokensAfter().Equal(want.TokensAfter()) && u.FailuresAfter().Equal(want.FailuresAfter())
				})
				for _, d := range []*Directory{a, b} {
					if u, _, err := users.AccessTokenUser(ctx, d, digest, time.Now()); err != nil || u == nil {
						t.Errorf("AccessTokenUser after %s = %v, %v; want the token alive", tc.name, who(u), err)
					}
				}
				return
			}
			if u, _, err := users.AccessTokenUser(ctx, a, digest, time.Now()); err != nil || u != nil {
				t.Errorf("AccessTokenUser(a) just after %s = %v, %v; want nil", tc.name, who(u), err)
			}
			took := eventually(t, 5*time.Second, "the token gone from b", func() bool {
				_, err := holder(b, digest)
				return errors.Is(err, users.ErrNotFound)
			})
			t.Logf("%s reached the other instance's memory in %v", tc.name, took)
			if tc.name == "disable" { // dead stays dead
				if err := users.Enable(ctx, a, name); err != nil {
					t.Fatal(err)
				}
				if u, _, err := users.AccessTokenUser(ctx, b, digest, time.Now()); err != nil || u != nil {
					t.Errorf("AccessTokenUser(b) after enable = %v, %v; want nil", who(u), err)
				}
			}
		})
	}
}

// TestPGAccessTokenWrites: every write stores the tokens with the user and
// the index finds them by digest: Add, AddAll (the taken names left
// alone), Bootstrap, UpdateAll, a rename; List and AccessTokens return
// them as written. A digest already another user's is refused, and a
// recorded use leaves the index's rows as they were.
func TestPGAccessTokenWrites(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, url)
	ctx := context.Background()
	d := openPG(t, db, 100)
	d1, t1 := newPAT("one")
	d2, t2 := newPAT("two")
	alice := addUser(t, d, "alice", t1, t2)
	d3, t3 := newPAT("bob's")
	d4, t4 := newPAT("alice's, not added")
	bob := users.User{Username: "bob", PasswordHash: alice.PasswordHash, Groups: []string{}, AccessTokens: []users.AccessToken{t3}}
	again := alice
	again.AccessTokens = []users.AccessToken{t4}
	if existing, err := d.AddAll(ctx, []users.User{bob, again}); err != nil || len(existing) != 1 || existing[0] != "alice" {
		t.Fatalf("AddAll(bob, alice) = %v, %v; want [alice]", existing, err)
	}
	for digest, want := range map[tokens.Digest]string{d1: "alice", d2: "alice", d3: "bob"} {
		if name, err := holder(d, digest); err != nil || name != want {
			t.Errorf("AccessToken(%x…) = %q, %v; want %s", digest[:4], name, err, want)
		}
	}
	if name, err := holder(d, d4); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("AccessToken(the token of alice in AddAll, which left her alone) = %q, %v; want users.ErrNotFound", name, err)
	}
	list, err := d.List(ctx)
	if err != nil || len(list) != 2 || !sameJSON(list[0].AccessTokens, alice.AccessTokens) || !sameJSON(list[1].AccessTokens, bob.AccessTokens) {
		t.Errorf("List() = %+v, %v; want alice and bob with their tokens", list, err)
	}
	if got, err := users.AccessTokens(ctx, d, "alice"); err != nil || !sameJSON(got, alice.AccessTokens) {
		t.Errorf("AccessTokens(alice) = %+v, %v; want %+v", got, err, alice.AccessTokens)
	}
	if got, err := users.AccessTokens(ctx, d, "nobody"); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("AccessTokens(nobody) = %v, %v; want users.ErrNotFound", got, err)
	}

	// UpdateAll: alice loses one and gains one, bob loses his.
	d5, t5 := newPAT("three")
	failed, err := d.UpdateAll(ctx, map[string]func(*users.User) error{
		"alice": func(u *users.User) error { u.AccessTokens = []users.AccessToken{t2, t5}; return nil },
		"bob":   func(u *users.User) error { u.AccessTokens = nil; return nil },
	})
	if err != nil || len(failed) != 0 {
		t.Fatalf("UpdateAll = %v, %v", failed, err)
	}
	for digest, want := range map[tokens.Digest]string{d1: "", d2: "alice", d3: "", d5: "alice"} {
		if name, err := holder(d, digest); name != want || want == "" && !errors.Is(err, users.ErrNotFound) {
			t.Errorf("AccessToken(%x…) after UpdateAll = %q, %v; want %q", digest[:4], name, err, want)
		}
	}

	// A rename takes the tokens along.
	if err := d.Update(ctx, "alice", func(u *users.User) error { u.Username = "carol"; return nil }); err != nil {
		t.Fatal(err)
	}
	if name, err := holder(d, d2); err != nil || name != "carol" {
		t.Errorf("AccessToken(alice's token) after renaming her carol = %q, %v; want carol", name, err)
	}

	// One digest, two users: refused, renamed or not (not as a name taken),
	// and the holder keeps it.
	for _, rename := range []string{"bob", "dave"} {
		err = d.Update(ctx, "bob", func(u *users.User) error { u.Username, u.AccessTokens = rename, []users.AccessToken{t5}; return nil })
		if err == nil || errors.Is(err, users.ErrUnavailable) || errors.Is(err, users.ErrExists) {
			t.Errorf("Update(bob, as %s) to hold carol's token = %v; want it refused", rename, err)
		}
		if name, err := holder(d, d5); err != nil || name != "carol" {
			t.Errorf("AccessToken(carol's token) after the refused write = %q, %v; want carol", name, err)
		}
	}
	// A record that does not validate is not stored.
	_, bad := newPAT("never expires")
	bad.ExpiresAt = time.Time{}
	if err := d.Update(ctx, "bob", func(u *users.User) error { u.AccessTokens = []users.AccessToken{bad}; return nil }); err == nil {
		t.Errorf("Update(bob) with a token that never expires = nil; want it refused")
	}

	// A use moves last_used_at and rewrites none of the index's rows.
	conn := connect(t, db)
	var before, after string
	const rowVersion = `select xmin::text from authsvc_access_tokens where digest = $1`
	if err := conn.QueryRow(ctx, rowVersion, d5[:]).Scan(&before); err != nil {
		t.Fatal(err)
	}
	used := time.Now().UTC().Truncate(time.Millisecond)
	if err := users.TouchAccessTokens(ctx, d, map[string]map[string]time.Time{"carol": {t5.ID: used}}); err != nil {
		t.Fatal(err)
	}
	if _, tok, err := users.LookupAccessToken(ctx, d, d5); err != nil || !tok.LastUsedAt.Equal(used) {
		t.Errorf("AccessToken(carol's token) after its use = %+v, %v; want last_used_at %v", tok, err, used)
	}
	if err := conn.QueryRow(ctx, rowVersion, d5[:]).Scan(&after); err != nil || after != before {
		t.Errorf("the index's row of a token whose use was recorded: xmin %s → %s, %v; want it untouched", before, after, err)
	}

	if err := d.Delete(ctx, "carol"); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, conn)

	// Bootstrap, on a database of its own.
	boot := openPG(t, testservers.NewDatabase(t, url), 10)
	d6, t6 := newPAT("admin's")
	admin := users.User{Username: "admin", PasswordHash: alice.PasswordHash, Admin: true, AccessTokens: []users.AccessToken{t6}}
	if added, err := boot.Bootstrap(ctx, admin); err != nil || !added {
		t.Fatalf("Bootstrap = %v, %v", added, err)
	}
	if name, err := holder(boot, d6); err != nil || name != "admin" {
		t.Errorf("AccessToken(the bootstrapped admin's token) = %q, %v; want admin", name, err)
	}
}

// TestPGAccessTokenHandEdit: a token removed by hand in the database,
// around the change log, is gone at the next SIGHUP, even after its user
// is read again from the row, whose version a hand edit does not move.
func TestPGAccessTokenHandEdit(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, url)
	ctx := context.Background()
	d := openPG(t, db, 100)
	hup, _ := watchHUP(t, d, nil)
	addUser(t, d, "alice")
	digest, _ := createPAT(t, d, "alice", "ci")
	caughtUp(t, d)
	if !inMemory(d, digest) {
		t.Fatalf("the token is not in memory")
	}
	conn := connect(t, db)
	if _, err := conn.Exec(ctx, `update authsvc_users set access_tokens = null where username = 'alice'`); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, conn)
	if name, err := holder(d, digest); err != nil || name != "alice" {
		t.Fatalf("AccessToken before SIGHUP = %q, %v; want alice's, from memory (what this test is about)", name, err)
	}
	hup <- syscall.SIGHUP
	eventually(t, 5*time.Second, "the token gone after SIGHUP", func() bool {
		if _, err := d.Lookup(ctx, "alice"); err != nil { // her row read again: the same version
			return false
		}
		_, err := holder(d, digest)
		return errors.Is(err, users.ErrNotFound)
	})
}

// connect returns a connection to db, around the Directory, for the rest
// of the test.
func connect(t testing.TB, db string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// caughtUp waits until d's watch has applied every write committed:
// nothing it has in memory now is dropped by one of them later.
func caughtUp(t testing.TB, d *Directory) {
	t.Helper()
	eventually(t, 5*time.Second, "the watch caught up with the writes", func() bool {
		var gen int64
		err := d.pool.QueryRow(context.Background(), `select generation from authsvc_users_state`).Scan(&gen)
		d.syncMu.Lock()
		defer d.syncMu.Unlock()
		return err == nil && d.seen == gen
	})
}

// checkIndex fails t unless authsvc_access_tokens holds exactly the
// digests of the users' access_tokens, each with its user.
func checkIndex(t testing.TB, conn *pgx.Conn) {
	t.Helper()
	var stray int
	err := conn.QueryRow(context.Background(), `select count(*) from authsvc_access_tokens a full join (
			select decode(t->>'digest', 'hex') as digest, u.username from authsvc_users u, jsonb_array_elements(u.access_tokens) t
		) c on a.digest = c.digest and a.username = c.username where a.digest is null or c.digest is null`).Scan(&stray)
	if err != nil || stray != 0 {
		t.Errorf("authsvc_access_tokens against the users' tokens: %d rows apart, %v; want none", stray, err)
	}
}

// databaseAt returns a new database at schema version, as an authsvc of
// that version left it, holding one user, alice (name "Alice", password
// "pw", nothing else), and a connection to it.
func databaseAt(t testing.TB, version int) (string, *pgx.Conn) {
	t.Helper()
	url := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, url)
	ctx := context.Background()
	conn := connect(t, db)
	if _, err := conn.Exec(ctx, `create table authsvc_schema (version integer not null); insert into authsvc_schema values (0)`); err != nil {
		t.Fatal(err)
	}
	for v, m := range pgMigrations[:version] {
		if _, err := conn.Exec(ctx, m); err != nil {
			t.Fatalf("schema version %d: %v", v+1, err)
		}
	}
	hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`update authsvc_schema set version = $1`, []any{version}},
		{`insert into authsvc_users (username, password_hash, hash_work, name, version) values ('alice', $1, 0.01, 'Alice', 1)`, []any{hash}},
		{`update authsvc_users_state set generation = 1, users = 1`, nil},
	} {
		if _, err := conn.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			t.Fatal(err)
		}
	}
	return db, conn
}

// schemaVersion returns the version authsvc_schema records.
func schemaVersion(t testing.TB, conn *pgx.Conn) int {
	t.Helper()
	var version int
	if err := conn.QueryRow(context.Background(), `select version from authsvc_schema`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	return version
}

// TestPGAccessTokenMigration: a database of schema version 6, the one
// before personal access tokens, with a user, is migrated on open: the
// user stays, and tokens can be created for them and found by digest, on
// another instance too.
func TestPGAccessTokenMigration(t *testing.T) {
	t.Parallel()
	db, conn := databaseAt(t, 6)
	ctx := context.Background()
	a, b := openPG(t, db, 10), openPG(t, db, 10)
	if v := schemaVersion(t, conn); v != len(pgMigrations) {
		t.Fatalf("schema version after Open = %d; want %d", v, len(pgMigrations))
	}
	list, err := a.List(ctx)
	if err != nil || len(list) != 1 || list[0].Username != "alice" || list[0].Name != "Alice" || list[0].AccessTokens != nil {
		t.Fatalf("List() after the migration = %+v, %v; want alice as she was, without tokens", list, err)
	}
	digest, _ := createPAT(t, a, "alice", "ci")
	if u, _, err := users.AccessTokenUser(ctx, b, digest, time.Now()); err != nil || u == nil || u.Username() != "alice" {
		t.Errorf("AccessTokenUser(b) after the migration = %v, %v; want alice", who(u), err)
	}
	checkIndex(t, conn)
}

// TestPGAccessTokenUserVerdicts: users.AccessTokenUser on this backend: a
// live token is its user's; an expired one, a disabled user's (a record
// that kept it), a made-up one and a revoked one are no one's.
func TestPGAccessTokenUserVerdicts(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	d := openPG(t, testservers.NewDatabase(t, url), 100)
	ctx := context.Background()
	live, liveRec := newPAT("live")
	expired, expiredRec := newPAT("expired")
	expiredRec.ExpiresAt = time.Now().Add(-time.Minute).UTC()
	addUser(t, d, "alice", liveRec, expiredRec)
	kept, keptRec := newPAT("kept")
	addUser(t, d, "mallory", keptRec)
	if err := d.Update(ctx, "mallory", func(u *users.User) error { u.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	revoked, revokedRec := newPAT("revoked")
	addUser(t, d, "bob", revokedRec)
	if _, err := users.RevokeAccessToken(ctx, d, "bob", revokedRec.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	madeUp, _ := newPAT("made up")
	for _, tc := range []struct {
		name   string
		digest tokens.Digest
		want   string // the user; "" for none
	}{
		{"live", live, "alice"},
		{"expired", expired, ""},
		{"disabled user", kept, ""},
		{"revoked", revoked, ""},
		{"made up", madeUp, ""},
	} {
		for range 2 { // from the database, then from memory
			u, tok, err := users.AccessTokenUser(ctx, d, tc.digest, time.Now())
			switch {
			case err != nil:
				t.Errorf("AccessTokenUser(%s) = %v", tc.name, err)
			case tc.want == "" && u != nil:
				t.Errorf("AccessTokenUser(%s) = %s, %+v; want none", tc.name, u.Username(), tok)
			case tc.want != "" && (u == nil || u.Username() != tc.want || tok.Digest != hex.EncodeToString(tc.digest[:])):
				t.Errorf("AccessTokenUser(%s) = %v, %+v; want %s's token", tc.name, who(u), tok, tc.want)
			}
		}
	}
}

// TestPGAccessTokenFailsClosed: with PostgreSQL stopped, a token in memory
// is found for at most 5 s after the last contact, as Lookup answers, and
// then, like every token not in memory at once, is ErrUnavailable (503),
// never ErrNotFound (401); back, it is found again.
func TestPGAccessTokenFailsClosed(t *testing.T) {
	t.Parallel()
	url, stop, restart := testservers.Postgres(t)
	if stop == nil {
		t.Skip("AUTHSVC_TEST_POSTGRES: not this test's server to stop")
	}
	d := openPG(t, testservers.NewDatabase(t, url), 100)
	watch(t, d, 100*time.Millisecond, users.WatchHooks{})
	ctx := context.Background()
	addUser(t, d, "alice")
	digest, _ := createPAT(t, d, "alice", "seen")
	other, _ := createPAT(t, d, "alice", "never seen")
	caughtUp(t, d)
	if !inMemory(d, digest) {
		t.Fatalf("the token is not in memory")
	}
	madeUp, _ := newPAT("made up")

	stop()
	stopped := time.Now()
	for name, f := range map[string]func() error{
		"AccessToken(a token never seen)": func() error { _, _, err := users.LookupAccessToken(ctx, d, other); return err },
		"AccessToken(a made-up token)":    func() error { _, _, err := users.LookupAccessToken(ctx, d, madeUp); return err },
		"RecheckAccessToken(a token seen)": func() error {
			_, _, err := users.RecheckAccessToken(ctx, d, digest)
			return err
		},
		"AccessTokens(alice)": func() error { _, err := users.AccessTokens(ctx, d, "alice"); return err },
		"AccessTokenUser(a made-up token)": func() error {
			_, _, err := users.AccessTokenUser(ctx, d, madeUp, time.Now())
			return err
		},
	} {
		if err := f(); !errors.Is(err, users.ErrUnavailable) {
			t.Errorf("%s while stopped = %v; want users.ErrUnavailable", name, err)
		}
	}
	untilUnavailable(t, "AccessTokenUser(a token seen)", stopped, func() (bool, error) {
		u, _, err := users.AccessTokenUser(ctx, d, digest, time.Now())
		return u != nil, err
	})
	if _, _, err := users.LookupAccessToken(ctx, d, madeUp); !errors.Is(err, users.ErrUnavailable) {
		t.Errorf("AccessToken(a made-up token) after the grace = %v; want users.ErrUnavailable", err)
	}

	restart()
	eventually(t, 5*time.Second, "the token after PostgreSQL's return", func() bool {
		u, _, err := users.AccessTokenUser(ctx, d, other, time.Now())
		return err == nil && u != nil
	})
}

// TestPGAccessTokenNotFoundCost: a digest no one holds, as a flood of
// made-up tokens with valid checksums asks for, costs one probe of the
// index whatever the number of tokens, never a scan.
func TestPGAccessTokenNotFoundCost(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, url)
	d := openPG(t, db, 100)
	ctx := context.Background()
	conn := connect(t, db)
	const n = 20_000
	start := time.Now()
	// Each user one token, with a made-up digest: the trigger indexes them.
	if _, err := conn.Exec(ctx, `insert into authsvc_users (username, password_hash, hash_work, version, access_tokens)
		select 'user' || i, $1, 0, 1, jsonb_build_array(jsonb_build_object('id', 'id' || i, 'name', 'ci', 'scopes', jsonb_build_array('info'),
			'digest', encode(sha256(i::text::bytea), 'hex'), 'expires_at', '2100-01-01T00:00:00Z'))
		from generate_series(1, $2) i`, passwordtest.MustHash(t, "pw", passwordtest.Cost), n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `update authsvc_users_state set generation = 1, users = $1`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `analyze authsvc_users; analyze authsvc_access_tokens`); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted %d users with a token each in %v", n, time.Since(start))
	known := tokens.Digest(sha256.Sum256([]byte("42")))
	if name, err := holder(d, known); err != nil || name != "user42" {
		t.Fatalf("AccessToken(user42's digest) = %q, %v; want user42", name, err)
	}

	rows, err := conn.Query(ctx, `explain select version, `+pgUserColumns+` from authsvc_users
		where username = (select username from authsvc_access_tokens where digest = $1)`, known[:])
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(plan, "\n"); strings.Contains(text, "Seq Scan") || !strings.Contains(text, "authsvc_access_tokens_pkey") {
		t.Errorf("the plan of a look-up by digest scans, or not by the digest's key:\n%s", text)
	} else {
		t.Logf("the plan of a look-up by digest:\n%s", text)
	}
	const probes = 1000
	start = time.Now()
	for range probes {
		madeUp, _ := newPAT("made up")
		if _, _, err := users.RecheckAccessToken(ctx, d, madeUp); !errors.Is(err, users.ErrNotFound) {
			t.Fatalf("RecheckAccessToken(a made-up token) = %v; want users.ErrNotFound", err)
		}
	}
	t.Logf("a made-up token among %d: %v a recheck", n, time.Since(start)/probes)
}

// rechecks is a Directory whose RecheckKey calls are counted.
type rechecks struct {
	users.Directory
	n int
}

func (r *rechecks) RecheckKey(ctx context.Context, k users.Key) ([]users.Match, error) {
	r.n++
	return r.Directory.RecheckKey(ctx, k)
}

// TestPGMadeUpTokenOneRead: a made-up token with a valid checksum, as a
// flood of them sends, costs AccessTokenUser one read of the database:
// AccessToken, finding nothing in memory, reads the database for the
// call and says so (ErrNoAccessTokenAtSource), so no recheck follows.
// A token made on another instance a moment ago is still found
// (TestPGAccessTokenTwoInstances).
func TestPGMadeUpTokenOneRead(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, url)
	d := &rechecks{Directory: openPG(t, db, 100)}
	ctx := context.Background()
	madeUp, _ := newPAT("made up")
	if _, _, err := users.LookupAccessToken(ctx, d, madeUp); !errors.Is(err, users.ErrNoAccessTokenAtSource) || !errors.Is(err, users.ErrNotFound) {
		t.Errorf("AccessToken(a made-up token) = %v; want ErrNoAccessTokenAtSource, an ErrNotFound", err)
	}
	if u, tok, err := users.AccessTokenUser(ctx, d, madeUp, time.Now()); u != nil || tok != nil || err != nil {
		t.Errorf("AccessTokenUser(a made-up token) = %v, %v, %v; want nil, nil, nil", who(u), tok, err)
	}
	if d.n != 0 {
		t.Errorf("AccessTokenUser(a made-up token) rechecked %d times; want 0: AccessToken read the database already", d.n)
	}
}
