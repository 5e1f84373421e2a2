package userstest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"authsvc/internal/users"
)

// Changes the last-admin checks make.
var (
	demote  = func(u *users.User) error { users.SetAdmin(u, false); return nil }
	disable = func(u *users.User) error { u.Disabled = true; return nil }
	restore = func(u *users.User) error { u.Admin, u.Disabled = true, false; return nil }
	rename  = func(u *users.User) error { u.Name = "Renamed"; return nil }
)

// adminsFixture adds ann and ben, enabled admins, and alice, who is not
// one, to a fresh backing, and returns the function that opens it.
func (fx fixture) adminsFixture(t *testing.T) func() users.Directory {
	t.Helper()
	open := fx.factory(t)
	ann, ben := fx.alice, fx.alice
	ann.Username, ann.Admin = "ann", true
	ben.Username, ben.Admin = "ben", true
	if existing, err := open().AddAll(context.Background(), []users.User{fx.alice, ann, ben}); err != nil || len(existing) > 0 {
		t.Fatalf("AddAll(alice, ann, ben) = %v, %v; want none taken", existing, err)
	}
	return open
}

// enabledAdmins returns the names of d's enabled admins, as its backing
// holds them now.
func enabledAdmins(t *testing.T, d users.Directory) []string {
	t.Helper()
	list, err := d.List(context.Background())
	if err != nil {
		t.Fatalf("List() = %v", err)
	}
	var names []string
	for i := range list {
		if users.EnabledAdmin(&list[i]) {
			names = append(names, list[i].Username)
		}
	}
	return names
}

// testLastAdmin: Update and Delete with KeepAnAdmin refuse, with
// ErrLastAdmin and nothing written, the write that would take away the
// last enabled admin (a disabled admin is none), and let every other
// through; Update and Delete, the CLI's, do not refuse it.
func testLastAdmin(t *testing.T, fx fixture) {
	ctx := context.Background()
	d := fx.adminsFixture(t)()
	step := func(what string, err error, want error) {
		t.Helper()
		if !errors.Is(err, want) || want == nil && err != nil {
			t.Fatalf("%s = %v; want %v", what, err, want)
		}
	}
	step("Update(alice, rename, KeepAnAdmin)", users.Update(ctx, d, "alice", rename, users.KeepAnAdmin), nil)
	step("Update(ann, demote, KeepAnAdmin) with ben an admin", users.Update(ctx, d, "ann", demote, users.KeepAnAdmin), nil)
	step("Update(ben, rename, KeepAnAdmin), the last admin", users.Update(ctx, d, "ben", rename, users.KeepAnAdmin), nil)
	step("Update(ben, demote, KeepAnAdmin), the last admin", users.Update(ctx, d, "ben", demote, users.KeepAnAdmin), users.ErrLastAdmin)
	step("Update(ben, disable, KeepAnAdmin), the last admin", users.Update(ctx, d, "ben", disable, users.KeepAnAdmin), users.ErrLastAdmin)
	step("Delete(ben, KeepAnAdmin), the last admin", d.Delete(ctx, "ben", users.KeepAnAdmin), users.ErrLastAdmin)
	// KeepAnAdmin decides for one user: a write of several with it is
	// refused whole, never applied without the rule.
	_, err := d.UpdateAll(ctx, map[string]func(*users.User) error{"ben": demote, "ann": demote}, users.KeepAnAdmin)
	step("UpdateAll(ben and ann, demote, KeepAnAdmin)", err, users.ErrOneUser)
	if got := enabledAdmins(t, d); len(got) != 1 || got[0] != "ben" {
		t.Fatalf("enabled admins after the refusals = %q; want [ben]", got)
	}
	if u, err := d.Lookup(ctx, "ben"); err != nil || !u.Admin() || u.Disabled() {
		t.Fatalf("Lookup(ben) after the refusals = %v; want an enabled admin", err)
	}
	// ann an admin again but disabled: she does not count.
	step("Update(ann, admin, disabled)", users.Update(ctx, d, "ann", func(u *users.User) error { u.Admin, u.Disabled = true, true; return nil }), nil)
	step("Update(ben, demote, KeepAnAdmin) with ann disabled", users.Update(ctx, d, "ben", demote, users.KeepAnAdmin), users.ErrLastAdmin)
	step("Update(ann, restore, KeepAnAdmin)", users.Update(ctx, d, "ann", restore, users.KeepAnAdmin), nil)
	step("Delete(ben, KeepAnAdmin) with ann enabled again", d.Delete(ctx, "ben", users.KeepAnAdmin), nil)
	// Update and Delete do not keep an admin: the CLI's operator can.
	step("Update(ann, demote), the last admin", users.Update(ctx, d, "ann", demote), nil)
	if got := enabledAdmins(t, d); len(got) != 0 {
		t.Fatalf("enabled admins after Update demoted the last = %q; want none", got)
	}
	// With no enabled admin left, a write that takes none away goes through.
	step("Update(alice, rename, KeepAnAdmin) with no admin", users.Update(ctx, d, "alice", rename, users.KeepAnAdmin), nil)
	step("Delete(ann, KeepAnAdmin), no longer an admin", d.Delete(ctx, "ann", users.KeepAnAdmin), nil)
	step("Delete(nobody, KeepAnAdmin)", d.Delete(ctx, "nobody", users.KeepAnAdmin), users.ErrNotFound)
	step("Update(nobody, KeepAnAdmin)", users.Update(ctx, d, "nobody", rename, users.KeepAnAdmin), users.ErrNotFound)
}

// testLastAdminRace: two handles on one backing (two processes, two
// instances) take away ann and ben, the only enabled admins, at once,
// again and again: each time exactly one write succeeds, the other fails
// with ErrLastAdmin, and one enabled admin remains.
func testLastAdminRace(t *testing.T, fx fixture) {
	ctx := context.Background()
	open := fx.adminsFixture(t)
	a, b := open(), open()
	for _, tt := range []struct {
		name string
		op   func(d users.Directory, name string) error
	}{
		{"demote", func(d users.Directory, name string) error {
			return users.Update(ctx, d, name, demote, users.KeepAnAdmin)
		}},
		{"disable", func(d users.Directory, name string) error {
			return users.Update(ctx, d, name, disable, users.KeepAnAdmin)
		}},
		{"delete", func(d users.Directory, name string) error { return d.Delete(ctx, name, users.KeepAnAdmin) }},
	} {
		for round := range 20 {
			for _, name := range []string{"ann", "ben"} {
				if err := users.Update(ctx, a, name, restore); errors.Is(err, users.ErrNotFound) {
					u := fx.alice
					u.Username, u.Admin = name, true
					err = a.Add(ctx, u)
				} else if err != nil {
					t.Fatalf("%s round %d: restore %s: %v", tt.name, round, name, err)
				}
			}
			var errs [2]error
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, d := range []users.Directory{a, b} {
				wg.Go(func() {
					<-start
					errs[i] = tt.op(d, []string{"ben", "ann"}[i])
				})
			}
			close(start)
			wg.Wait()
			lost := 0
			for _, err := range errs {
				switch {
				case errors.Is(err, users.ErrLastAdmin):
					lost++
				case err != nil:
					t.Fatalf("%s round %d: %v", tt.name, round, err)
				}
			}
			if got := enabledAdmins(t, a); lost != 1 || len(got) != 1 {
				t.Fatalf("%s round %d: a %s of ben on one handle and of ann on the other at once = %s; enabled admins %q; want one ErrLastAdmin and one admin left",
					tt.name, round, tt.name, fmt.Sprint(errs[:]), got)
			}
		}
	}
}
