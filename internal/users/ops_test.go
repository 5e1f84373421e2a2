package users

import (
	"slices"
	"testing"
)

// TestSetAdmin: a personal access token keeps the admin scope only while
// its user is an admin throughout; a demotion ends it, and so does a
// promotion of a user who still held one (issue 37, point 6). The
// caller's slice is never changed in place (a dry run shares it).
func TestSetAdmin(t *testing.T) {
	tokens := func() []AccessToken {
		return []AccessToken{{ID: "info", Scopes: []string{ScopeInfo}}, {ID: "ops", Scopes: []string{ScopeInfo, ScopeAdmin}}}
	}
	for _, tt := range []struct {
		was, is bool
		want    []string // the IDs of the tokens kept
	}{
		{true, true, []string{"info", "ops"}},
		{true, false, []string{"info"}},
		{false, true, []string{"info"}},
		{false, false, []string{"info"}},
	} {
		shared := tokens()
		u := User{Admin: tt.was, AccessTokens: shared}
		SetAdmin(&u, tt.is)
		var got []string
		for _, tok := range u.AccessTokens {
			got = append(got, tok.ID)
		}
		if u.Admin != tt.is || !slices.Equal(got, tt.want) {
			t.Errorf("SetAdmin(admin %v, %v) = admin %v, tokens %q; want admin %v, tokens %q", tt.was, tt.is, u.Admin, got, tt.is, tt.want)
		}
		if len(shared) != 2 || shared[1].ID != "ops" {
			t.Errorf("SetAdmin(admin %v, %v) changed the caller's tokens in place: %v", tt.was, tt.is, shared)
		}
	}
}
