package djangoimport

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// TestPlan: a plan adds the users whose names are free, leaves the others
// alone or, with update, brings them up to date: the hash only of a user
// an import made, whose Django hash changed, ending its sessions. The
// dump's keys go only to users the import made and did not leave alone.
func TestPlan(t *testing.T) {
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	before := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	now := before.Add(time.Hour)
	const oldHash, newHash = "$2a$04$QiGvq5sFAv6cEEA9pzq5T.2cQg6lLhAq5a0rnGBCUsEObOQyt2uWW", "$2a$04$1zGr0LlmRErk5DLK9M3Ss.6pArr4g5k5sFBYVBKOXO1nP0fC3wEnK"
	pat := []users.AccessToken{{ID: "0123456789abcdef", Name: "ci", Digest: strings.Repeat("ab", 32), Scopes: []string{"info"}, CreatedAt: before, ExpiresAt: now.Add(time.Hour)}}
	held := []users.User{
		{Username: "ann", PasswordHash: oldHash, DjangoHash: users.DjangoHashFingerprint(key, "ann-old"), Name: "Ann", TokensAfter: before, AccessTokens: pat},
		{Username: "bob", PasswordHash: oldHash, Name: "Bob", TokensAfter: before, AccessTokens: pat}, // made in authsvc
	}
	dump := func() *Dump {
		return &Dump{Users: []users.User{
			{Username: "ann", PasswordHash: newHash, DjangoHash: users.DjangoHashFingerprint(key, "ann-new"), Name: "Ann"},
			{Username: "bob", PasswordHash: newHash, DjangoHash: users.DjangoHashFingerprint(key, "bob"), Name: "Robert"},
			{Username: "cid", PasswordHash: newHash, DjangoHash: users.DjangoHashFingerprint(key, "cid"), Name: "Cid", TokensAfter: now},
		}}
	}

	t.Run("without update", func(t *testing.T) {
		p, err := NewPlan(dump(), held, false, key, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Add) != 1 || p.Add[0].Username != "cid" || !slices.Equal(p.LeftAlone, []string{"ann", "bob"}) || len(p.Update) != 0 || len(p.NotOurs) != 0 {
			t.Fatalf("NewPlan = add %v, left alone %v, update %v, not ours %v; want add cid, ann and bob left alone", p.Add, p.LeftAlone, slices.Sorted(maps.Keys(p.Update)), p.NotOurs)
		}
		after, failed := p.Simulate(held)
		if owners := p.Owners(after, p.LeftAlone); len(failed) != 0 || len(owners) != 1 || owners["cid"].Name != "Cid" {
			t.Errorf("Owners = %v (failed %v); want cid alone", slices.Sorted(maps.Keys(owners)), failed)
		}
	})

	t.Run("with update", func(t *testing.T) {
		p, err := NewPlan(dump(), held, true, key, now)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Add) != 1 || len(p.LeftAlone) != 0 || !slices.Equal(p.NotOurs, []string{"bob"}) || !slices.Equal(slices.Sorted(maps.Keys(p.Update)), []string{"ann", "bob"}) {
			t.Fatalf("NewPlan = add %v, left alone %v, update %v, not ours %v; want add cid, update ann and bob, bob not ours", p.Add, p.LeftAlone, slices.Sorted(maps.Keys(p.Update)), p.NotOurs)
		}
		after, failed := p.Simulate(held)
		if len(failed) != 0 {
			t.Fatalf("Simulate failed %v; want none", failed)
		}
		if ann := after["ann"]; ann.PasswordHash != newHash || ann.PasswordGeneration != 1 || !ann.TokensAfter.Equal(now) || len(ann.AccessTokens) != 0 {
			t.Errorf("ann after the update = hash %q, generation %d, cut-off %v, %d personal access tokens; want the new hash, 1, %v, none (a password set in Django ends them)",
				ann.PasswordHash, ann.PasswordGeneration, ann.TokensAfter, len(ann.AccessTokens), now)
		}
		if bob := after["bob"]; len(bob.AccessTokens) != 1 {
			t.Errorf("bob after the update has %d personal access tokens; want his 1 (his password was not touched)", len(bob.AccessTokens))
		}
		if bob := after["bob"]; bob.PasswordHash != oldHash || bob.DjangoHash != "" || bob.Name != "Robert" || !bob.TokensAfter.Equal(before) {
			t.Errorf("bob after the update = hash %q, Django hash %q, name %q, cut-off %v; want his own hash, no Django hash, Robert, %v", bob.PasswordHash, bob.DjangoHash, bob.Name, bob.TokensAfter, before)
		}
		ann := after["ann"]
		if err := p.Update["ann"](&ann); !errors.Is(err, ErrUnchanged) {
			t.Errorf("the update of ann run again = %v; want ErrUnchanged", err)
		}
		if owners := p.Owners(after, p.LeftAlone); !slices.Equal(slices.Sorted(maps.Keys(owners)), []string{"ann", "cid"}) {
			t.Errorf("Owners = %v; want ann and cid", slices.Sorted(maps.Keys(owners)))
		}
	})
}
