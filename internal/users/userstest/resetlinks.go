package userstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"authsvc/internal/users"
)

// runResetLinks checks that a backing keeps a user's password reset link
// (User.ResetLink) through its writes, so that users.NewResetLink and
// users.ConfirmReset keep API.md's promises on it: a link works once, on
// any handle, until it expires or a newer link, a password change or a
// reset makes it dead.
func runResetLinks(t *testing.T, fx fixture) {
	ctx := context.Background()
	now := time.Now()
	newHash := fx.alice.PasswordHash // any valid hash serves: the link, not the password, is under test
	t.Run("works once, on another handle", func(t *testing.T) {
		a, b := fx.aliceOnTwo(t)
		uid, token, err := users.NewResetLink(ctx, a, "alice", time.Hour, now)
		if err != nil {
			t.Fatalf("NewResetLink(alice) = %v", err)
		}
		if name, err := users.ParseResetUID(uid); err != nil || name != "alice" {
			t.Fatalf("ParseResetUID(%q) = %q, %v; want alice", uid, name, err)
		}
		if err := users.ConfirmReset(ctx, b, "alice", token, newHash, now); err != nil {
			t.Fatalf("ConfirmReset on another handle = %v; want nil", err)
		}
		for name, d := range map[string]users.Directory{"the same handle": b, "the other handle": a} {
			if err := users.ConfirmReset(ctx, d, "alice", token, newHash, now); !errors.Is(err, users.ErrBadResetLink) {
				t.Errorf("ConfirmReset again on %s = %v; want ErrBadResetLink", name, err)
			}
		}
	})
	t.Run("dead when superseded, expired, or after a password set or a logout", func(t *testing.T) {
		for _, tt := range []struct {
			name  string
			after func(d users.Directory) error
			at    time.Time
		}{
			{"a newer link", func(d users.Directory) error {
				_, _, err := users.NewResetLink(ctx, d, "alice", time.Hour, now)
				return err
			}, now},
			{"user passwd", func(d users.Directory) error { return users.SetPassword(ctx, d, "alice", newHash) }, now},
			{"user logout", func(d users.Directory) error { return users.Logout(ctx, d, "alice") }, now},
			{"a cut-off moved (reset-mfa, a second factor's confirm)", func(d users.Directory) error {
				return users.Update(ctx, d, "alice", func(u *users.User) error { u.TokensAfter = time.Now().UTC(); return nil })
			}, now},
			{"disabled", func(d users.Directory) error { return users.Disable(ctx, d, "alice") }, now},
			{"disabled, then enabled", func(d users.Directory) error {
				if err := users.Disable(ctx, d, "alice"); err != nil {
					return err
				}
				return users.Enable(ctx, d, "alice")
			}, now},
			{"expiry", func(users.Directory) error { return nil }, now.Add(time.Hour)},
		} {
			d := fx.withAlice(t)
			_, token, err := users.NewResetLink(ctx, d, "alice", time.Hour, now)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.after(d); err != nil {
				t.Fatal(err)
			}
			if err := users.ConfirmReset(ctx, d, "alice", token, newHash, tt.at); !errors.Is(err, users.ErrBadResetLink) {
				t.Errorf("ConfirmReset after %s = %v; want ErrBadResetLink", tt.name, err)
			}
		}
	})
	t.Run("wrong and malformed links", func(t *testing.T) {
		d := fx.withAlice(t)
		if _, _, err := users.NewResetLink(ctx, d, "alice", time.Hour, now); err != nil {
			t.Fatal(err)
		}
		_, other, err := users.NewResetLink(ctx, fx.withAlice(t), "alice", time.Hour, now) // another backing's link
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range []string{other, "", "short", other + "A", "!!!!"} {
			if err := users.ConfirmReset(ctx, d, "alice", tok, newHash, now); !errors.Is(err, users.ErrBadResetLink) {
				t.Errorf("ConfirmReset(%q) = %v; want ErrBadResetLink", tok, err)
			}
		}
		if err := users.ConfirmReset(ctx, d, "nobody", other, newHash, now); !errors.Is(err, users.ErrBadResetLink) {
			t.Errorf("ConfirmReset(an unknown user) = %v; want ErrBadResetLink", err)
		}
	})
	t.Run("a reset's reach", func(t *testing.T) {
		d := fx.withAlice(t)
		create(t, d, "alice", liveToken("ci"))
		before, err := d.Recheck(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		_, token, err := users.NewResetLink(ctx, d, "alice", time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := users.ConfirmReset(ctx, d, "alice", token, newHash, now); err != nil {
			t.Fatal(err)
		}
		after, err := d.Recheck(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if after.SessionGeneration() == before.SessionGeneration() || !after.TokensAfter().After(before.TokensAfter()) {
			t.Errorf("after a reset, stamp %d and cut-off %v; want both moved from %d and %v: every session dies",
				after.SessionGeneration(), after.TokensAfter(), before.SessionGeneration(), before.TokensAfter())
		}
		if list, err := users.AccessTokens(ctx, d, "alice"); err != nil || len(list) != 0 {
			t.Errorf("AccessTokens after a reset = %d tokens, %v; want none", len(list), err)
		}
		if after.FailuresAfter().IsZero() {
			t.Errorf("FailuresAfter after a reset is zero; want the reset's time: the lockouts are lifted")
		}
	})
	t.Run("mailed at most MaxResetMails an hour", func(t *testing.T) {
		a, b := fx.aliceOnTwo(t)
		if err := users.Update(ctx, a, "alice", func(u *users.User) error { u.Email = ""; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, _, err := users.NewMailedResetLink(ctx, a, "alice", time.Hour, now); !errors.Is(err, users.ErrNoEmail) {
			t.Errorf("NewMailedResetLink(a user without email) = %v; want ErrNoEmail", err)
		}
		if err := users.Update(ctx, a, "alice", func(u *users.User) error { u.Email = "Alice@Example.com"; return nil }); err != nil {
			t.Fatal(err)
		}
		for i, d := range []users.Directory{a, b, a} { // counted on any handle
			if _, _, err := users.NewMailedResetLink(ctx, d, "alice", time.Hour, now.Add(time.Duration(i)*time.Minute)); err != nil {
				t.Fatalf("mail %d: NewMailedResetLink = %v; want nil", i+1, err)
			}
		}
		if _, _, err := users.NewMailedResetLink(ctx, b, "alice", time.Hour, now.Add(10*time.Minute)); !errors.Is(err, users.ErrResetMailLimit) {
			t.Errorf("a 4th mail within the hour = %v; want ErrResetMailLimit", err)
		}
		if _, _, err := users.NewResetLink(ctx, b, "alice", time.Hour, now.Add(10*time.Minute)); err != nil {
			t.Errorf("an operator's link at the mail limit = %v; want nil: only mails are counted", err)
		}
		if _, _, err := users.NewMailedResetLink(ctx, a, "alice", time.Hour, now.Add(61*time.Minute)); err != nil {
			t.Errorf("a mail an hour after the first = %v; want nil", err)
		}
		names, err := users.UsersByEmail(ctx, b, "alice@EXAMPLE.com")
		if err != nil || len(names) != 1 || names[0] != "alice" {
			t.Errorf("UsersByEmail(alice@EXAMPLE.com) = %v, %v; want [alice]", names, err)
		}
		if err := users.Disable(ctx, a, "alice"); err != nil {
			t.Fatal(err)
		}
		if names, err := users.UsersByEmail(ctx, a, "alice@example.com"); err != nil || len(names) != 0 {
			t.Errorf("UsersByEmail(a disabled user's address) = %v, %v; want none", names, err)
		}
	})
	t.Run("a confirm keeps the mail count and the code lock", func(t *testing.T) {
		a, b := fx.aliceOnTwo(t)
		var token string
		for i := range users.MaxResetMails {
			var err error
			if _, token, err = users.NewMailedResetLink(ctx, a, "alice", time.Hour, now.Add(time.Duration(i)*time.Second)); err != nil {
				t.Fatalf("mail %d: NewMailedResetLink = %v; want nil", i+1, err)
			}
		}
		before, err := b.Recheck(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if err := users.ConfirmReset(ctx, b, "alice", token, newHash, now.Add(5*time.Second)); err != nil {
			t.Fatalf("ConfirmReset = %v; want nil", err)
		}
		for name, d := range map[string]users.Directory{"the confirming handle": b, "the other handle": a} {
			_, _, err := users.NewMailedResetLink(ctx, d, "alice", time.Hour, now.Add(10*time.Second))
			if !errors.Is(err, users.ErrResetMailLimit) {
				t.Errorf("NewMailedResetLink after a confirm on %s = %v; want ErrResetMailLimit: the count is apart from the link", name, err)
			}
		}
		after, err := b.Recheck(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if !after.CodesAfter().Equal(before.CodesAfter()) {
			t.Errorf("CodesAfter after a reset = %v; want %v: a confirm never lifts the code lock", after.CodesAfter(), before.CodesAfter())
		}
		if err := users.Unlock(ctx, a, "alice"); err != nil {
			t.Fatal(err)
		}
		unlocked, err := b.Recheck(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if !unlocked.CodesAfter().After(after.CodesAfter()) || !unlocked.CodesAfter().Equal(unlocked.FailuresAfter()) {
			t.Errorf("after user unlock, CodesAfter %v, FailuresAfter %v; want both the unlock's time", unlocked.CodesAfter(), unlocked.FailuresAfter())
		}
		if list, err := b.Page(ctx, "", users.MaxPage, users.Filter{}); err != nil || len(list) != 1 || !list[0].CodesAfter.Equal(unlocked.CodesAfter()) {
			t.Errorf("Page() after user unlock = %+v, %v; want alice with CodesAfter %v", list, err, unlocked.CodesAfter())
		}
	})
	t.Run("none for a disabled user", func(t *testing.T) {
		d := fx.withAlice(t)
		if err := users.Disable(ctx, d, "alice"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := users.NewResetLink(ctx, d, "alice", time.Hour, now); !errors.Is(err, users.ErrDisabled) {
			t.Errorf("NewResetLink(a disabled user) = %v; want ErrDisabled", err)
		}
	})
}
