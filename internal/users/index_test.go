package users

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// writeManyUsers writes a users file of n users sharing testHash, in a
// handful of groups, and returns its path.
func writeManyUsers(t testing.TB, dir string, n int, change func(*User)) string {
	t.Helper()
	groups := [][]string{{"dev"}, {"dev", "ops"}, {}, {"sales"}}
	users := make([]User, n)
	for i := range users {
		users[i] = User{Username: fmt.Sprintf("user%04d", i), PasswordHash: testHash, Name: fmt.Sprintf("User %d", i),
			Email: fmt.Sprintf("user%04d@example.com", i), Groups: groups[i%len(groups)]}
		if change != nil {
			change(&users[i])
		}
	}
	path := filepath.Join(dir, "users.json")
	if err := WriteFile(path, users); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReloadKeepsUnchangedUsers: a reload keeps the Account of every entry
// that did not change, and makes a new one for every entry that did.
func TestReloadKeepsUnchangedUsers(t *testing.T) {
	dir := t.TempDir()
	path := writeManyUsers(t, dir, 100, nil)
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
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
	changes := map[string]func(*User){
		"user0001": func(u *User) { u.Name = "Renamed" },
		"user0002": func(u *User) { u.Email = "new@example.com" },
		"user0003": func(u *User) { u.Groups = []string{"dev", "qa"} },
		"user0004": func(u *User) { u.Admin = true },
		"user0005": func(u *User) { u.Disabled = true },
		"user0006": func(u *User) { u.TokensAfter = later },
		"user0007": func(u *User) { u.PasswordHash = "$2b$" + testHash[4:] },
		"user0008": func(u *User) { u.Groups = []string{"ops", "dev"} },
	}
	writeManyUsers(t, dir, 100, func(u *User) {
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
		if got := string(reloaded.byName[name].appendInfoJSON(nil)); got != info {
			t.Errorf("info of %s after the reload = %q; want %q", name, got, info)
		}
	}
	if u := reloaded.byName["user0006"]; !u.TokensAfter().Equal(later) {
		t.Errorf("user0006.tokensAfter after the reload = %v; want %v", u.TokensAfter(), later)
	}
	if u := reloaded.byName["user0007"]; u.storedHash != "$2b$"+testHash[4:] || u.storedHash == after.byName["user0007"].storedHash {
		t.Errorf("user0007 after a new hash: hash %q; want the new hash", u.storedHash)
	}
	if u := reloaded.byName["user0005"]; !u.isDisabled() || !reloaded.byName["user0004"].isAdmin() {
		t.Errorf("user0005.disabled %v, user0004.admin %v; want both set", u.isDisabled(), reloaded.byName["user0004"].isAdmin())
	}
}

// TestIndexInternsGroups: users with the same groups share one slice, and
// the map's key is the user's own name.
func TestIndexInternsGroups(t *testing.T) {
	path := writeManyUsers(t, t.TempDir(), 20, nil)
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	x := d.index()
	a, b := x.byName["user0001"], x.byName["user0005"] // both dev, ops
	if len(a.groups) != 2 || &a.groups[0] != &b.groups[0] {
		t.Errorf("groups of user0001 and user0005 = %q, %q in two slices; want one", a.groups, b.groups)
	}
	if g := x.byName["user0002"].groups; g == nil || len(g) != 0 {
		t.Errorf("groups of user0002 = %#v; want []string{}", g)
	}
	if len(x.groups) != 4 {
		t.Errorf("interned group lists = %d; want 4", len(x.groups))
	}
	for name, u := range x.byName {
		if u.username != name {
			t.Errorf("byName[%q].info.Username = %q", name, u.username)
		}
	}
}

// TestReloadAllocations: a reload of an unchanged file allocates no more
// for a thousand users than for ten: the map and the scanner's buffers, no
// user.
func TestReloadAllocations(t *testing.T) {
	allocs := func(n int) float64 {
		path := writeManyUsers(t, t.TempDir(), n, nil)
		d, err := OpenFile(path, slog.New(slog.DiscardHandler))
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
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	before := d.index()
	writeManyUsers(t, dir, 50, func(u *User) {
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
	if d.index() != before || before.byName["user0010"].name != "User 10" {
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

// TestDirUserSize: a server holds a Account per user; 112 bytes is the
// allocation size class it fits (the next is 128).
func TestDirUserSize(t *testing.T) {
	if got := unsafe.Sizeof(Account{}); got > 112 {
		t.Errorf("unsafe.Sizeof(Account{}) = %d; want at most 112", got)
	}
}

func TestPackCutoff(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 35, 43, 123456789, time.UTC)
	for _, tt := range []struct{ in, want time.Time }{
		{time.Time{}, time.Time{}},
		{now, now},
		{now.In(time.FixedZone("x", 7200)), now},
		{time.Unix(0, 0), time.Unix(0, 0).UTC()},
		{time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, math.MinInt64+1).UTC()},
		{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, math.MaxInt64).UTC()},
	} {
		if got := unpackCutoff(packCutoff(tt.in)); !got.Equal(tt.want) || got.IsZero() != tt.want.IsZero() {
			t.Errorf("unpackCutoff(packCutoff(%v)) = %v; want %v", tt.in, got, tt.want)
		}
	}
	// Order is kept: a later cut-off packs greater, and none is less than no cut-off.
	ts := []time.Time{{}, time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), time.Unix(0, 0), now, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
	for i := 1; i < len(ts); i++ {
		if packCutoff(ts[i-1]) >= packCutoff(ts[i]) {
			t.Errorf("packCutoff(%v) >= packCutoff(%v); want less", ts[i-1], ts[i])
		}
	}
}
