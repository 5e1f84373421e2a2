package usersfile

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"
)

// TestPendingRecords: the pending records at the end of the cut-offs file
// (an edit's, appended before its users file) count for a load only once
// no writer holds the users file's lock: while one does, the file beside
// them may be the one from before the edit. A line after them, of any
// kind, ends them; a last line cut short is not one.
func TestPendingRecords(t *testing.T) {
	t1 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	t2, t3 := t1.Add(time.Hour), t1.Add(2*time.Hour)
	rec := func(name string, at time.Time, pending bool) string {
		p := ""
		if pending {
			p = `,"pending":true`
		}
		return `{"username":"` + name + `","tokens_after":"` + at.Format(time.RFC3339Nano) + `"` + p + "}\n"
	}
	for _, tt := range []struct {
		name    string
		file    string
		writing time.Time // alice's cut-off while a writer holds the lock
		free    time.Time // and once none does
	}{
		{"none pending", rec("alice", t1, false), t1, t1},
		{"pending at the end", rec("alice", t1, false) + rec("alice", t2, true), t1, t2},
		{"pending, the first line", rec("alice", t2, true), time.Time{}, t2},
		{"several pending", rec("alice", t1, false) + rec("alice", t2, true) + rec("bob", t3, true), t1, t2},
		{"committed", rec("alice", t2, true) + rec("alice", t2, false), t2, t2},
		{"ended by another line", rec("alice", t2, true) + rec("bob", t3, false), t2, t2},
		{"committed, then pending", rec("alice", t2, true) + rec("alice", t2, false) + rec("alice", t3, true), t2, t3},
		{"pending, then a line cut short", rec("alice", t1, false) + rec("alice", t2, true) + `{"username":"bob","tok`, t1, t2},
		{"a line cut short alone", `{"username":"bob","tok`, time.Time{}, time.Time{}},
		// Beyond the 4 KB pendingTail reads at a time.
		{"many pending", rec("alice", t1, false) + strings.Repeat(rec("bob", t3, true), 200) + rec("alice", t2, true), t1, t2},
		{"many before", strings.Repeat(rec("carol", t1, false), 200) + rec("alice", t1, false) + rec("alice", t2, true), t1, t2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "users.json")
			if err := os.WriteFile(CutoffsPath(path), []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			alice := func(when string) time.Time {
				t.Helper()
				c, err := readCutoffs(CutoffsPath(path))
				if err != nil {
					t.Fatalf("readCutoffs %s = %v", when, err)
				}
				return c["alice"].after
			}
			if got := alice("with the lock free"); !got.Equal(tt.free) {
				t.Errorf("alice's cut-off with the lock free = %v; want %v", got, tt.free)
			}
			// Another process's writer: an open file description of its
			// own, which writing probes.
			lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			if got := alice("while another process writes"); !got.Equal(tt.writing) {
				t.Errorf("alice's cut-off while another process holds the lock = %v; want %v", got, tt.writing)
			}
			lock.Close()
			// This process's writer: known without a probe.
			unlock, err := lockUsersFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := alice("while this process writes"); !got.Equal(tt.writing) {
				t.Errorf("alice's cut-off while this process holds the lock = %v; want %v", got, tt.writing)
			}
			unlock()
			if got := alice("once the lock is let go"); !got.Equal(tt.free) {
				t.Errorf("alice's cut-off once the lock is let go = %v; want %v", got, tt.free)
			}
		})
	}
}

// TestPendingRecordsOfKilledWriter: a writer killed after its pending
// records (before or after its users file) leaves them to count: a load
// applies them once the lock is free, and the next edit commits them
// before its own records, in their order.
func TestPendingRecordsOfKilledWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
	if err := Write(path, []users.User{{Username: "alice", PasswordHash: hash, Groups: []string{}}, {Username: "bob", PasswordHash: hash, Groups: []string{}}}); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	// Alice disabled, her users file never written.
	killed := time.Now().UTC().Truncate(time.Millisecond)
	if err := appendPending(path, cutoffRecord{Username: "alice", TokensAfter: killed, Event: eventDisable}); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if u, err := d.Lookup(ctx, "alice"); err != nil || !u.Disabled() || !u.TokensAfter().Equal(killed) {
		t.Errorf("Lookup(alice) after a killed writer's disable = %v, %v; want her disabled, cut off at %v (fail closed)", u, err, killed)
	}
	if err := d.Update(ctx, "bob", func(u *users.User) error { u.TokensAfter = killed.Add(time.Second); return nil }); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(CutoffsPath(path))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want := []struct {
		name    string
		pending bool
	}{{"alice", true}, {"alice", false}, {"bob", true}, {"bob", false}}
	ok := len(lines) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.Contains(lines[i], `"username":"`+want[i].name+`"`) && strings.Contains(lines[i], `"pending":true`) == want[i].pending
	}
	if !ok {
		t.Errorf("cut-offs file after the next edit =\n%s\nwant alice's pending record, committed, then bob's, pending and committed", data)
	}
	if u, err := d.Lookup(ctx, "alice"); err != nil || !u.Disabled() {
		t.Errorf("Lookup(alice) after the next edit = %v, %v; want her disabled", u, err)
	}
}
