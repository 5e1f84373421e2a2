package usersfile

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/users"
)

// TestKeepAdminCountsAsRecordsSay: the last-admin rule counts the other
// admins as a load has them, whichever parser reads the file: an admin
// whom the cut-offs file keeps disabled or deleted is none, though an
// older file put back says otherwise (issue 37, point 9).
func TestKeepAdminCountsAsRecordsSay(t *testing.T) {
	for _, reference := range []bool{false, true} {
		for _, gone := range []string{"disabled", "deleted"} {
			t.Run(map[bool]string{false: "fast parser", true: "reference parser"}[reference]+", "+gone, func(t *testing.T) {
				ctx := context.Background()
				path := filepath.Join(t.TempDir(), "users.json")
				hash := passwordtest.MustHash(t, "pw", passwordtest.Cost)
				long := time.Now().Add(-time.Hour)
				if err := Write(path, []users.User{
					{Username: "alice", PasswordHash: hash, Groups: []string{}, TokensAfter: long},
					{Username: "ann", PasswordHash: hash, Groups: []string{}, Admin: true, TokensAfter: long},
					{Username: "ben", PasswordHash: hash, Groups: []string{}, Admin: true, TokensAfter: long},
				}); err != nil {
					t.Fatal(err)
				}
				older, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if reference { // a file the fast parser leaves whole to encoding/json
					older = bytes.Replace(older, []byte(`"users"`), []byte(`"\u0075sers"`), 1)
				}
				d, err := Open(path, slog.New(slog.DiscardHandler))
				if err != nil {
					t.Fatal(err)
				}
				if gone == "disabled" {
					err = users.Disable(ctx, d, "ann")
				} else {
					err = d.Delete(ctx, "ann")
				}
				if err != nil {
					t.Fatal(err)
				}
				// The file from before: ann an enabled admin in it.
				if err := os.WriteFile(path, older, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := d.Reload(ctx); err != nil {
					t.Fatal(err)
				}
				if err := d.Delete(ctx, "ben", users.KeepAnAdmin); !errors.Is(err, users.ErrLastAdmin) {
					t.Errorf("Delete(ben, KeepAnAdmin) with ann %s by the records = %v; want ErrLastAdmin", gone, err)
				}
				demote := func(u *users.User) error { users.SetAdmin(u, false); return nil }
				if err := users.Update(ctx, d, "ben", demote, users.KeepAnAdmin); !errors.Is(err, users.ErrLastAdmin) {
					t.Errorf("Update(ben, demote, KeepAnAdmin) with ann %s by the records = %v; want ErrLastAdmin", gone, err)
				}
				if u, err := d.Lookup(ctx, "ben"); err != nil || !u.Admin() {
					t.Errorf("Lookup(ben) after the refusals = %v; want an admin still", err)
				}
			})
		}
	}
}
