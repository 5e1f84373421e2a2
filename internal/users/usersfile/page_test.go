package usersfile

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"authsvc/internal/users"
)

// TestPageNeverLoaded: a directory never loaded (the CLI's New) pages
// through the file as it is, and stays unloaded: its writes do not start
// reloading the whole file.
func TestPageNeverLoaded(t *testing.T) {
	path := writeManyUsers(t, t.TempDir(), 10, nil)
	d := New(path, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	list, err := d.Page(ctx, "user0003", 3, users.Filter{})
	if err != nil {
		t.Fatalf("Page(user0003, 3, {}) = %v", err)
	}
	if got, want := pageNames(list), []string{"user0004", "user0005", "user0006"}; !slices.Equal(got, want) {
		t.Errorf("Page(user0003, 3, {}) = %q; want %q", got, want)
	}
	f := users.Filter{Groups: []string{"sales"}} // users 3 and 7
	if n, err := d.Count(ctx, f); n != 2 || err != nil {
		t.Errorf("Count(%+v) = %d, %v; want 2, nil", f, n, err)
	}
	if d.cur.Load() != nil {
		t.Errorf("after Page and Count, the directory is loaded; want it left as New made it")
	}
}

// pageNames returns the usernames of list, in its order.
func pageNames(list []users.User) []string {
	names := make([]string, len(list))
	for i := range list {
		names[i] = list[i].Username
	}
	return names
}

// openMany opens a users file of n users (writeManyUsers).
func openMany(b testing.TB, n int) *Directory {
	b.Helper()
	d, err := Open(writeManyUsers(b, b.TempDir(), n, nil), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkPage: a page of MaxPage users of 100,000 from the loaded
// index, with no filter and with one that selects a quarter of them; and
// Count with that filter.
func BenchmarkPage(b *testing.B) {
	const n = 100_000
	d := openMany(b, n)
	ctx := context.Background()
	some := users.Filter{Groups: []string{"ops"}, MFA: users.No} // every fourth user: {dev, ops}
	for _, bb := range []struct {
		name string
		f    users.Filter
	}{{"all", users.Filter{}}, {"filtered", some}} {
		b.Run(bb.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				after := fmt.Sprintf("user%04d", i*7919%n)
				i++
				if _, err := d.Page(ctx, after, users.MaxPage, bb.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("count filtered", func(b *testing.B) {
		for b.Loop() {
			if got, err := d.Count(ctx, some); got != n/4 || err != nil {
				b.Fatalf("Count(%+v) = %d, %v; want %d", some, got, err, n/4)
			}
		}
	})
	// Building the users of a page alone: what Page costs beyond it is its
	// search and its filter.
	b.Run("users alone", func(b *testing.B) {
		x := d.index()
		list := x.sorted()[:users.MaxPage]
		for b.Loop() {
			page := make([]users.User, 0, len(list))
			for _, u := range list {
				page = append(page, x.user(u))
			}
		}
	})
	// The first Page of an index sorts it: after every load.
	b.Run("sort", func(b *testing.B) {
		for b.Loop() {
			x := &userIndex{byName: d.index().byName}
			x.sorted()
		}
	})
}

// BenchmarkPageHeap reports the live heap of 100,000 users loaded, and
// what the order Page sorts adds to it.
func BenchmarkPageHeap(b *testing.B) {
	heap := func() float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	for b.Loop() {
		base := heap()
		d := openMany(b, 100_000)
		loaded := heap()
		d.index().sorted()
		sorted := heap()
		b.ReportMetric((loaded-base)/1e6, "MB-index")
		b.ReportMetric((sorted-loaded)/1e6, "MB-order")
		runtime.KeepAlive(d)
	}
}

// TestPageUnderChange: paging through 100,000 users in pages of
// MaxPage while users are added and deleted through the directory, ahead
// of the pages and behind them, gives every user that existed throughout
// exactly once, in strictly increasing order (issue 32, point 3).
func TestPageUnderChange(t *testing.T) {
	t.Parallel()
	const n, writes = 100_000, 8 // each write rewrites and reloads the file: about 0.3 s (3 s under -race)
	d := openMany(t, n)
	ctx := context.Background()
	// Write k deletes user (k*8317+500) mod n (writeManyUsers's names),
	// or adds a user just after it, by turns: all over the directory.
	deleted, added := map[string]bool{}, map[string]bool{}
	initial := func(name string) bool {
		i, err := strconv.Atoi(strings.TrimPrefix(name, "user"))
		return err == nil && i < n && fmt.Sprintf("user%04d", i) == name
	}
	target := func(k int) string { return fmt.Sprintf("user%04d", (k*8317+500)%n) }
	for k := range writes {
		if k%2 == 0 {
			deleted[target(k)] = true
		} else {
			added[target(k)+"a"] = true
		}
	}
	done := make(chan error, writes) // one value per write made
	go func() {
		for k := range writes {
			var err error
			if k%2 == 0 {
				err = d.Delete(ctx, target(k))
			} else {
				err = d.Add(ctx, users.User{Username: target(k) + "a", PasswordHash: testHash, Groups: []string{}})
			}
			done <- err
		}
	}()
	pages := n / users.MaxPage
	made := 0
	seen := make(map[string]bool, n+writes)
	after := ""
	for p := 0; ; p++ {
		// The writes spread over the walk: page p waits for the writes
		// due by then, and is read while the next one is being made.
		for ; made < writes && made < (p+1)*writes/pages; made++ {
			if err := <-done; err != nil {
				t.Fatalf("write %d = %v", made, err)
			}
		}
		list, err := d.Page(ctx, after, users.MaxPage, users.Filter{})
		if err != nil {
			t.Fatalf("Page(%q, %d, {}) = %v", after, users.MaxPage, err)
		}
		for _, u := range list {
			switch name := u.Username; {
			case name <= after:
				t.Fatalf("page %d, after %q, gave %q: not in increasing order", p, after, name)
			case seen[name]:
				t.Fatalf("page %d gave %q again", p, name)
			case !added[name] && !initial(name):
				t.Fatalf("page %d gave %q, a user never in the directory", p, name)
			default:
				seen[name], after = true, name
			}
		}
		if len(list) < users.MaxPage {
			break
		}
	}
	for ; made < writes; made++ {
		if err := <-done; err != nil {
			t.Fatalf("write %d = %v", made, err)
		}
	}
	for i := range n {
		if name := fmt.Sprintf("user%04d", i); !deleted[name] && !seen[name] {
			t.Errorf("%s, never deleted, was on no page", name)
		}
	}
}

// TestPageLimitOutOfRange: a limit outside the contract's 1 to MaxPage
// gives no users, never a panic: 0 and below, none.
func TestPageLimitOutOfRange(t *testing.T) {
	d := openMany(t, 3)
	for _, limit := range []int{0, -1} {
		if list, err := d.Page(context.Background(), "", limit, users.Filter{}); len(list) != 0 || err != nil {
			t.Errorf("Page(\"\", %d, {}) = %q, %v; want none", limit, pageNames(list), err)
		}
	}
}
