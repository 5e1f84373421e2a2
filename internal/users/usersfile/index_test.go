package usersfile

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"
)

// writeManyUsers writes a users file of n users sharing testHash, in a
// handful of groups, and returns its path.
func writeManyUsers(t testing.TB, dir string, n int, change func(*users.User)) string {
	t.Helper()
	groups := [][]string{{"dev"}, {"dev", "ops"}, {}, {"sales"}}
	list := make([]users.User, n)
	for i := range list {
		list[i] = users.User{Username: fmt.Sprintf("user%04d", i), PasswordHash: testHash, Name: fmt.Sprintf("User %d", i),
			Email: fmt.Sprintf("user%04d@example.com", i), Groups: groups[i%len(groups)]}
		if change != nil {
			change(&list[i])
		}
	}
	path := filepath.Join(dir, "users.json")
	if err := Write(path, list); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReloadKeepsUnchangedUsers: a reload keeps the Account of every entry
// that did not change, and makes a new one for every entry that did.
func TestReloadKeepsUnchangedUsers(t *testing.T) {
	dir := t.TempDir()
	path := writeManyUsers(t, dir, 100, nil)
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	before := d.index()
	if err := d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := d.index()
	if after == before {
		t.Fatalf("Reload kept the index itself; want a new one")
	}
	for name, u := range before.byName {
		if after.byName[name] != u {
			t.Errorf("after reloading an unchanged file, byName[%q] is a new Account; want the old one", name)
		}
	}

	later := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	changes := map[string]func(*users.User){
		"user0001": func(u *users.User) { u.Name = "Renamed" },
		"user0002": func(u *users.User) { u.Email = "new@example.com" },
		"user0003": func(u *users.User) { u.Groups = []string{"dev", "qa"} },
		"user0004": func(u *users.User) { u.Admin = true },
		"user0005": func(u *users.User) { u.Disabled = true },
		"user0006": func(u *users.User) { u.TokensAfter = later },
		"user0007": func(u *users.User) { u.PasswordHash = "$2b$" + testHash[4:] },
		"user0008": func(u *users.User) { u.Groups = []string{"ops", "dev"} },
	}
	writeManyUsers(t, dir, 100, func(u *users.User) {
		if f := changes[u.Username]; f != nil {
			f(u)
		}
	})
	if err := d.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	reloaded := d.index()
	for name, u := range after.byName {
		_, changed := changes[name]
		if kept := reloaded.byName[name] == u; kept == changed {
			t.Errorf("after changing %d users, byName[%q] kept = %v; want %v", len(changes), name, kept, !changed)
		}
	}
	want := map[string]string{
		"user0001": `{"username":"user0001","name":"Renamed","email":"user0001@example.com","groups":["dev","ops"],"admin":false}` + "\n",
		"user0003": `{"username":"user0003","name":"User 3","email":"user0003@example.com","groups":["dev","qa"],"admin":false}` + "\n",
		"user0008": `{"username":"user0008","name":"User 8","email":"user0008@example.com","groups":["ops","dev"],"admin":false}` + "\n",
	}
	for name, info := range want {
		if got := infoJSON(reloaded.byName[name]); got != info {
			t.Errorf("info of %s after the reload = %q; want %q", name, got, info)
		}
	}
	if u := reloaded.byName["user0006"]; !u.TokensAfter().Equal(later) {
		t.Errorf("user0006.tokensAfter after the reload = %v; want %v", u.TokensAfter(), later)
	}
	if u := reloaded.byName["user0007"]; u.StoredHash() != "$2b$"+testHash[4:] || u.StoredHash() == after.byName["user0007"].StoredHash() {
		t.Errorf("user0007 after a new hash: hash %q; want the new hash", u.StoredHash())
	}
	if u := reloaded.byName["user0005"]; !u.Disabled() || !reloaded.byName["user0004"].Admin() {
		t.Errorf("user0005.disabled %v, user0004.admin %v; want both set", u.Disabled(), reloaded.byName["user0004"].Admin())
	}
}

// infoJSON returns u's info reply.
func infoJSON(u *users.Account) string {
	body, _ := u.InfoReply(nil)
	return string(body)
}

// TestIndexInternsGroups: users with the same groups share one slice, and
// the map's key is the user's own name.
func TestIndexInternsGroups(t *testing.T) {
	path := writeManyUsers(t, t.TempDir(), 20, nil)
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	x := d.index()
	a, b := x.byName["user0001"], x.byName["user0005"] // both dev, ops
	if len(a.Info().Groups) != 2 || &a.Info().Groups[0] != &b.Info().Groups[0] {
		t.Errorf("groups of user0001 and user0005 = %q, %q in two slices; want one", a.Info().Groups, b.Info().Groups)
	}
	if g := x.byName["user0002"].Info().Groups; g == nil || len(g) != 0 {
		t.Errorf("groups of user0002 = %#v; want []string{}", g)
	}
	if len(x.groups) != 4 {
		t.Errorf("interned group lists = %d; want 4", len(x.groups))
	}
	for name, u := range x.byName {
		if u.Username() != name {
			t.Errorf("byName[%q].info.Username = %q", name, u.Username())
		}
	}
}

// TestReloadAllocations: a reload of an unchanged file allocates no more
// for a thousand users than for ten: the map and the scanner's buffers, no
// user.
func TestReloadAllocations(t *testing.T) {
	allocs := func(n int) float64 {
		path := writeManyUsers(t, t.TempDir(), n, nil)
		d, err := Open(path, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(5, func() {
			if err := d.Reload(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(10), allocs(1000)
	if large > small+100 {
		t.Errorf("allocations of a reload: %v for 10 users, %v for 1000; want no more than 100 apart", small, large)
	}
}

// TestReloadRefusedKeepsIndex: a file that stops validating halfway keeps
// the previous index whole, its users as they were.
func TestReloadRefusedKeepsIndex(t *testing.T) {
	dir := t.TempDir()
	path := writeManyUsers(t, dir, 50, nil)
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	before := d.index()
	writeManyUsers(t, dir, 50, func(u *users.User) {
		switch u.Username {
		case "user0010":
			u.Name = "Changed"
		case "user0040":
			u.PasswordHash = "hunter2"
		}
	})
	want := path + `: users[40] ("user0040"): password_hash: not a supported password hash`
	if err := d.Reload(context.Background()); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Reload(file with a plain password) = %v; want %q…", err, want)
	}
	if d.index() != before || before.byName["user0010"].Info().Name != "User 10" {
		t.Errorf("after a refused reload the index changed; want the previous one")
	}
	if err := os.WriteFile(path, []byte(usersJSON(okAlice, okAlice)), 0o600); err != nil {
		t.Fatal(err)
	}
	want = path + `: users[1] ("alice"): username: duplicate of users[0]`
	if err := d.Reload(context.Background()); err == nil || err.Error() != want {
		t.Errorf("Reload(file with alice twice) = %v; want %q", err, want)
	}
}

// TestSlowestCheckEmpty: a directory with no usable hash still costs a
// failed login a check: against the default hash policy's.
func TestSlowestCheckEmpty(t *testing.T) {
	x, err := newUserIndex([]users.User{{Username: "a", PasswordHash: "!unusable"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := password.DefaultHashPolicy()
	if h := x.slowest.Hash; h.Scheme() != password.SchemeArgon2id || h.MemoryKiB != p.ArgonMemoryKiB || h.Time != p.ArgonTime {
		t.Errorf("slowest check of a directory without a usable hash = %s; want the default policy's argon2id", x.slowest.Shape)
	}
}

// TestSlowestCheckCost: the check failed logins cost is at the slowest
// cost in the directory, not the most common one: an admin at cost 6 among
// users at cost 4 must not be told apart by a wrong password's time.
func TestSlowestCheckCost(t *testing.T) {
	for _, tt := range []struct {
		costs []int
		want  int
	}{
		{[]int{4}, 4},
		{[]int{4, 5, 5}, 5},
		{[]int{6, 4, 4, 4}, 6},
	} {
		var list []users.User
		for i, c := range tt.costs {
			list = append(list, users.User{Username: fmt.Sprint("u", i), PasswordHash: passwordtest.MustHash(t, "pw", c)})
		}
		x, err := newUserIndex(list, nil)
		if err != nil {
			t.Fatal(err)
		}
		if x.slowest.Hash.Scheme() != password.SchemeBcrypt || x.slowest.Hash.Cost != tt.want {
			t.Errorf("newUserIndex(costs %v).slowest = %s; want bcrypt at cost %d", tt.costs, x.slowest.Shape, tt.want)
		}
	}
}

func TestNewDirectoryDummyCost(t *testing.T) {
	list := []users.User{
		{Username: "a", PasswordHash: passwordtest.MustHash(t, "a", 5)},
		{Username: "b", PasswordHash: passwordtest.MustHash(t, "b", 4)},
		{Username: "c", PasswordHash: passwordtest.MustHash(t, "c", 5)},
	}
	d1, err := newUserIndex(list, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d1.slowest.Hash.Cost != 5 {
		t.Errorf("newUserIndex(costs 5, 4, 5).slowest = %s; want cost 5", d1.slowest.Shape)
	}

	// Same cost: the previous dummy hash is reused, not recomputed.
	d2, err := newUserIndex(list[:1], d1)
	if err != nil {
		t.Fatal(err)
	}
	if d2.slowest.Hash.Cost != 5 || d2.slowest != d1.slowest {
		t.Errorf("newUserIndex(cost 5, prev at 5): %s, slowest check reused %v; want cost 5, true", d2.slowest.Shape, d2.slowest == d1.slowest)
	}

	// A new cost: a new dummy hash at that cost.
	d3, err := newUserIndex(list[1:2], d2)
	if err != nil {
		t.Fatal(err)
	}
	if cost := d3.slowest.Hash.Cost; cost != 4 {
		t.Errorf("newUserIndex(cost 4, prev at 5): slowest at cost %d; want 4", cost)
	}

	if _, err := newUserIndex([]users.User{{Username: "x", PasswordHash: "nope"}}, nil); err == nil {
		t.Errorf("newUserIndex(bad hash) = nil error; want an error")
	}
}

// TestCutsBetween: a reload reports to the cut hook every user whose tokens
// died in it, with the time before which they died and the stamp of the
// user's password now, and no one else.
func TestCutsBetween(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0.Add(24 * time.Hour)
	rehashed := passwordtest.MustHash(t, "pw", 5)
	for _, tt := range []struct {
		name     string
		old, new users.User // new.Username "" for a deleted user
		want     time.Time
	}{
		{"unchanged", users.User{Username: "u", PasswordHash: testHash}, users.User{Username: "u", PasswordHash: testHash}, time.Time{}},
		{"deleted", users.User{Username: "u", PasswordHash: testHash}, users.User{}, now},
		{"newly disabled", users.User{Username: "u", PasswordHash: testHash}, users.User{Username: "u", PasswordHash: testHash, Disabled: true}, now},
		{"still disabled", users.User{Username: "u", PasswordHash: testHash, Disabled: true}, users.User{Username: "u", PasswordHash: testHash, Disabled: true}, time.Time{}},
		{"enabled again", users.User{Username: "u", PasswordHash: testHash, Disabled: true}, users.User{Username: "u", PasswordHash: testHash}, time.Time{}},
		{"disabled with a new cut-off", users.User{Username: "u", PasswordHash: testHash}, users.User{Username: "u", PasswordHash: testHash, Disabled: true, TokensAfter: t0}, now},
		{"first cut-off", users.User{Username: "u", PasswordHash: testHash}, users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, t0},
		{"later cut-off", users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0.Add(time.Hour)}, t0.Add(time.Hour)},
		{"same cut-off", users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, time.Time{}},
		{"earlier cut-off (an older file put back)", users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0.Add(-time.Hour)}, time.Time{}},
		{"rehashed, no new cut-off", users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, users.User{Username: "u", PasswordHash: rehashed, TokensAfter: t0}, time.Time{}},
		{"profile edited", users.User{Username: "u", PasswordHash: testHash}, users.User{Username: "u", PasswordHash: testHash, Name: "U", Admin: true}, time.Time{}},
		{"password changed", users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, users.User{Username: "u", PasswordHash: rehashed, TokensAfter: t0.Add(time.Hour), PasswordGeneration: 1}, t0.Add(time.Hour)},
		{"password generation moved back (an older file put back)", users.User{Username: "u", PasswordHash: rehashed, TokensAfter: t0, PasswordGeneration: 3}, users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0, PasswordGeneration: 2}, t0},
		{"password generation moved, same cut-off", users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, users.User{Username: "u", PasswordHash: testHash, TokensAfter: t0, PasswordGeneration: 1}, t0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			other := users.User{Username: "other", PasswordHash: testHash} // in both, unchanged
			old, err := newUserIndex([]users.User{tt.old, other}, nil)
			if err != nil {
				t.Fatal(err)
			}
			next := []users.User{other}
			if tt.new.Username != "" {
				next = append(next, tt.new)
			}
			next = append(next, users.User{Username: "added", PasswordHash: testHash, Disabled: true, TokensAfter: t0})
			cur, err := newUserIndex(next, old)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]users.Cut{}
			cutsBetween(old, cur, now, func(c users.Cut) {
				if _, dup := got[c.Username]; dup {
					t.Errorf("cutsBetween reported %s twice", c.Username)
				}
				got[c.Username] = c
			})
			want := map[string]users.Cut{}
			if !tt.want.IsZero() {
				want["u"] = users.Cut{Username: "u", Before: tt.want, Stamp: users.SessionGeneration(tt.new.PasswordGeneration)}
				if tt.new.Username == "" {
					want["u"] = users.Cut{Username: "u", Before: tt.want} // deleted: no stamp
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cutsBetween(old, new) with u %s = %v; want %v", tt.name, got, want)
			}
		})
	}
	// The first load has nothing to compare with: it cuts nothing.
	first, err := newUserIndex([]users.User{{Username: "u", PasswordHash: testHash, Disabled: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cutsBetween(nil, first, now, func(c users.Cut) {
		t.Errorf("cutsBetween(nil, first load) reported %s; want no one", c.Username)
	})
}
