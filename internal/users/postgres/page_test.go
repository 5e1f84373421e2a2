package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/password/passwordtest"
	"authsvc/internal/testservers"
	"authsvc/internal/users"

	"github.com/jackc/pgx/v5"
)

// TestPageAfterBound: for a valid username u and any after, u sorts after
// after in byte order exactly when it passes afterBound's bound; and u
// starts with a valid prefix p exactly when it sorts from p to
// prefixEnd(p).
func TestPageAfterBound(t *testing.T) {
	t.Parallel()
	alphabet := []string{"a", "A", "_", "é", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\uffff", "\U00010000", "\U0010ffff"}
	bytes := []byte{0x00, 0x01, 'a', 0x7f, 0x80, 0xbf, 0xc0, 0xc2, 0xdf, 0xe2, 0xed, 0xee, 0xef, 0xf0, 0xf4, 0x8f, 0x90, 0xf5, 0xff}
	rng := rand.New(rand.NewPCG(1, 2))
	valid := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	raw := func() string {
		b := []byte(valid())
		for range rng.IntN(3) {
			b = append(b, bytes[rng.IntN(len(bytes))])
		}
		return string(b) + valid()
	}
	for range 200_000 {
		u, after, p := valid(), raw(), valid()
		bound, inclusive, ok := afterBound(after)
		got := ok && (u > bound || inclusive && u == bound)
		if want := u > after; got != want {
			t.Fatalf("afterBound(%q) = %q, %v, %v: %q passes = %v; want %v", after, bound, inclusive, ok, u, got, want)
		}
		end, ok := prefixEnd(p)
		if got, want := u >= p && (!ok || u < end), strings.HasPrefix(u, p); got != want {
			t.Fatalf("prefixEnd(%q) = %q, %v: %q in range = %v; want %v", p, end, ok, u, got, want)
		}
	}
}

// pageDatabase returns a new database for Page's tests: the server's
// default (locale C, byte order) or, with icu, one whose default collation
// is ICU's root, which sorts "a" before "B" and "_" before letters.
func pageDatabase(t testing.TB, icu bool) string {
	t.Helper()
	url := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, url)
	if !icu {
		return db
	}
	conn := connect(t, db)
	ctx := context.Background()
	var version int
	if err := conn.QueryRow(ctx, `select current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 150000 {
		t.Skipf("PostgreSQL %d: an ICU default collation needs 15", version)
	}
	name := "authsvc_icu_" + strings.TrimPrefix(db[strings.LastIndexByte(db, '/')+1:strings.IndexByte(db, '?')], "authsvc_test_")
	if _, err := conn.Exec(ctx, `create database `+name+` template template0 encoding 'UTF8' locale 'C' locale_provider icu icu_locale 'und'`); err != nil {
		t.Fatalf("create an ICU database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err == nil {
			conn.Exec(context.Background(), `drop database if exists `+name+` with (force)`)
			conn.Close(context.Background())
		}
	})
	return strings.Replace(db, db[strings.LastIndexByte(db, '/'):strings.IndexByte(db, '?')], "/"+name, 1)
}

// forEachCollation runs f on a database of byte order and on an ICU one.
func forEachCollation(t *testing.T, f func(t *testing.T, db string)) {
	for _, icu := range []bool{false, true} {
		t.Run(map[bool]string{false: "C", true: "ICU"}[icu], func(t *testing.T) { f(t, pageDatabase(t, icu)) })
	}
}

// pageUsers are users whose names sort differently in byte order and in
// a locale's, with every kind of second factor.
func pageUsers(t testing.TB) []users.User {
	hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
	totp := &users.TOTPFactor{SealedSecret: []byte{1}, Step: 30, Digits: 6, LastT: -1}
	codes := &users.Factors{RecoveryCodes: []string{strings.Repeat("ab", 32)}, RecoveryKeyID: "0123abcd"}
	factors := []*users.Factors{nil, {}, {TOTP: totp}, {PendingTOTP: totp}, codes, {PendingTOTP: totp, RecoveryCodes: codes.RecoveryCodes, RecoveryKeyID: "0123abcd"}}
	groups := [][]string{nil, {"dev"}, {"ops"}, {"dev", "ops"}, {"qa"}}
	names := []string{"a", "A", "b", "B", "_", "_a", "a_", "a_b", "aXb", "a.b", "a-b", "a+b", "a@b", "ab", "aB", "Ab", "a1", "a10", "a9",
		"é", "e", "E", "f", "z", "Z", "zz", "Ω", "ω", "日本", "日", "本", "user1", "user10", "user2", "User3", "Ä", "ß", "ss", "0", "9", "1a"}
	var list []users.User
	for i, name := range names {
		list = append(list, users.User{Username: name, PasswordHash: hash, Name: "N " + name, Email: name + "@example.com",
			Groups: groups[i%len(groups)], Admin: i%3 == 0, Disabled: i%4 == 1, MFA: factors[i%len(factors)].Clone()})
	}
	return list
}

// TestPageMatchesReference: Page and Count agree with users.Page and
// users.Count on List's users, for every kind of filter and of after (a
// username, a string between two, not valid UTF-8), whatever the
// database's default collation; and paging through with a small limit
// returns the reference's users, whole, in byte order.
func TestPageMatchesReference(t *testing.T) {
	t.Parallel()
	forEachCollation(t, func(t *testing.T, db string) {
		d := openPG(t, db, 10)
		ctx := context.Background()
		if existing, err := d.AddAll(ctx, pageUsers(t)); err != nil || len(existing) != 0 {
			t.Fatalf("AddAll = %v, %v", existing, err)
		}
		list, err := d.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var filters []users.Filter
		for _, prefix := range []string{"", "a", "a_", "A", "_", "é", "日", "user1", "zzz", "\xff", "a\x00"} {
			filters = append(filters, users.Filter{Prefix: prefix})
		}
		for _, groups := range [][]string{{"dev"}, {"ops", "nope"}, {"nope"}, {"\xff"}, {"\xff", "qa"}} {
			filters = append(filters, users.Filter{Groups: groups})
		}
		for _, w := range []users.Want{users.Yes, users.No} {
			filters = append(filters, users.Filter{Admin: w}, users.Filter{Disabled: w}, users.Filter{MFA: w})
		}
		filters = append(filters, users.Filter{Prefix: "a", Groups: []string{"dev", "qa"}, MFA: users.No},
			users.Filter{Admin: users.Yes, Disabled: users.No, MFA: users.Yes}, users.Filter{Disabled: users.No, MFA: users.No})
		afters := []string{"", "a", "a_", "aa", "B", "_", "é", "zz", "日", "\U0010ffff", "a\xff", "\xe2\x82", "\x00", "a\x00b", "\xf5", "\xc3"}
		for _, f := range filters {
			if got, err := d.Count(ctx, f); err != nil || got != users.Count(list, f) {
				t.Errorf("Count(%+v) = %d, %v; want %d", f, got, err, users.Count(list, f))
			}
			for _, after := range afters {
				for _, limit := range []int{1, 3, users.MaxPage} {
					got, err := d.Page(ctx, after, limit, f)
					if want := users.Page(list, after, limit, f); err != nil || !sameUsers(got, want) {
						t.Errorf("Page(%q, %d, %+v) = %v, %v; want %v", after, limit, f, names(got), err, names(want))
					}
				}
			}
			var all []users.User
			for after := ""; ; {
				page, err := d.Page(ctx, after, 4, f)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, page...)
				if len(page) < 4 {
					break
				}
				after = page[len(page)-1].Username
			}
			if want := users.Page(list, "", len(list), f); !sameUsers(all, want) {
				t.Errorf("paging through %+v by 4 = %v; want %v", f, names(all), names(want))
			}
		}
	})
}

// sameUsers reports whether a and b hold the same users, whole, in the
// same order; nil and empty alike.
func sameUsers(a, b []users.User) bool {
	return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b)
}

func names(list []users.User) []string {
	out := make([]string, len(list))
	for i, u := range list {
		out[i] = u.Username
	}
	return out
}

// TestPageMigration: a database at schema version 8 migrates on open
// (to 9, and on to the latest); the index in byte order exists exactly where the usernames'
// collation is not byte order, and a page there is read from it rather
// than sorted.
func TestPageMigration(t *testing.T) {
	t.Parallel()
	db, conn := databaseAt(t, 8)
	openPG(t, db, 10)
	if v := schemaVersion(t, conn); v != len(pgMigrations) || v < 9 {
		t.Fatalf("schema version after Open = %d, pgMigrations %d; want the latest, 9 or after", v, len(pgMigrations))
	}
	forEachCollation(t, func(t *testing.T, db string) {
		d := openPG(t, db, 10)
		conn := connect(t, db)
		var index bool
		if err := conn.QueryRow(context.Background(), `select exists (select from pg_indexes where indexname = 'authsvc_users_username_c')`).Scan(&index); err != nil {
			t.Fatal(err)
		}
		icu := t.Name() == "TestPageMigration/ICU"
		if index != icu || (d.collate != "") != icu {
			t.Errorf("index in byte order: %v, Page collates %q; want the index and the collation only on ICU (%v)", index, d.collate, icu)
		}
	})
}

// insertUsers adds n users named user000001 to userN (six digits) around
// the Directory, in one statement, their password "pw", and returns a
// Directory opened on them.
func insertUsers(t testing.TB, db string, n int, hash string) *Directory {
	t.Helper()
	openPG(t, db, 10).Close() // create the tables
	parsed, err := password.ParseHash(hash)
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, db)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `insert into authsvc_users (username, password_hash, hash_work, name, email, groups, version)
		select 'user' || lpad(i::text, 6, '0'), $1, $2, 'User ' || i, 'user' || i || '@example.com', '{dev}', 1 from generate_series(1, $3) i`,
		hash, parsed.Work(), n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `update authsvc_users_state set generation = 1, users = $1`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `analyze authsvc_users`); err != nil {
		t.Fatal(err)
	}
	return openPG(t, db, 1000)
}

// TestPageUnderChange (issue 32, point 3): paging through 100,000 users
// by 500 while other goroutines add and delete users through the
// Directory returns every user that existed throughout exactly once, no
// username twice, in strictly increasing byte order; and the page's
// statement reads the index in order, without a sort.
func TestPageUnderChange(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short")
	}
	forEachCollation(t, func(t *testing.T, db string) {
		const n = 100_000
		hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
		start := time.Now()
		d := insertUsers(t, db, n, hash)
		t.Logf("%d users inserted in %v", n, time.Since(start))
		checkPlan(t, d, db)

		// Every 40th user is deleted while the pages are read; the others
		// exist throughout. Added users sort between existing ones.
		rng := rand.New(rand.NewPCG(3, 4))
		var doomed []string
		for i := 7; i <= n; i += 40 {
			doomed = append(doomed, fmt.Sprintf("user%06d", i))
		}
		rng.Shuffle(len(doomed), func(i, j int) { doomed[i], doomed[j] = doomed[j], doomed[i] })
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var deleted, added atomic.Int64
		next := atomic.Int64{}
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := int(next.Add(1)) - 1
					if i >= len(doomed) {
						return
					}
					if err := d.Delete(ctx, doomed[i]); err == nil {
						deleted.Add(1)
					} else if ctx.Err() == nil {
						t.Errorf("Delete(%s) = %v", doomed[i], err)
					}
				}
			})
		}
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("user%06d_new%d", 1+(i*7919)%n, i)
				if err := d.Add(ctx, users.User{Username: name, PasswordHash: hash}); err == nil {
					added.Add(1)
				} else if ctx.Err() == nil {
					t.Errorf("Add(%s) = %v", name, err)
				}
			}
		})

		seen := make(map[string]int, n)
		var pages int
		start = time.Now()
		for after := ""; ; pages++ {
			page, err := d.Page(context.Background(), after, users.MaxPage, users.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range page {
				if u.Username <= after {
					t.Fatalf("page after %q holds %q: not in strictly increasing byte order", after, u.Username)
				}
				after = u.Username
				seen[u.Username]++
			}
			if len(page) < users.MaxPage {
				break
			}
			// A few changes between each page and the next, however fast
			// the pages come.
			changes := deleted.Load() + added.Load()
			eventually(t, 5*time.Second, "changes between two pages", func() bool { return deleted.Load()+added.Load() >= changes+4 })
		}
		took := time.Since(start)
		stop()
		wg.Wait()
		t.Logf("%d pages of %d in %v, while %d users were deleted and %d added", pages, users.MaxPage, took, deleted.Load(), added.Load())
		if deleted.Load() == 0 || added.Load() == 0 {
			t.Errorf("%d deleted, %d added while paging; want the pages read under change", deleted.Load(), added.Load())
		}
		checkSeen(t, seen, n)
	})
}

// checkSeen fails t unless every user userN (N up to n) not doomed by
// TestPageUnderChange was seen exactly once, and no name twice.
func checkSeen(t *testing.T, seen map[string]int, n int) {
	t.Helper()
	missing := 0
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("user%06d", i)
		if seen[name] == 0 && i%40 != 7 {
			if missing++; missing <= 5 {
				t.Errorf("%s existed throughout and was not seen", name)
			}
		}
	}
	twice := slices.Sorted(func(yield func(string) bool) {
		for name, c := range seen {
			if c > 1 && !yield(name) {
				return
			}
		}
	})
	if missing > 0 || len(twice) > 0 {
		t.Errorf("%d users that existed throughout missing; %d seen twice (%.5q)", missing, len(twice), twice)
	}
}

// checkPlan fails t unless a page's statement reads an index in username
// order, with no sort, on the 100,000 users of db.
func checkPlan(t *testing.T, d *Directory, db string) {
	t.Helper()
	sql, args, _ := d.pageSQL("user050000", users.MaxPage, users.Filter{})
	var plan []string
	rows, err := connect(t, db).Query(context.Background(), "explain "+sql, args...)
	if err == nil {
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "Index Scan") || strings.Contains(text, "Sort") {
		t.Errorf("plan of a page:\n%s\nwant an index scan in order, no sort", text)
	}
}
