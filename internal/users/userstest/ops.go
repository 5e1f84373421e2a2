package userstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// How an operation leaves a time of the record: as it was, or moved
// to when the operation ran.
const (
	kept = iota
	moved
)

// generation is alice's password generation before an operation.
const generation = 41

// An opCase is one operation on alice and what it leaves.
type opCase struct {
	name  string
	setup func(u *users.User) // alice before the operation, on top of a plain user with a cut-off an hour ago
	op    func(t *testing.T, d users.Directory) error

	disabled   bool   // alice is disabled after it
	cutoff     int    // kept or moved
	generation uint64 // the password generation after it
	hash       string // the password hash after it
	unlocked   int    // failures_after: kept or moved
	factors    bool   // second factors are left
	// Whether SessionUser lets a token live after the operation:
	// issued just before it on the password of then (old), issued
	// after it on the password of then (inFlight: a login that
	// checked the old password while the change was written), and
	// issued after it on the password of now (fresh).
	old, inFlight, fresh bool
}

// opsFixture is what runOps's cases share: the backing, the hashes of
// alice's password and of her next one, and her cut-off before.
type opsFixture struct {
	factory       Factory
	hash, newHash string
	earlier       time.Time // alice's cut-off before the operation
}

// runOps checks the operations on one user (users.Disable, Enable,
// SetPassword, Logout, Unlock, ResetFactors) against one backing: what
// each writes to the user's record, and which tokens SessionUser refuses
// afterwards.
func runOps(t *testing.T, factory Factory) {
	fx := opsFixture{
		factory: factory,
		hash:    passwordtest.MustHash(t, "alice-pw", passwordtest.Cost),
		newHash: passwordtest.MustHash(t, "alice-new-pw", passwordtest.Cost),
		earlier: time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond),
	}
	for _, tt := range opCases(t, fx) {
		t.Run(tt.name, func(t *testing.T) { fx.run(t, tt) })
	}
	t.Run("no such user", func(t *testing.T) { fx.noSuchUser(t) })
}

// opCases are the operations runOps checks.
func opCases(t *testing.T, fx opsFixture) []opCase {
	ctx := context.Background()
	hash, newHash := fx.hash, fx.newHash
	key := newKey(t)
	var none secret.Key
	future := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	return []opCase{
		{
			name:     "disable",
			op:       func(t *testing.T, d users.Directory) error { return users.Disable(ctx, d, "alice") },
			disabled: true, cutoff: moved, generation: generation, hash: hash,
		},
		{
			name:  "enable",
			setup: func(u *users.User) { u.Disabled = true },
			op:    func(t *testing.T, d users.Directory) error { return users.Enable(ctx, d, "alice") },
			// A token issued while alice was disabled (by an instance
			// that had not reloaded) dies with the enable.
			cutoff: moved, generation: generation, hash: hash,
			inFlight: true, fresh: true,
		},
		{
			name:  "enable never moves the cut-off back",
			setup: func(u *users.User) { u.Disabled, u.TokensAfter = true, future },
			op:    func(t *testing.T, d users.Directory) error { return users.Enable(ctx, d, "alice") },
			// Issued after the operation, but before the cut-off: dead.
			cutoff: kept, generation: generation, hash: hash,
		},
		{
			name:   "passwd",
			op:     func(t *testing.T, d users.Directory) error { return users.SetPassword(ctx, d, "alice", newHash) },
			cutoff: moved, generation: generation + 1, hash: newHash,
			fresh: true,
		},
		{
			name:   "logout",
			op:     func(t *testing.T, d users.Directory) error { return users.Logout(ctx, d, "alice") },
			cutoff: moved, generation: generation, hash: hash,
			inFlight: true, fresh: true,
		},
		{
			name:   "unlock",
			op:     func(t *testing.T, d users.Directory) error { return users.Unlock(ctx, d, "alice") },
			cutoff: kept, generation: generation, hash: hash, unlocked: moved,
			old: true, inFlight: true, fresh: true,
		},
		{
			name:   "reset-mfa",
			setup:  func(u *users.User) { u.MFA = SealedFactors(t, "alice", key, key, key) },
			op:     resetFactors(ctx, true, false),
			cutoff: moved, generation: generation + 1, hash: hash,
			fresh: true,
		},
		{
			name:   "reset-mfa of an enrolment never confirmed",
			setup:  func(u *users.User) { u.MFA = SealedFactors(t, "alice", none, key, none) },
			op:     resetFactors(ctx, true, true),
			cutoff: moved, generation: generation + 1, hash: hash,
			fresh: true,
		},
		{
			name:   "reset-mfa of a user without factors",
			op:     resetFactors(ctx, false, false),
			cutoff: kept, generation: generation, hash: hash,
			old: true, inFlight: true, fresh: true,
		},
	}
}

// run adds alice as tt sets her up, runs tt's operation on her, and checks
// her record and her tokens after it.
func (fx opsFixture) run(t *testing.T, tt opCase) {
	ctx := context.Background()
	open := fx.factory(t)
	d := open()
	alice := users.User{Username: "alice", PasswordHash: fx.hash, Groups: []string{}, TokensAfter: fx.earlier, PasswordGeneration: generation}
	if tt.setup != nil {
		tt.setup(&alice)
	}
	was := alice
	if err := d.Add(ctx, alice); err != nil {
		t.Fatal(err)
	}
	behind := open() // an instance that loaded alice before the operation, and has not reloaded since
	if err := behind.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	oldStamp := users.SessionGeneration(generation)
	before := time.Now().UTC()
	oldIssued := before.Add(-time.Millisecond)
	if u, err := users.SessionUser(ctx, d, "alice", oldIssued, oldStamp); err != nil || (u != nil) != !was.Disabled {
		t.Fatalf("SessionUser(alice, a token issued before %s) before it = live %v, %v; want live %v", tt.name, u != nil, err, !was.Disabled)
	}
	if err := tt.op(t, d); err != nil {
		t.Fatalf("%s = %v; want nil", tt.name, err)
	}
	after := time.Now().UTC()
	fx.checkRecord(t, tt, d, was, before, after)

	// Judged on the handle that wrote, and on one opened after.
	// The handle behind may still let a dead token live (up to
	// the reload bound), but never refuses a live one.
	fresh := open()
	if err := fresh.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	issuedAfter := after.Add(time.Millisecond)
	newStamp := users.SessionGeneration(tt.generation)
	for _, tok := range []struct {
		what     string
		issuedAt time.Time
		stamp    uint64
		live     bool
	}{
		{"a token issued before it", oldIssued, oldStamp, tt.old},
		{"a token issued after it on the old password", issuedAfter, oldStamp, tt.inFlight},
		{"a token issued after it on the password now", issuedAfter, newStamp, tt.fresh},
	} {
		for _, h := range []struct {
			name string
			d    users.Directory
		}{{"the writer", d}, {"a handle opened after", fresh}, {"a handle behind", behind}} {
			if h.name == "a handle behind" && !tok.live {
				continue
			}
			u, err := users.SessionUser(ctx, h.d, "alice", tok.issuedAt, tok.stamp)
			if err != nil || (u != nil) != tok.live {
				t.Errorf("SessionUser(alice, %s) on %s after %s = live %v, %v; want live %v", tok.what, h.name, tt.name, u != nil, err, tok.live)
			}
		}
	}
}

// checkRecord checks alice's record in d after tt's operation, which ran
// between before and after on the record was.
func (fx opsFixture) checkRecord(t *testing.T, tt opCase, d users.Directory, was users.User, before, after time.Time) {
	t.Helper()
	list, err := d.List(context.Background())
	if err != nil || len(list) != 1 {
		t.Fatalf("List() after %s = %+v, %v; want alice", tt.name, list, err)
	}
	u := list[0]
	// PostgreSQL keeps microseconds, rounding a cut-off up.
	ranAt := func(x time.Time) bool { return !x.Before(before) && !x.After(after.Add(time.Microsecond)) }
	checkTime := func(field string, got, was time.Time, want int) {
		t.Helper()
		switch {
		case want == kept && !got.Equal(was):
			t.Errorf("%s after %s = %v; want %v, as it was", field, tt.name, got, was)
		case want == moved && !ranAt(got):
			t.Errorf("%s after %s = %v; want between %v and %v, when it ran", field, tt.name, got, before, after)
		}
	}
	checkTime("TokensAfter", u.TokensAfter, was.TokensAfter, tt.cutoff)
	checkTime("FailuresAfter", u.FailuresAfter, was.FailuresAfter, tt.unlocked)
	if u.Disabled != tt.disabled {
		t.Errorf("Disabled after %s = %v; want %v", tt.name, u.Disabled, tt.disabled)
	}
	if u.PasswordGeneration != tt.generation {
		t.Errorf("PasswordGeneration after %s = %d; want %d", tt.name, u.PasswordGeneration, tt.generation)
	}
	if u.PasswordHash != tt.hash { // not printed: a hash stays out of messages
		t.Errorf("PasswordHash after %s is the new one: %v; want %v", tt.name, u.PasswordHash == fx.newHash, tt.hash == fx.newHash)
	}
	if (u.MFA != nil) != tt.factors {
		t.Errorf("MFA after %s = %s; want factors %v", tt.name, jsonOf(u.MFA), tt.factors)
	}
}

// noSuchUser checks that every operation on a user who is not there is
// users.ErrNotFound.
func (fx opsFixture) noSuchUser(t *testing.T) {
	ctx := context.Background()
	d := fx.factory(t)()
	for name, op := range map[string]func() error{
		"disable": func() error { return users.Disable(ctx, d, "nobody") },
		"enable":  func() error { return users.Enable(ctx, d, "nobody") },
		"passwd":  func() error { return users.SetPassword(ctx, d, "nobody", fx.newHash) },
		"logout":  func() error { return users.Logout(ctx, d, "nobody") },
		"unlock":  func() error { return users.Unlock(ctx, d, "nobody") },
		"reset-mfa": func() error {
			removed, _, err := users.ResetFactors(ctx, d, "nobody")
			if removed {
				return errors.New("removed")
			}
			return err
		},
	} {
		if err := op(); !errors.Is(err, users.ErrNotFound) {
			t.Errorf("%s of nobody = %v; want users.ErrNotFound", name, err)
		}
	}
}

// resetFactors returns an operation that runs users.ResetFactors on alice
// and checks what it reports.
func resetFactors(ctx context.Context, wantRemoved, wantPendingOnly bool) func(*testing.T, users.Directory) error {
	return func(t *testing.T, d users.Directory) error {
		removed, pendingOnly, err := users.ResetFactors(ctx, d, "alice")
		if err == nil && (removed != wantRemoved || pendingOnly != wantPendingOnly) {
			t.Errorf("ResetFactors(alice) = removed %v, pending only %v; want %v, %v", removed, pendingOnly, wantRemoved, wantPendingOnly)
		}
		return err
	}
}
