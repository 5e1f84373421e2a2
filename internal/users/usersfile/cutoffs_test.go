package usersfile

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"
)

// byCutoffAlone is a session stamp that SessionUser judges by the cut-off
// alone, not by the password generation: what these tests are about.
const byCutoffAlone = users.MaxSessionGeneration + 1

// TestCutoffsSurviveCopyBack: every change that kills tokens (delete,
// disable, a password change, logout) leaves its cut-off outside the users
// file, so that an older copy of the file put back does not undo it, and a
// user added again under a deleted name keeps the deleted one's cut-off
// (issue 19, point 7). A deleted user does not come back at all (issue 28).
func TestCutoffsSurviveCopyBack(t *testing.T) {
	hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
	for _, tt := range []struct {
		name   string
		change func(ctx context.Context, d *Directory) error
	}{
		{"delete", func(ctx context.Context, d *Directory) error { return d.Delete(ctx, "alice") }},
		{"disable", func(ctx context.Context, d *Directory) error {
			return d.Update(ctx, "alice", func(u *users.User) error { u.Disabled = true; return nil })
		}},
		{"password change", func(ctx context.Context, d *Directory) error {
			return d.Update(ctx, "alice", func(u *users.User) error {
				u.PasswordHash, u.TokensAfter, u.PasswordGeneration = hash, time.Now(), u.PasswordGeneration+1
				return nil
			})
		}},
		{"logout", func(ctx context.Context, d *Directory) error {
			return d.Update(ctx, "alice", func(u *users.User) error { u.TokensAfter = time.Now(); return nil })
		}},
		{"disable among others", func(ctx context.Context, d *Directory) error {
			failed, err := d.UpdateAll(ctx, map[string]func(*users.User) error{
				"alice": func(u *users.User) error { u.Disabled = true; return nil },
				"bob":   func(u *users.User) error { return nil },
			})
			if len(failed) != 1 {
				t.Errorf("UpdateAll(alice, bob) failures = %v; want bob's alone", failed)
			}
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "users.json")
			issued := time.Now().Add(-time.Minute) // a session of alice's, before the change
			if err := Write(path, []users.User{{Username: "alice", PasswordHash: hash, Groups: []string{}, TokensAfter: issued.Add(-time.Hour)}}); err != nil {
				t.Fatal(err)
			}
			older, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Open(path, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if u, _ := users.SessionUser(ctx, d, "alice", issued, byCutoffAlone); u == nil {
				t.Fatalf("SessionUser(alice) before the change = nil; want alice")
			}
			before := time.Now()
			if err := tt.change(ctx, d); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, older, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := d.Reload(ctx); err != nil {
				t.Fatal(err)
			}
			if u, _ := users.SessionUser(ctx, d, "alice", issued, byCutoffAlone); u != nil {
				t.Errorf("SessionUser(alice, a token issued before the change) after the older file is back = alice; want nil (dead stays dead)")
			}
			u, err := d.Lookup(ctx, "alice")
			if tt.name == "delete" {
				// Not back at all (TestDeletionsAndDisablesSurviveCopyBack).
				if !errors.Is(err, users.ErrNotFound) {
					t.Errorf("Lookup(alice), deleted, after the older file is back = %v, %v; want ErrNotFound", u, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Lookup(alice) after the older file is back: %v", err)
			}
			if got := u.TokensAfter(); got.Before(before) {
				t.Errorf("alice's cut-off after the older file is back = %v; want at least %v, the change's", got, before)
			}
			list, err := d.List(ctx)
			if err != nil || len(list) != 1 || list[0].TokensAfter.Before(before) {
				t.Errorf("List after the older file is back = %v, %v; want alice with her cut-off at least %v", list, err, before)
			}
		})
	}
}

// TestTombstoneKeptByAdd: a user added again under a deleted name, with an
// earlier cut-off (an import), keeps the deleted user's cut-off.
func TestTombstoneKeptByAdd(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
	alice := users.User{Username: "alice", PasswordHash: hash, Groups: []string{}}
	if err := Write(path, []users.User{alice}); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now().Add(-time.Second)
	if err := d.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddAll(ctx, []users.User{alice}); err != nil {
		t.Fatal(err)
	}
	if u, _ := users.SessionUser(ctx, d, "alice", issued, byCutoffAlone); u != nil {
		t.Errorf("SessionUser(alice, a token of the deleted alice) after alice is added again = alice; want nil")
	}
}

// TestCutoffsFile: a last record cut short (an append that never
// finished) is ignored and dropped by the next append; any other line that
// is not a record refuses the load, and the previous users stay in force.
func TestCutoffsFile(t *testing.T) {
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
	if err := d.Update(ctx, "alice", func(u *users.User) error { u.TokensAfter = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	cuts := CutoffsPath(path)
	f, err := os.OpenFile(cuts, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"username":"bob","tokens_af`)
	f.Close()
	if err := d.Reload(ctx); err != nil {
		t.Fatalf("Reload with a record cut short at the end = %v; want nil", err)
	}
	if err := d.Update(ctx, "bob", func(u *users.User) error { u.TokensAfter = time.Now(); return nil }); err != nil {
		t.Fatalf("Update(bob) after a record cut short = %v; want nil", err)
	}
	data, err := os.ReadFile(cuts)
	if err != nil {
		t.Fatal(err)
	}
	// Each edit's record, pending before its file and again once it is
	// written (commitCutoffs).
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], `"alice"`) || !strings.Contains(lines[1], `"alice"`) ||
		!strings.Contains(lines[2], `"bob"`) || !strings.Contains(lines[3], `"bob"`) ||
		strings.Count(string(data), `"pending":true`) != 2 || strings.Contains(lines[3], "pending") || strings.Contains(string(data), "tokens_af\"") {
		t.Errorf("cut-offs file after the next append = %q; want alice's and bob's records, each pending then committed, the cut-short one gone", data)
	}
	if err := os.WriteFile(cuts, []byte("not a record\n"+string(data)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(ctx); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("Reload with a line that is not a record = %v; want an error naming line 1", err)
	}
	if _, err := d.Lookup(ctx, "alice"); err != nil {
		t.Errorf("Lookup(alice) after a refused load = %v; want the previous users in force", err)
	}
}

// TestCutoffsAppliedByReferenceParser: a users file that the fast parser
// leaves whole to encoding/json (a top-level key spelled with an escape)
// has its cut-offs applied too.
func TestCutoffsAppliedByReferenceParser(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
	if err := Write(path, []users.User{{Username: "alice", PasswordHash: hash, Groups: []string{}}}); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	older := bytes.Replace(written, []byte(`"users"`), []byte(`"\u0075sers"`), 1)
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now()
	if err := d.Update(ctx, "alice", func(u *users.User) error { u.TokensAfter = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, older, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if u, _ := users.SessionUser(ctx, d, "alice", issued, byCutoffAlone); u != nil {
		t.Errorf("SessionUser(alice, a token from before logout) after an older file for the reference parser is back = alice; want nil")
	}
}

// TestUpdateAllOneWrite: UpdateAll of many users replaces the file once,
// appends the cut-offs of every user whose tokens it kills in one append,
// and leaves the entry of a change that failed byte for byte as it was.
func TestUpdateAllOneWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := writeManyUsers(t, dir, 20, nil)
	// user0003 as a hand edit left it: a layout Write would not make.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	list, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	hand := `{"username":"user0003","password_hash":"` + list[3].PasswordHash + `"}`
	start := bytes.Index(data, []byte(`{
      "username": "user0003"`))
	end := start + bytes.Index(data[start:], []byte("}")) + 1
	data = append(data[:start:start], append([]byte(hand), data[end:]...)...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	changes := map[string]func(*users.User) error{
		"user0003": func(u *users.User) error { u.Name = "never written"; return errors.New("refused") },
	}
	for _, name := range []string{"user0001", "user0005", "user0009"} {
		changes[name] = func(u *users.User) error { u.TokensAfter = now; return nil }
	}
	changes["user0007"] = func(u *users.User) error { u.Disabled = true; return nil }
	changes["user0011"] = func(u *users.User) error { u.Name = "Eleven"; return nil }
	failed, err := d.UpdateAll(ctx, changes)
	if err != nil || len(failed) != 1 || failed["user0003"] == nil {
		t.Fatalf("UpdateAll = %v, %v; want user0003's failure alone", failed, err)
	}
	if n := d.Writes(); n != 1 {
		t.Errorf("Writes() after one UpdateAll of 6 users = %d; want 1", n)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(after, []byte(hand)) {
		t.Errorf("users file after user0003's change failed lacks her entry as it was, %s", hand)
	}
	records, err := os.ReadFile(CutoffsPath(path))
	if err != nil {
		t.Fatal(err)
	}
	// One append before the file, pending, and the commit after it: the
	// last record again.
	if lines, pending := strings.Count(string(records), "\n"), strings.Count(string(records), `"pending":true`); lines != 5 || pending != 4 {
		t.Errorf("cut-offs file after UpdateAll killed the tokens of 4 users = %d lines, %d pending:\n%s\nwant 5, 4", lines, pending, records)
	}
	for _, name := range []string{"user0001", "user0005", "user0007", "user0009"} {
		if !strings.Contains(string(records), `"username":"`+name+`"`) {
			t.Errorf("cut-offs file lacks %s's record:\n%s", name, records)
		}
	}
	for _, tt := range []struct {
		name      string
		failing   bool
		wantWrite int64
	}{
		{"every change failing", true, 1},
		{"nothing to change", false, 1},
	} {
		changes := map[string]func(*users.User) error{"nobody": func(*users.User) error { return nil }}
		if tt.failing {
			changes["user0002"] = func(u *users.User) error { u.Admin = true; return errors.New("refused") }
		}
		if _, err := d.UpdateAll(ctx, changes); err != nil {
			t.Errorf("UpdateAll with %s = %v; want nil", tt.name, err)
		}
		if n := d.Writes(); n != tt.wantWrite {
			t.Errorf("Writes() after an UpdateAll with %s = %d; want %d: nothing to write", tt.name, n, tt.wantWrite)
		}
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, after) {
		t.Errorf("users file changed by UpdateAlls that changed nothing")
	}
}

// TestUpdateAllReferenceParser: UpdateAll of a file the fast parser leaves
// whole to encoding/json keeps the same rules: a failed change leaves its
// user as they were, the others are written in one write, and when every
// change fails nothing is written.
func TestUpdateAllReferenceParser(t *testing.T) {
	ctx := context.Background()
	path := writeManyUsers(t, t.TempDir(), 5, nil)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"users"`), []byte(`"\u0075sers"`), 1)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	if _, err := d.UpdateAll(ctx, map[string]func(*users.User) error{
		"user0001": func(u *users.User) error { u.Groups[0] = "changed in place"; u.Admin = true; return refused },
	}); err != nil {
		t.Fatal(err)
	}
	if d.Writes() != 0 {
		t.Errorf("Writes() after an UpdateAll whose one change failed = %d; want 0", d.Writes())
	}
	failed, err := d.UpdateAll(ctx, map[string]func(*users.User) error{
		"user0001": func(u *users.User) error { u.Groups[0] = "changed in place"; u.Admin = true; return refused },
		"user0002": func(u *users.User) error { u.Disabled = true; return nil },
	})
	if err != nil || len(failed) != 1 || !errors.Is(failed["user0001"], refused) {
		t.Fatalf("UpdateAll = %v, %v; want user0001's failure alone", failed, err)
	}
	if d.Writes() != 1 {
		t.Errorf("Writes() after one UpdateAll = %d; want 1", d.Writes())
	}
	list, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if u := list[1]; u.Admin || len(u.Groups) != 2 || u.Groups[0] != "dev" {
		t.Errorf("user0001 after her change failed = %+v; want her as she was (groups dev, ops; not admin)", u)
	}
	if !list[2].Disabled {
		t.Errorf("user0002 after UpdateAll = %+v; want disabled", list[2])
	}
}

// TestDeletionsAndDisablesSurviveCopyBack: an older users file copied
// back brings back neither a deleted user nor a disabled one's logins,
// whichever parser reads it, at a reload and at a first load alike; only
// Add and an enable do, and those survive another older file put back
// (issue 28, point 8; API.md, Tokens). Before, only the cut-off was
// applied: the deleted bob and the disabled alice logged in again.
func TestDeletionsAndDisablesSurviveCopyBack(t *testing.T) {
	for _, reference := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast parser", true: "reference parser"}[reference], func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "users.json")
			hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
			// Cut-offs an hour ago, as an add or a logout left them.
			long := time.Now().Add(-time.Hour)
			if err := Write(path, []users.User{
				{Username: "alice", PasswordHash: hash, Groups: []string{}, TokensAfter: long},
				{Username: "bob", PasswordHash: hash, Groups: []string{}, TokensAfter: long},
				{Username: "carol", PasswordHash: hash, Groups: []string{}},
			}); err != nil {
				t.Fatal(err)
			}
			older := readBytes(t, path)
			if reference { // a file the fast parser leaves whole to encoding/json
				older = bytes.Replace(older, []byte(`"users"`), []byte(`"\u0075sers"`), 1)
			}
			d, err := Open(path, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			disable := func(u *users.User) error { u.Disabled, u.TokensAfter = true, time.Now(); return nil }
			if err := d.Update(ctx, "alice", disable); err != nil {
				t.Fatal(err)
			}
			if err := d.Delete(ctx, "bob"); err != nil {
				t.Fatal(err)
			}
			putBack(t, d, path, older)
			wantState(t, d, path, "the file from before `disable alice` and `del bob`", map[string]string{"alice": "disabled", "bob": "absent", "carol": "enabled"})

			// The deleted bob is no one to change, and Add replaces him.
			if err := d.Update(ctx, "bob", func(u *users.User) error { u.Name = "Bob"; return nil }); !errors.Is(err, users.ErrNotFound) {
				t.Errorf("Update(bob), deleted, in a file put back = %v; want ErrNotFound", err)
			}
			if err := d.Delete(ctx, "bob"); !errors.Is(err, users.ErrNotFound) {
				t.Errorf("Delete(bob), deleted, in a file put back = %v; want ErrNotFound", err)
			}
			if err := d.Update(ctx, "alice", func(u *users.User) error { u.Disabled = false; return nil }); err != nil {
				t.Fatal(err)
			}
			if err := d.Add(ctx, users.User{Username: "bob", PasswordHash: hash, Name: "New Bob", Groups: []string{}, TokensAfter: long}); err != nil {
				t.Fatalf("Add(bob) over the deleted bob of a file put back = %v; want nil", err)
			}
			wantState(t, d, path, "`enable alice` and `add bob`", map[string]string{"alice": "enabled", "bob": "New Bob", "carol": "enabled"})
			if list, err := Read(path); err != nil || len(list) != 3 {
				t.Errorf("users file after Add(bob) = %v, %v; want alice, carol and the new bob alone", list, err)
			}
			newer := readBytes(t, path)

			// Another older file put back: the enable stands; the old bob
			// stays deleted. Then the file with the new bob.
			if err := d.Update(ctx, "carol", disable); err != nil {
				t.Fatal(err)
			}
			putBack(t, d, path, older)
			wantState(t, d, path, "the first file, once more", map[string]string{"alice": "enabled", "bob": "absent", "carol": "disabled"})
			putBack(t, d, path, newer)
			wantState(t, d, path, "the file from after `add bob`", map[string]string{"alice": "enabled", "bob": "New Bob", "carol": "disabled"})
		})
	}
}

// TestEarlierRecordsLoadAsBefore: a cut-offs file written before
// deletions and disables were kept (records without "event") applies its
// cut-offs alone: the file's users load as they are.
func TestEarlierRecordsLoadAsBefore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
	if err := Write(path, []users.User{{Username: "alice", PasswordHash: hash, Groups: []string{}}, {Username: "bob", PasswordHash: hash, Groups: []string{}}}); err != nil {
		t.Fatal(err)
	}
	cut := time.Now().UTC()
	records := `{"username":"alice","tokens_after":"` + cut.Format(time.RFC3339Nano) + `"}` + "\n" +
		`{"username":"bob","tokens_after":"` + cut.Format(time.RFC3339Nano) + `","deleted":true}` + "\n"
	if err := os.WriteFile(CutoffsPath(path), []byte(records), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"alice", "bob"} {
		u, err := d.Lookup(ctx, name)
		if err != nil || u.Disabled() || !u.TokensAfter().Equal(cut) {
			t.Errorf("Lookup(%s) under an earlier version's record = %v, %v; want her enabled, cut off at %v", name, u, err, cut)
		}
	}
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// putBack copies data over the users file at path and reloads d.
func putBack(t *testing.T, d *Directory, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(context.Background()); err != nil {
		t.Fatalf("Reload of a file put back = %v; want it loaded", err)
	}
}

// wantState checks each user as d has them, as a first load of path has
// them, and as List has them: "absent", "disabled", "enabled", or the
// name of an enabled user.
func wantState(t *testing.T, d *Directory, path, when string, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	fresh, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("after %s: Open = %v; want it loaded", when, err)
	}
	list, err := d.List(ctx)
	if err != nil {
		t.Fatalf("after %s: List = %v", when, err)
	}
	if err := users.Validate(list); err != nil {
		t.Errorf("after %s: Validate(List()) = %v", when, err)
	}
	listed := map[string]string{}
	for _, u := range list {
		listed[u.Username] = state(&u)
	}
	for name, w := range want {
		for _, dir := range []struct {
			how string
			d   *Directory
		}{{"reload", d}, {"first load", fresh}} {
			got := "absent"
			if u, err := dir.d.Lookup(ctx, name); err == nil {
				info := u.Info()
				got = state(&users.User{Name: info.Name, Disabled: u.Disabled()})
			} else if !errors.Is(err, users.ErrNotFound) {
				t.Fatal(err)
			}
			if got != w {
				t.Errorf("after %s, %s: %s is %s; want %s", when, dir.how, name, got, w)
			}
			if _, ok, _ := users.Authenticate(ctx, dir.d, name, "pw", passwordtest.Verify, nil); ok != (w != "absent" && w != "disabled") {
				t.Errorf("after %s, %s: Authenticate(%s) = %v; want %v", when, dir.how, name, ok, !ok)
			}
		}
		got, ok := listed[name]
		if !ok {
			got = "absent"
		}
		if got != w {
			t.Errorf("after %s: List has %s %s; want %s", when, name, got, w)
		}
	}
}

// state is wantState's word for u.
func state(u *users.User) string {
	switch {
	case u.Disabled:
		return "disabled"
	case u.Name != "":
		return u.Name
	}
	return "enabled"
}

// TestRecheckSeesEnableRecord: an enable writes the users file, then
// appends its record to the cut-offs file. A server that loaded between
// the two keeps the user disabled (the disable's record says so), and the
// append alone, which leaves the users file as it is, must still reach
// it: a token another instance issued after the enable lives there too
// (the model-based fleet test's walk, seed 1, under CI's load).
func TestRecheckSeesEnableRecord(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
	bob := users.User{Username: "bob", PasswordHash: hash, Groups: []string{}}
	if err := Write(path, []users.User{bob}); err != nil {
		t.Fatal(err)
	}
	server, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	cli := New(path, slog.New(slog.DiscardHandler))
	if err := users.Disable(ctx, cli, "bob"); err != nil {
		t.Fatal(err)
	}
	// The enable's first half: the users file says enabled.
	enabledAt := time.Now().UTC()
	bob.TokensAfter = enabledAt
	if err := Write(path, []users.User{bob}); err != nil {
		t.Fatal(err)
	}
	if u, err := server.Recheck(ctx, "bob"); err != nil || !u.Disabled() {
		t.Fatalf("Recheck(bob) before the enable's record = %v, %v; want disabled (the disable's record holds)", u, err)
	}
	// Its second half: the record, appended; the users file is unchanged.
	if err := appendCutoffs(path, cutoffRecord{Username: "bob", TokensAfter: enabledAt, Event: eventEnable}); err != nil {
		t.Fatal(err)
	}
	if u, err := server.Recheck(ctx, "bob"); err != nil || u.Disabled() {
		t.Errorf("Recheck(bob) after the enable's record = disabled %v, %v; want enabled", u != nil && u.Disabled(), err)
	}
}

// TestResetLinksSurviveCopyBack: a reset link that an edit spent,
// superseded or ended stays dead when an older copy of the users file,
// which still holds it, is put back; a live link of that copy still works.
func TestResetLinksSurviveCopyBack(t *testing.T) {
	hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
	newHash := passwordtest.MustHash(t, "new pw", passwordtest.Cost)
	for _, tt := range []struct {
		name string
		// end ends the link; nil leaves it live
		end func(ctx context.Context, d *Directory, uid, token string) error
	}{
		{"spent", func(ctx context.Context, d *Directory, uid, token string) error {
			return users.ConfirmReset(ctx, d, "alice", token, newHash, time.Now())
		}},
		{"superseded", func(ctx context.Context, d *Directory, uid, token string) error {
			_, _, err := users.NewResetLink(ctx, d, "alice", time.Hour, time.Now())
			return err
		}},
		{"password set", func(ctx context.Context, d *Directory, uid, token string) error {
			return users.SetPassword(ctx, d, "alice", newHash)
		}},
		{"disabled and enabled", func(ctx context.Context, d *Directory, uid, token string) error {
			if err := users.Disable(ctx, d, "alice"); err != nil {
				return err
			}
			return users.Enable(ctx, d, "alice")
		}},
		{"live", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "users.json")
			if err := Write(path, []users.User{{Username: "alice", PasswordHash: hash, Groups: []string{}}}); err != nil {
				t.Fatal(err)
			}
			d, err := Open(path, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			uid, token, err := users.NewResetLink(ctx, d, "alice", time.Hour, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			older, err := os.ReadFile(path) // holds the link
			if err != nil {
				t.Fatal(err)
			}
			if tt.end != nil {
				if err := tt.end(ctx, d, uid, token); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(path, older, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := d.Reload(ctx); err != nil {
				t.Fatal(err)
			}
			err = users.ConfirmReset(ctx, d, "alice", token, newHash, time.Now())
			switch {
			case tt.end == nil && err != nil:
				t.Errorf("ConfirmReset(the live link) after the older file is back = %v; want nil", err)
			case tt.end != nil && !errors.Is(err, users.ErrBadResetLink):
				t.Errorf("ConfirmReset(a link %s before the older file was back) = %v; want ErrBadResetLink (dead stays dead)", tt.name, err)
			}
		})
	}
}
