package users

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
)

// byCutoffAlone is a session stamp that SessionUser judges by the cut-off
// alone, not by the password generation: what these tests are about.
const byCutoffAlone = MaxSessionGeneration + 1

// TestCutoffsSurviveCopyBack: every change that kills tokens (delete,
// disable, a password change, logout) leaves its cut-off outside the users
// file, so that an older copy of the file put back does not undo it, and a
// user added again under a deleted name keeps the deleted one's cut-off
// (issue 19, point 7).
func TestCutoffsSurviveCopyBack(t *testing.T) {
	hash := mustHash(t, "pw", passwordtest.Cost)
	for _, tt := range []struct {
		name   string
		change func(ctx context.Context, d *FileDirectory) error
	}{
		{"delete", func(ctx context.Context, d *FileDirectory) error { return d.Delete(ctx, "alice") }},
		{"disable", func(ctx context.Context, d *FileDirectory) error {
			return d.Update(ctx, "alice", func(u *User) error { u.Disabled = true; return nil })
		}},
		{"password change", func(ctx context.Context, d *FileDirectory) error {
			return d.Update(ctx, "alice", func(u *User) error {
				u.PasswordHash, u.TokensAfter, u.PasswordGeneration = hash, time.Now(), u.PasswordGeneration+1
				return nil
			})
		}},
		{"logout", func(ctx context.Context, d *FileDirectory) error {
			return d.Update(ctx, "alice", func(u *User) error { u.TokensAfter = time.Now(); return nil })
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "users.json")
			issued := time.Now().Add(-time.Minute) // a session of alice's, before the change
			if err := WriteFile(path, []User{{Username: "alice", PasswordHash: hash, Groups: []string{}, TokensAfter: issued.Add(-time.Hour)}}); err != nil {
				t.Fatal(err)
			}
			older, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			d, err := OpenFile(path, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if u, _ := SessionUser(ctx, d, "alice", issued, byCutoffAlone); u == nil {
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
			u, err := d.Lookup(ctx, "alice")
			if err != nil {
				t.Fatalf("Lookup(alice) after the older file is back: %v", err)
			}
			if got := u.TokensAfter(); got.Before(before) {
				t.Errorf("alice's cut-off after the older file is back = %v; want at least %v, the change's", got, before)
			}
			if u, _ := SessionUser(ctx, d, "alice", issued, byCutoffAlone); u != nil {
				t.Errorf("SessionUser(alice, a token issued before the change) after the older file is back = alice; want nil (dead stays dead)")
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
	hash := mustHash(t, "pw", passwordtest.Cost)
	alice := User{Username: "alice", PasswordHash: hash, Groups: []string{}}
	if err := WriteFile(path, []User{alice}); err != nil {
		t.Fatal(err)
	}
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now().Add(-time.Second)
	if err := d.Delete(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AddAll(ctx, []User{alice}); err != nil {
		t.Fatal(err)
	}
	if u, _ := SessionUser(ctx, d, "alice", issued, byCutoffAlone); u != nil {
		t.Errorf("SessionUser(alice, a token of the deleted alice) after alice is added again = alice; want nil")
	}
}

// TestCutoffsFile: a last record cut short (an append that never
// finished) is ignored and dropped by the next append; any other line that
// is not a record refuses the load, and the previous users stay in force.
func TestCutoffsFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "users.json")
	hash := mustHash(t, "pw", passwordtest.Cost)
	if err := WriteFile(path, []User{{Username: "alice", PasswordHash: hash, Groups: []string{}}, {Username: "bob", PasswordHash: hash, Groups: []string{}}}); err != nil {
		t.Fatal(err)
	}
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Update(ctx, "alice", func(u *User) error { u.TokensAfter = time.Now(); return nil }); err != nil {
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
	if err := d.Update(ctx, "bob", func(u *User) error { u.TokensAfter = time.Now(); return nil }); err != nil {
		t.Fatalf("Update(bob) after a record cut short = %v; want nil", err)
	}
	data, err := os.ReadFile(cuts)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"alice"`) || !strings.Contains(lines[1], `"bob"`) || strings.Contains(string(data), "tokens_af\"") {
		t.Errorf("cut-offs file after the next append = %q; want alice's and bob's records, the cut-short one gone", data)
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
	hash := mustHash(t, "pw", passwordtest.Cost)
	if err := WriteFile(path, []User{{Username: "alice", PasswordHash: hash, Groups: []string{}}}); err != nil {
		t.Fatal(err)
	}
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	older := bytes.Replace(written, []byte(`"users"`), []byte(`"\u0075sers"`), 1)
	d, err := OpenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	issued := time.Now()
	if err := d.Update(ctx, "alice", func(u *User) error { u.TokensAfter = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, older, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if u, _ := SessionUser(ctx, d, "alice", issued, byCutoffAlone); u != nil {
		t.Errorf("SessionUser(alice, a token from before logout) after an older file for the reference parser is back = alice; want nil")
	}
}
