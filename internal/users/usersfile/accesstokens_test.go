package usersfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/internal/users"
)

// accessToken returns a live personal access token record named name,
// with id id, and its digest; seed makes the digest.
func accessToken(id, name, seed string) (users.AccessToken, [sha256.Size]byte) {
	d := sha256.Sum256([]byte(seed))
	now := time.Now().UTC().Truncate(time.Second)
	return users.AccessToken{ID: id, Name: name, Digest: hex.EncodeToString(d[:]), Prefix: "authsvc_pat_abcd",
		Scopes: []string{users.ScopeInfo}, CreatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}, d
}

// openUsers writes list to a users file and opens it.
func openUsers(t testing.TB, list []users.User) (*Directory, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.json")
	if err := Write(path, list); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return d, path
}

// TestAccessTokensIndexed: a load indexes every user's tokens by digest;
// a reload that keeps an unchanged entry's Account still takes its
// changed tokens; a file without tokens keeps no map of them.
func TestAccessTokensIndexed(t *testing.T) {
	ctx := context.Background()
	ci, ciDigest := accessToken("id-ci", "ci", "ci")
	deploy, deployDigest := accessToken("id-deploy", "deploy", "deploy")
	alice := users.User{Username: "alice", PasswordHash: testHash, Groups: []string{}, AccessTokens: []users.AccessToken{ci}}
	bob := users.User{Username: "bob", PasswordHash: testHash, Groups: []string{}}
	d, path := openUsers(t, []users.User{alice, bob})
	if u, tok, err := users.LookupAccessToken(ctx, d, ciDigest); err != nil || u.Username() != "alice" || tok.ID != "id-ci" {
		t.Fatalf("AccessToken(ci) = %v, %v, %v; want alice's ci", u, tok, err)
	}
	if x := d.index(); len(x.accessTokens) != 1 || len(x.byDigest) != 1 {
		t.Errorf("index holds tokens of %d users, %d digests; want alice's alone, 1", len(x.accessTokens), len(x.byDigest))
	}
	was, _ := d.Lookup(ctx, "alice")
	// Another process gives alice another token in place of ci.
	alice.AccessTokens = []users.AccessToken{deploy}
	if err := Write(path, []users.User{alice, bob}); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if now, _ := d.Lookup(ctx, "alice"); now != was {
		t.Errorf("Reload made alice a new Account for a change of her tokens alone; want the one kept")
	}
	if _, _, err := users.LookupAccessToken(ctx, d, ciDigest); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("AccessToken(ci) after another process replaced it = %v; want users.ErrNotFound", err)
	}
	if u, tok, err := users.LookupAccessToken(ctx, d, deployDigest); err != nil || u != was || tok.ID != "id-deploy" {
		t.Errorf("AccessToken(deploy) after another process wrote it = %v, %v, %v; want alice's deploy", u, tok, err)
	}
	alice.AccessTokens = nil
	if err := Write(path, []users.User{alice, bob}); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if x := d.index(); x.accessTokens != nil || x.byDigest != nil {
		t.Errorf("index of a file without tokens = %v, %v; want no maps", x.accessTokens, x.byDigest)
	}
}

// TestIndexLaterEntryReplacesTokens: of two entries of one name, the
// later's tokens replace the earlier's (put).
func TestIndexLaterEntryReplacesTokens(t *testing.T) {
	ci, ciDigest := accessToken("id-ci", "ci", "ci")
	deploy, deployDigest := accessToken("id-deploy", "deploy", "deploy")
	first := users.User{Username: "alice", PasswordHash: testHash, AccessTokens: []users.AccessToken{ci}}
	second := users.User{Username: "alice", PasswordHash: testHash, AccessTokens: []users.AccessToken{deploy}}
	x, err := newUserIndex([]users.User{first, second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.lookupKey(users.AccessTokenKey(ciDigest)); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("lookupKey(the earlier entry's) = %v; want users.ErrNotFound", err)
	}
	if found, err := x.lookupKey(users.AccessTokenKey(deployDigest)); err != nil || found[0].AccessToken(deployDigest).ID != deploy.ID {
		t.Errorf("lookupKey(the later entry's) = %v, %v; want it", found, err)
	}
}

// TestAccessTokensRefused: a users file with a token record that cannot
// be judged, or a digest held twice, does not load, and the error names
// the entry and the field; a reload keeps the users in force.
func TestAccessTokensRefused(t *testing.T) {
	good, _ := accessToken("id-ci", "ci", "ci")
	other, _ := accessToken("id-other", "other", "other")
	for _, tt := range []struct {
		name string
		bad  func(a *users.AccessToken, u *users.User)
		want string
	}{
		{"no digest", func(a *users.AccessToken, _ *users.User) { a.Digest = "" }, "access_tokens[0]: digest"},
		{"digest not hex", func(a *users.AccessToken, _ *users.User) { a.Digest = strings.Repeat("g", 64) }, "access_tokens[0]: digest"},
		{"no expiry", func(a *users.AccessToken, _ *users.User) { a.ExpiresAt = time.Time{} }, "access_tokens[0]: expires_at"},
		{"no id", func(a *users.AccessToken, _ *users.User) { a.ID = "" }, "access_tokens[0]: id"},
		{"no name", func(a *users.AccessToken, _ *users.User) { a.Name = "" }, "access_tokens[0]: name"},
		{"unknown scope", func(a *users.AccessToken, _ *users.User) { a.Scopes = []string{"write"} }, "access_tokens[0]: scopes"},
		{"id repeated", func(a *users.AccessToken, u *users.User) {
			o := other
			o.ID = a.ID
			u.AccessTokens = append(u.AccessTokens, o)
		}, "access_tokens[1]: id"},
		{"digest twice in one user", func(a *users.AccessToken, u *users.User) {
			o := other
			o.Digest = a.Digest
			u.AccessTokens = append(u.AccessTokens, o)
		}, `access_tokens[1]: digest: also that of a token of "bob"`},
		{"another user's digest", func(a *users.AccessToken, _ *users.User) { a.Digest = other.Digest }, `access_tokens[0]: digest: also that of a token of "alice"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			alice := users.User{Username: "alice", PasswordHash: testHash, Groups: []string{}, AccessTokens: []users.AccessToken{other}}
			bob := users.User{Username: "bob", PasswordHash: testHash, Groups: []string{}}
			d, path := openUsers(t, []users.User{alice, bob})
			bad := good
			bad.Scopes = []string{users.ScopeInfo}
			bob.AccessTokens = []users.AccessToken{bad}
			tt.bad(&bob.AccessTokens[0], &bob)
			if err := Write(path, []users.User{alice, bob}); err != nil {
				t.Fatal(err)
			}
			want := `users[1] ("bob"): ` + tt.want
			if err := d.Reload(ctx); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Reload = %v; want an error containing %q", err, want)
			}
			if _, err := Read(path); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Read = %v; want an error containing %q", err, want)
			}
			if _, err := d.Lookup(ctx, "alice"); err != nil {
				t.Errorf("Lookup(alice) after a refused reload = %v; want the users in force", err)
			}
		})
	}
}

// TestAccessTokensSurviveNoCopyBack: a token that died (its user deleted
// or disabled, it revoked, the password set by an operator) stays dead
// when an older users file, which holds it, is copied back.
func TestAccessTokensSurviveNoCopyBack(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(ctx context.Context, d *Directory) error
	}{
		{"delete", func(ctx context.Context, d *Directory) error { return d.Delete(ctx, "alice") }},
		{"disable", func(ctx context.Context, d *Directory) error { return users.Disable(ctx, d, "alice") }},
		{"revoke", func(ctx context.Context, d *Directory) error {
			_, err := users.RevokeAccessToken(ctx, d, "alice", "id-ci", time.Now())
			return err
		}},
		{"passwd", func(ctx context.Context, d *Directory) error { return users.SetPassword(ctx, d, "alice", testHash) }},
		{"disable, then enable", func(ctx context.Context, d *Directory) error {
			if err := users.Disable(ctx, d, "alice"); err != nil {
				return err
			}
			return users.Enable(ctx, d, "alice")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ci, ciDigest := accessToken("id-ci", "ci", "ci")
			deploy, deployDigest := accessToken("id-deploy", "deploy", "deploy")
			alice := users.User{Username: "alice", PasswordHash: testHash, Groups: []string{}, TokensAfter: time.Now().Add(-time.Hour)}
			d, path := openUsers(t, []users.User{alice})
			if err := users.CreateAccessToken(ctx, d, "alice", ci); err != nil {
				t.Fatal(err)
			}
			older, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.change(ctx, d); err != nil {
				t.Fatal(err)
			}
			copyBack(t, path, older)
			if err := d.Reload(ctx); err != nil {
				t.Fatal(err)
			}
			if u, tok, err := users.AccessTokenUser(ctx, d, ciDigest, time.Now()); u != nil || err != nil {
				t.Errorf("AccessTokenUser(ci) after %s and an older file copied back = %v, %v, %v; want nil", tt.name, u, tok, err)
			}
			if list, err := users.AccessTokens(ctx, d, "alice"); err == nil && len(list) > 0 {
				t.Errorf("AccessTokens(alice) after %s and an older file copied back = %v; want none", tt.name, list)
			}
			if tt.name == "delete" || tt.name == "disable" {
				return
			}
			// The user's tokens made after the copy back live.
			if err := users.CreateAccessToken(ctx, d, "alice", deploy); err != nil {
				t.Fatalf("CreateAccessToken(deploy) after the copy back = %v", err)
			}
			if u, _, err := users.AccessTokenUser(ctx, d, deployDigest, time.Now()); u == nil || err != nil {
				t.Errorf("AccessTokenUser(deploy), made after the change = %v, %v; want alice", u, err)
			}
			if list, err := d.List(ctx); err != nil || len(list) != 1 || len(list[0].AccessTokens) != 1 || list[0].AccessTokens[0].ID != deploy.ID {
				t.Errorf("List() = %v, %v; want alice with deploy alone", list, err)
			}
		})
	}
}

// copyBack puts data back as the users file at path, as an operator's cp
// of an older copy does.
func copyBack(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".older"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestRevokeRecordEndsNoSession: a revoke's record in the cut-offs file
// leaves the user's cut-off, and so their sessions, as they were.
func TestRevokeRecordEndsNoSession(t *testing.T) {
	ctx := context.Background()
	ci, _ := accessToken("id-ci", "ci", "ci")
	cutoff := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	d, path := openUsers(t, []users.User{{Username: "alice", PasswordHash: testHash, Groups: []string{}, TokensAfter: cutoff, AccessTokens: []users.AccessToken{ci}}})
	if _, err := users.RevokeAccessToken(ctx, d, "alice", ci.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	records, err := os.ReadFile(CutoffsPath(path))
	if err != nil || !strings.Contains(string(records), `"event":"revoke","access_tokens":["id-ci"]`) {
		t.Errorf("cut-offs file after a revoke = %s, %v; want a revoke record of id-ci", records, err)
	}
	if err := d.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if u, err := d.Lookup(ctx, "alice"); err != nil || !u.TokensAfter().Equal(cutoff) {
		t.Errorf("Lookup(alice).TokensAfter() after a revoke = %v, %v; want %v, as it was", u.TokensAfter(), err, cutoff)
	}
	for _, line := range []string{
		`{"username":"alice","tokens_after":"2026-01-01T00:00:00Z","event":"revoke"}` + "\n",
		`{"username":"alice","tokens_after":"2026-01-01T00:00:00Z","access_tokens":["x"]}` + "\n",
	} {
		if _, err := parseCutoffs(strings.NewReader(line), "cutoffs"); err == nil {
			t.Errorf("parseCutoffs(%s) = nil error; want the record refused", line)
		}
	}
}

// BenchmarkAccessTokenLookup: LookupAccessToken on a loaded file of
// 10,000 users, 1,000 of them with a token: what /api/auth/info with a
// personal access token costs the directory. 1 alloc/op: the key's 32
// bytes.
func BenchmarkAccessTokenLookup(b *testing.B) {
	const n, withTokens = 10_000, 1_000
	list := make([]users.User, n)
	var digests [][sha256.Size]byte
	for i := range list {
		list[i] = users.User{Username: fmt.Sprintf("user%05d", i), PasswordHash: testHash, Groups: []string{"dev"}}
		if i%(n/withTokens) == 0 {
			tok, d := accessToken(fmt.Sprintf("id-%d", i), "ci", fmt.Sprintf("token %d", i))
			list[i].AccessTokens = []users.AccessToken{tok}
			digests = append(digests, d)
		}
	}
	d, _ := openUsers(b, list)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := users.LookupAccessToken(ctx, d, digests[i%len(digests)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// TestAccessTokenLookupAllocations: LookupKey of a token's digest
// allocates nothing, found or not, and LookupAccessToken no more than
// its key (the digest's 32 bytes, which escape through the interface).
func TestAccessTokenLookupAllocations(t *testing.T) {
	ci, ciDigest := accessToken("id-ci", "ci", "ci")
	d, _ := openUsers(t, []users.User{{Username: "alice", PasswordHash: testHash, Groups: []string{}, AccessTokens: []users.AccessToken{ci}}})
	ctx := context.Background()
	unknown := sha256.Sum256([]byte("unknown"))
	found, missing := users.AccessTokenKey(ciDigest), users.AccessTokenKey(unknown)
	if n := testing.AllocsPerRun(100, func() {
		d.LookupKey(ctx, found)
		d.LookupKey(ctx, missing)
	}); n != 0 {
		t.Errorf("LookupKey(a token's digest) allocates %v times per run of two; want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		users.LookupAccessToken(ctx, d, ciDigest)
		users.LookupAccessToken(ctx, d, unknown)
	}); n > 2 {
		t.Errorf("LookupAccessToken allocates %v times per run of two; want at most 2 (the keys)", n)
	}
}
