package postgres

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"testing"
	"time"

	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// queries returns how many round trips d has made to the database: each
// query takes a connection from the pool (the LISTEN connection, apart
// from the pool, carries no look-up).
func queries(d *Directory) int64 { return d.pool.Stat().AcquireCount() }

// lookUp asks AccessTokenUser for the token of digest on d, as /info
// does for a bearer token, and returns the user's name ("" for refused).
func lookUp(t testing.TB, d *Directory, digest tokens.Digest) string {
	t.Helper()
	u, _, err := users.AccessTokenUser(context.Background(), d, digest, time.Now())
	if err != nil {
		t.Fatalf("AccessTokenUser = %v", err)
	}
	if u == nil {
		return ""
	}
	return u.Username()
}

// TestPGMadeUpTokenQueries: a made-up token with a valid checksum, asked
// for again and again, as a flood of it asks, costs one query until its
// record expires or a change reaches the instance; another made-up token
// costs its own.
func TestPGMadeUpTokenQueries(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	const n = 50
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		// between runs between the first n look-ups and the next n.
		between     func(t *testing.T, d *Directory)
		first, next int64 // queries of each n look-ups
	}{
		{"again", time.Hour, func(*testing.T, *Directory) {}, 1, 0},
		{"after the record expires", 300 * time.Millisecond, func(*testing.T, *Directory) { time.Sleep(400 * time.Millisecond) }, 1, 1},
		{"after a write", time.Hour, func(t *testing.T, d *Directory) { addUser(t, d, "bob") }, 1, 1},
		{"after a reload", time.Hour, func(t *testing.T, d *Directory) {
			if err := d.Reload(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openPG(t, testservers.NewDatabase(t, url), 100)
			d.absent.ttl = tc.ttl
			addUser(t, d, "alice")
			madeUp, _ := newPAT("made up")
			start := queries(d)
			for range n {
				if who := lookUp(t, d, madeUp); who != "" {
					t.Fatalf("AccessTokenUser(a made-up token) = %s; want none", who)
				}
			}
			if got := queries(d) - start; got != tc.first {
				t.Errorf("%d look-ups of one made-up token: %d queries; want %d", n, got, tc.first)
			}
			tc.between(t, d)
			start = queries(d)
			for range n {
				if who := lookUp(t, d, madeUp); who != "" {
					t.Fatalf("AccessTokenUser(a made-up token) %s = %s; want none", tc.name, who)
				}
			}
			if got := queries(d) - start; got != tc.next {
				t.Errorf("%d look-ups of one made-up token %s: %d queries; want %d", n, tc.name, got, tc.next)
			}
			other, _ := newPAT("another")
			start = queries(d)
			lookUp(t, d, other)
			if got := queries(d) - start; got != 1 {
				t.Errorf("another made-up token: %d queries; want 1", got)
			}
		})
	}
}

// TestPGAbsentTokenMintedElsewhere: a digest this instance found no token
// of, and remembers so, is found as soon as the write that mints its
// token reaches the instance through the change log (NOTIFY, or the
// poll when notifications are lost), not when the record expires (an
// hour here); on the instance that minted it, at once.
func TestPGAbsentTokenMintedElsewhere(t *testing.T) {
	url := testservers.SharedPostgres(t)
	for _, tc := range []struct {
		name     string
		noListen bool
		poll     time.Duration
	}{
		{"by NOTIFY", false, time.Hour},
		{"by the poll", true, 50 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testservers.NewDatabase(t, url)
			a, b := openPG(t, db, 100), openPG(t, db, 100)
			b.noListen = tc.noListen
			watch(t, b, tc.poll, users.WatchHooks{})
			a.absent.ttl, b.absent.ttl = time.Hour, time.Hour
			addUser(t, a, "alice")
			// alice's addition voids b's records of absent digests when it
			// reaches b: let it arrive before b records one.
			caughtUp(t, b)
			digest, rec := newPAT("ci")
			for name, d := range map[string]*Directory{"a": a, "b": b} {
				lookUp(t, d, digest)
				start := queries(d)
				if who := lookUp(t, d, digest); who != "" || queries(d) != start {
					t.Fatalf("%s: AccessTokenUser(a token not yet minted), again = %q after %d queries; want none, from memory", name, who, queries(d)-start)
				}
			}
			if err := users.CreateAccessToken(context.Background(), a, "alice", rec); err != nil {
				t.Fatal(err)
			}
			if who := lookUp(t, a, digest); who != "alice" {
				t.Errorf("a: AccessTokenUser(the token a just minted) = %q; want alice", who)
			}
			// The change log's delivery is asynchronous (a NOTIFY to b's
			// LISTEN connection, or b's next poll, then b's catch-up): wait
			// for b to have applied every write committed, no more.
			caughtUp(t, b)
			if who := lookUp(t, b, digest); who != "alice" {
				t.Errorf("b: AccessTokenUser(a token minted on a), once b has the change = %q; want alice", who)
			}
		})
	}
}

// TestPGAbsentTokenEndings: only absence is remembered. A live token is
// found however often it is asked for; revoked, or its user deleted, it
// is refused at once on the instance that wrote it and, on the other, as
// soon as the change reaches it, and asked for again it costs at most a
// query.
func TestPGAbsentTokenEndings(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, d *Directory, rec users.AccessToken)
	}{
		{"revoked", func(t *testing.T, d *Directory, rec users.AccessToken) {
			if _, err := users.RevokeAccessToken(ctx, d, "alice", rec.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
		}},
		{"user deleted", func(t *testing.T, d *Directory, _ users.AccessToken) {
			if err := d.Delete(ctx, "alice"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := testservers.NewDatabase(t, url)
			a, b := openPG(t, db, 100), openPG(t, db, 100)
			watch(t, b, time.Hour, users.WatchHooks{})
			a.absent.ttl, b.absent.ttl = time.Hour, time.Hour
			addUser(t, a, "alice")
			digest, rec := createPAT(t, a, "alice", "ci")
			caughtUp(t, b)
			for name, d := range map[string]*Directory{"a": a, "b": b} {
				for i := range 20 {
					if who := lookUp(t, d, digest); who != "alice" {
						t.Fatalf("%s: AccessTokenUser(a live token), look-up %d = %q; want alice", name, i+1, who)
					}
				}
			}
			tc.end(t, a, rec)
			if who := lookUp(t, a, digest); who != "" {
				t.Errorf("a: AccessTokenUser(a token %s on a) = %q; want none", tc.name, who)
			}
			caughtUp(t, b)
			for name, d := range map[string]*Directory{"a": a, "b": b} {
				if who := lookUp(t, d, digest); who != "" {
					t.Errorf("%s: AccessTokenUser(a token %s) = %q; want none", name, tc.name, who)
				}
				start := queries(d)
				for range 20 {
					lookUp(t, d, digest)
				}
				if got := queries(d) - start; got > 1 {
					t.Errorf("%s: 20 look-ups of a token %s: %d queries; want at most 1", name, tc.name, got)
				}
			}
		})
	}
}

// TestPGAbsentTokenNotOnError: a look-up that fails records nothing, so
// the next one asks the database; and a recorded absence is not answered
// once the database has not answered for pgTrustCache (503, as every
// look-up then).
func TestPGAbsentTokenNotOnError(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	d := openPG(t, testservers.NewDatabase(t, url), 100)
	d.absent.ttl = time.Hour
	madeUp, _ := newPAT("made up")
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := users.LookupAccessToken(gone, d, madeUp); err == nil || errors.Is(err, users.ErrNotFound) {
		t.Fatalf("AccessToken(a made-up token, a context done) = %v; want an error, not ErrNotFound", err)
	}
	start := queries(d)
	if _, _, err := users.LookupAccessToken(context.Background(), d, madeUp); !errors.Is(err, users.ErrNoAccessTokenAtSource) {
		t.Errorf("AccessToken(a made-up token) after a failed look-up = %v; want ErrNoAccessTokenAtSource", err)
	}
	if got := queries(d) - start; got != 1 {
		t.Errorf("AccessToken(a made-up token) after a failed look-up: %d queries; want 1 (the failure recorded nothing)", got)
	}

	// The database last answered longer ago than the cache is trusted.
	d.lastOK.Store(time.Now().Add(-pgTrustCache - time.Second).UnixNano())
	d.lastFail.Store(time.Now().UnixNano())
	if _, _, err := users.LookupAccessToken(context.Background(), d, madeUp); !errors.Is(err, users.ErrUnavailable) {
		t.Errorf("AccessToken(a made-up token recorded absent), the database silent for %v = %v; want ErrUnavailable", pgTrustCache, err)
	}
}

// TestAbsentDigests: a record answers only at its epoch and before its
// expiry, a found token removes it, and the records never exceed
// pgAbsentMax, the oldest going first.
func TestAbsentDigests(t *testing.T) {
	t.Parallel()
	now := time.Now()
	x := sha256.Sum256([]byte("x"))
	for _, tc := range []struct {
		name  string
		epoch uint64
		at    time.Time
		found bool // a read found the token after the record
		want  bool
	}{
		{"same epoch, at once", 7, now, false, true},
		{"same epoch, just before expiry", 7, now.Add(pgAbsentTTL - time.Nanosecond), false, true},
		{"same epoch, at expiry", 7, now.Add(pgAbsentTTL), false, false},
		{"a change since", 8, now, false, false},
		{"the token found since", 7, now, true, false},
	} {
		var a absentDigests
		a.add(x, 7, now)
		if tc.found {
			a.remove(x)
		}
		if got := a.has(x, tc.epoch, tc.at); got != tc.want {
			t.Errorf("%s: has = %v; want %v", tc.name, got, tc.want)
		}
	}
	var a absentDigests
	if a.has(x, 0, now) {
		t.Errorf("has on no records = true; want false")
	}
	for i := range pgAbsentMax + 10 {
		a.add(sha256.Sum256([]byte(strconv.Itoa(i))), 1, now)
	}
	if got := a.recs.Len(); got != pgAbsentMax {
		t.Errorf("records after %d adds = %d; want %d", pgAbsentMax+10, got, pgAbsentMax)
	}
	if a.has(sha256.Sum256([]byte("0")), 1, now) || !a.has(sha256.Sum256([]byte(strconv.Itoa(pgAbsentMax+9))), 1, now) {
		t.Errorf("the first record kept or the last dropped; want the oldest out first")
	}
}
