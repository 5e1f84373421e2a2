package users

import (
	"strings"
	"testing"
	"time"
)

func TestCheckScopes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		scopes []string
		want   string // in the error; "" for none
	}{
		{[]string{ScopeInfo}, ""},
		{[]string{ScopeAdmin, ScopeInfo, ScopeIntrospect}, ""},
		{nil, "no scope"},
		{[]string{}, "no scope"},
		{[]string{"write"}, `unknown scope "write"`},
		{[]string{"INFO"}, `unknown scope "INFO"`},
		{[]string{""}, `unknown scope ""`},
		{[]string{ScopeInfo, ScopeIntrospect, ScopeInfo}, `scope "info" repeated`},
	} {
		err := CheckScopes(tt.scopes)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckScopes(%q) = %v; want %q", tt.scopes, err, tt.want)
		}
	}
}

func TestCheckAccessTokenName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"ci-deploy", true},
		{"déploiement nocturne ✓", true},
		{strings.Repeat("é", MaxAccessTokenName), true}, // characters, not bytes
		{strings.Repeat("a", MaxAccessTokenName+1), false},
		{"", false},
		{"tab\there", false},
		{"line\nbreak", false},
		{"\u0085next line", false},
		{"bad \xff utf-8", false},
	} {
		if err := CheckAccessTokenName(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckAccessTokenName(%q) = %v; want ok %v", tt.name, err, tt.ok)
		}
	}
}

// validToken returns a token record CheckAccessTokens takes.
func validToken(id string, digestByte string) AccessToken {
	return AccessToken{ID: id, Name: "name-" + id, Digest: strings.Repeat(digestByte, 64), Prefix: "authsvc_pat_abcd",
		Scopes: []string{ScopeInfo}, CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ExpiresAt: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func TestCheckAccessTokens(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		change func(list []AccessToken) []AccessToken
		want   string // in the error; "" for none
	}{
		{"valid", func(l []AccessToken) []AccessToken { return l }, ""},
		{"none", func([]AccessToken) []AccessToken { return nil }, ""},
		{"same name twice (one may have expired)", func(l []AccessToken) []AccessToken { l[1].Name = l[0].Name; return l }, ""},
		{"no id", func(l []AccessToken) []AccessToken { l[1].ID = ""; return l }, "access_tokens[1]: id"},
		{"long id", func(l []AccessToken) []AccessToken { l[0].ID = strings.Repeat("x", 65); return l }, "access_tokens[0]: id"},
		{"id not UTF-8", func(l []AccessToken) []AccessToken { l[0].ID = "\xff"; return l }, "access_tokens[0]: id"},
		{"id repeated", func(l []AccessToken) []AccessToken { l[1].ID = l[0].ID; return l }, `access_tokens[1]: id "a" repeated`},
		{"short digest", func(l []AccessToken) []AccessToken { l[0].Digest = l[0].Digest[:63]; return l }, "access_tokens[0]: digest"},
		{"digest not hex", func(l []AccessToken) []AccessToken { l[0].Digest = strings.Repeat("z", 64); return l }, "access_tokens[0]: digest"},
		{"no expiry", func(l []AccessToken) []AccessToken { l[1].ExpiresAt = time.Time{}; return l }, "access_tokens[1]: expires_at"},
		{"no name", func(l []AccessToken) []AccessToken { l[0].Name = ""; return l }, "access_tokens[0]: name: empty"},
		{"no scope", func(l []AccessToken) []AccessToken { l[0].Scopes = nil; return l }, "access_tokens[0]: scopes: no scope"},
		{"unknown scope", func(l []AccessToken) []AccessToken { l[1].Scopes = []string{"root"}; return l }, "access_tokens[1]: scopes"},
	} {
		list := tt.change([]AccessToken{validToken("a", "0"), validToken("b", "1")})
		err := CheckAccessTokens(list)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: CheckAccessTokens = %v; want %q", tt.name, err, tt.want)
		}
	}
	// Upper-case hex is a digest too: DigestBytes decodes either.
	list := []AccessToken{validToken("a", "A")}
	if err := CheckAccessTokens(list); err != nil {
		t.Errorf("CheckAccessTokens(an upper-case hex digest) = %v; want nil", err)
	}
}

// TestLiveAccessTokens: the live tokens, newest first (made at the same
// time: in the record's order), as copies; the expired left out.
func TestLiveAccessTokens(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	tok := func(id string, created, expires time.Duration) AccessToken {
		t := validToken(id, "0")
		t.CreatedAt, t.ExpiresAt = now.Add(created), now.Add(expires)
		return t
	}
	list := []AccessToken{
		tok("old", -3*time.Hour, time.Hour),
		tok("expired", -time.Hour, -time.Minute),
		tok("new", -time.Minute, time.Hour),
		tok("just-expired", -time.Hour, 0), // expires at now: dead
		tok("mid1", -2*time.Hour, time.Hour),
		tok("mid2", -2*time.Hour, time.Hour),
	}
	got := LiveAccessTokens(list, now)
	var ids []string
	for _, t := range got {
		ids = append(ids, t.ID)
	}
	if want := "new mid1 mid2 old"; strings.Join(ids, " ") != want {
		t.Errorf("LiveAccessTokens = %v; want %s", ids, want)
	}
	got[0].Scopes[0] = "changed"
	if list[2].Scopes[0] != ScopeInfo {
		t.Errorf("LiveAccessTokens shares its tokens' scopes with the record; want copies")
	}
	if got := LiveAccessTokens(nil, now); got == nil || len(got) != 0 {
		t.Errorf("LiveAccessTokens(nil) = %#v; want an empty list", got)
	}
}

func TestAccessTokenDigestBytes(t *testing.T) {
	t.Parallel()
	tok := validToken("a", "ab")
	tok.Digest = tok.Digest[:64]
	d, ok := tok.DigestBytes()
	if !ok || d[0] != 0xab || d[31] != 0xab {
		t.Errorf("DigestBytes(%q) = %x, %v; want ab…ab, true", tok.Digest, d, ok)
	}
	for _, bad := range []string{"", "ab", strings.Repeat("g", 64), strings.Repeat("ab", 33)} {
		tok.Digest = bad
		if _, ok := tok.DigestBytes(); ok {
			t.Errorf("DigestBytes(%q) ok; want not", bad)
		}
	}
}

func TestFindAccessToken(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	expired := validToken("gone", "0")
	expired.ExpiresAt = now
	list := []User{
		{Username: "alice", AccessTokens: []AccessToken{validToken("a1", "0"), expired}},
		{Username: "bob", AccessTokens: []AccessToken{validToken("b1", "1")}},
	}
	if name, err := FindAccessToken(list, "b1", now); err != nil || name != "bob" {
		t.Errorf("FindAccessToken(b1) = %q, %v; want bob", name, err)
	}
	for _, id := range []string{"gone", "nope"} {
		if name, err := FindAccessToken(list, id, now); err != ErrNoAccessToken {
			t.Errorf("FindAccessToken(%s) = %q, %v; want ErrNoAccessToken", id, name, err)
		}
	}
}
