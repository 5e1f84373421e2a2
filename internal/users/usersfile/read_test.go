package usersfile

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"authsvc/internal/users"
)

// testHash is bcrypt("pw") at cost 4.
const testHash = "$2a$04$V8Q8Epg2X6wrj9o4CB/dsOsmSNtQq0PjAZGGWfx2E7GlYRFT2lXVK"

// usersJSON returns a users file holding the given entries, each a JSON object.
func usersJSON(entries ...string) string {
	return `{"users": [` + strings.Join(entries, ",\n") + `]}`
}

// entry returns a users file entry for username with the given extra fields.
func entry(username string, extra ...string) string {
	fields := append([]string{fmt.Sprintf("%q: %q", "username", username)}, extra...)
	return "{" + strings.Join(fields, ", ") + "}"
}

func hashField(h string) string { return fmt.Sprintf(`"password_hash": %q`, h) }

var okAlice = entry("alice", hashField(testHash))

func TestParseUsersErrors(t *testing.T) {
	for _, tt := range []struct {
		name, doc, want string
	}{
		{"empty", ``, "not a users file"},
		{"bad JSON", `{"users": [`, "not a users file"},
		{"bad JSON in entry", usersJSON(okAlice, `{"username": "bob",}`), "not a users file"},
		{"array", `[]`, "not a users file"},
		{"string", `"users"`, "not a users file"},
		{"null", `null`, "not a users file"},
		{"no users", `{}`, `not a users file: no "users" array`},
		{"null users", `{"users": null}`, `not a users file: no "users" array`},
		{"users not an array", `{"users": {}}`, "not a users file"},
		{"trailing object", usersJSON(okAlice) + ` {}`, "data after the top-level object"},
		{"trailing junk", usersJSON(okAlice) + ` x`, "data after the top-level object"},
		{"unknown top-level field", `{"users": [], "version": 2}`, `unknown field "version"`},
		{"unknown field", usersJSON(okAlice, entry("bob", `"pasword_hash": "x"`)), `users[1]: json: unknown field "pasword_hash"`},
		{"wrong type", usersJSON(okAlice, entry("bob", hashField(testHash), `"admin": "yes"`)), `users[1]: json: cannot unmarshal string`},
		{"groups not strings", usersJSON(entry("bob", hashField(testHash), `"groups": [1]`)), `users[0]: json: cannot unmarshal number`},
		{"null entry", usersJSON(okAlice, `null`), `users[1]: username "": want 1-150`},
		{"entry not an object", usersJSON(`"bob"`), `users[0]: json: cannot unmarshal string`},
		{"missing username", usersJSON(`{"password_hash": "` + testHash + `"}`), `users[0]: username ""`},
		{"invalid username", usersJSON(okAlice, entry("bob smith", hashField(testHash))), `users[1]: username "bob smith"`},
		{"long username", usersJSON(entry(strings.Repeat("a", 151), hashField(testHash))), `users[0]: username "aaa`},
		{"duplicate username", usersJSON(okAlice, entry("bob", hashField(testHash)), entry("bob", hashField(testHash))), `users[2] ("bob"): username: duplicate of users[1]`},
		{"bad hash prefix", usersJSON(okAlice, entry("bob", hashField("$1$"+testHash[3:]))), `users[1] ("bob"): password_hash: unsupported password hash scheme: md5-crypt`},
		{"unknown bcrypt version", usersJSON(okAlice, entry("bob", hashField("$2x$"+testHash[4:]))), `users[1] ("bob"): password_hash: unsupported password hash scheme: bcrypt $2x$`},
		{"plain password", usersJSON(okAlice, entry("bob", hashField("hunter2"))), `users[1] ("bob"): password_hash: not a supported password hash`},
		{"short hash", usersJSON(okAlice, entry("bob", hashField("$2a$04$short"))), `users[1] ("bob"): password_hash: bcrypt hash: malformed`},
		{"long hash", usersJSON(okAlice, entry("bob", hashField(testHash+"x"))), `users[1] ("bob"): password_hash: bcrypt hash: malformed`},
		{"cost too high", usersJSON(okAlice, entry("bob", hashField("$2a$32$"+testHash[7:]))), `users[1] ("bob"): password_hash: bcrypt cost 32 is above the maximum 14`},
		{"cost too low", usersJSON(okAlice, entry("bob", hashField("$2a$03$"+testHash[7:]))), `users[1] ("bob"): password_hash: bcrypt cost 3 is below the minimum 4`},
		{"no $ after cost", usersJSON(okAlice, entry("bob", hashField("$2a$04x"+testHash[7:]))), `users[1] ("bob"): password_hash: bcrypt hash: malformed`},
		{"not bcrypt base64", usersJSON(okAlice, entry("bob", hashField(testHash[:7]+strings.Repeat("!", 53)))), `users[1] ("bob"): password_hash: bcrypt hash: malformed salt`},
		{"argon2 memory too large", usersJSON(okAlice, entry("bob", hashField("$argon2id$v=19$m=4194304,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA"))), `users[1] ("bob"): password_hash: argon2 memory`},
		{"sha1 from Django", usersJSON(okAlice, entry("bob", hashField("sha1$salt$0123456789abcdef0123456789abcdef01234567"))), `users[1] ("bob"): password_hash: unsupported`},
		{"not NFKC", usersJSON(okAlice, entry("zoë", hashField(testHash))), `: not in NFKC form ("zoë")`},
		{"fullwidth", usersJSON(okAlice, entry("ｚｏｅ", hashField(testHash))), `users[1]: username "ｚｏｅ": not in NFKC form ("zoe")`},
	} {
		list, err := Parse([]byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse(%q) = %v, %v; want error containing %q", tt.name, tt.doc, list, err, tt.want)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: Parse(%q) = %q; want a one-line error", tt.name, tt.doc, err)
		}
	}
}

func TestReadUsersFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	if err := os.WriteFile(path, []byte(usersJSON(okAlice, entry("bob", hashField("hunter2")))), 0o600); err != nil {
		t.Fatal(err)
	}
	want := path + `: users[1] ("bob"): password_hash: not a supported password hash (bcrypt, argon2id, Django's pbkdf2_sha256, pbkdf2_sha1, argon2, bcrypt_sha256, bcrypt, scrypt, or a wrapped legacy Django form)`
	if _, err := Read(path); err == nil || err.Error() != want {
		t.Errorf("Read(%q) = %v; want %q", path, err, want)
	}
	missing := filepath.Join(dir, "missing.json")
	if _, err := Read(missing); !os.IsNotExist(err) {
		t.Errorf("Read(%q) = %v; want a not-exist error", missing, err)
	}
}

func TestParseUsersGood(t *testing.T) {
	doc := usersJSON(
		entry("alice", hashField(testHash), `"name": "Alice"`, `"email": "alice@example.com"`, `"groups": ["dev", "ops"]`, `"admin": true`),
		entry("bob", hashField("$2b$"+testHash[4:]), `"groups": null`, `"disabled": true`),
		entry("c.d+e-f_g@h", hashField("$2y$"+testHash[4:])),
	)
	want := []users.User{
		{Username: "alice", PasswordHash: testHash, Name: "Alice", Email: "alice@example.com", Groups: []string{"dev", "ops"}, Admin: true},
		{Username: "bob", PasswordHash: "$2b$" + testHash[4:], Groups: []string{}, Disabled: true},
		{Username: "c.d+e-f_g@h", PasswordHash: "$2y$" + testHash[4:], Groups: []string{}},
	}
	got, err := Parse([]byte(doc))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse(%s) = %+v, %v; want %+v, nil", doc, got, err, want)
	}
	// groups null and missing both become [], never nil.
	for _, u := range got {
		if u.Groups == nil {
			t.Errorf("Parse: %s: Groups = nil; want []", u.Username)
		}
	}
	if got, err := Parse([]byte(`{"users": []}`)); err != nil || got == nil || len(got) != 0 {
		t.Errorf(`parseUsers({"users": []}) = %#v, %v; want [], nil`, got, err)
	}
}

func FuzzParseUsers(f *testing.F) {
	tokens := `"access_tokens": [{"id": "x1", "name": "ci", "digest": "` + strings.Repeat("ab", 32) + `", "prefix": "authsvc_pat_abcd", ` +
		`"scopes": ["info", "introspect"], "created_at": "2026-01-01T00:00:00Z", "expires_at": "2027-01-01T00:00:00+02:00", "last_used_at": "2026-02-01T00:00:00Z"}]`
	for _, doc := range []string{
		usersJSON(),
		usersJSON(okAlice),
		usersJSON(entry("alice", hashField(testHash), `"name": "Alice"`, `"email": "a@example.com"`, `"groups": ["dev", "ops"]`, `"admin": true`, `"disabled": true`),
			entry("bob", hashField("$2b$"+testHash[4:]), `"groups": null`)),
		usersJSON(okAlice, okAlice),
		usersJSON(entry("bob")),
		usersJSON(entry("bob", `"pasword_hash": "x"`)),
		`{"users": [], "x": 1}`,
		`{"users": []} {}`,
		`null`,
		`{}`,
		`[`,
		``,
		usersJSON(entry("alice", hashField(testHash), `"name": "B\u00f8b \u2028"`, `"groups": ["a<b>", null]`, `"tokens_after": "2026-01-02T03:04:05+02:00"`)),
		usersJSON(entry("alice", hashField(testHash), `"tokens_after": null`, `"admin": null`, `"email": null`)),
		usersJSON(entry("alice", hashField(testHash), `"ADMIN": true`), okAlice),
		usersJSON(okAlice, entry("bob", hashField(testHash)), okAlice),
		usersJSON(okAlice, entry("bob", hashField("hunter2")), `{"x": [1.5e3, -0, true, {}]}`),
		"{\"users\" : [\n" + okAlice + "\n] }\n",
		`{"users": [{"username": "a\xff"}]}`,
		usersJSON(entry("alice", hashField(testHash), tokens), entry("bob", hashField(testHash), `"access_tokens": []`)),
		usersJSON(entry("alice", hashField(testHash), `"access_tokens": [{"id": "x1", "name": "", "digest": "00", "scopes": []}]`)),
		usersJSON(entry("alice", hashField(testHash), tokens), entry("bob", hashField(testHash), tokens)),
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := Parse(data)
		// The fast parser agrees with the reference on every input.
		strict, strictErr := parseUsersStrict(data)
		if fmt.Sprint(err) != fmt.Sprint(strictErr) || !reflect.DeepEqual(list, strict) {
			t.Fatalf("Parse(%q) = %+v, %v; want parseUsersStrict's %+v, %v", data, list, err, strict, strictErr)
		}
		if err != nil {
			if list != nil {
				t.Errorf("Parse(%q) = %v, %v; want nil users with an error", data, list, err)
			}
			return
		}
		if list == nil {
			t.Fatalf("Parse(%q) = nil, nil; want a non-nil list", data)
		}
		path := filepath.Join(t.TempDir(), "users.json")
		if err := Write(path, list); err != nil {
			t.Fatalf("Write(Parse(%q)) = %v", data, err)
		}
		got, err := Read(path)
		if err != nil {
			t.Fatalf("Read(Write(Parse(%q))) = %v", data, err)
		}
		if !reflect.DeepEqual(got, list) {
			t.Fatalf("Read(Write(Parse(%q))) = %+v; want %+v", data, got, list)
		}
		// A streaming edit of the file as it was keeps every entry it does
		// not touch, and the index built while reading it is the users'.
		edited := filepath.Join(t.TempDir(), "users.json")
		if err := os.WriteFile(edited, data, 0o600); err != nil {
			t.Fatal(err)
		}
		d := New(edited, slog.New(slog.DiscardHandler))
		if err := d.Reload(context.Background()); err != nil {
			t.Fatalf("Reload of %q = %v; want nil", data, err)
		}
		if x := d.index(); len(x.byName) != len(list) {
			t.Fatalf("index of %q has %d users; want %d", data, len(x.byName), len(list))
		}
		for _, u := range list {
			du, err := d.Lookup(context.Background(), u.Username)
			want := newDirUserForTest(t, u)
			if err != nil || du.StoredHash() != want.StoredHash() || !reflect.DeepEqual(du.Info(), want.Info()) ||
				du.Admin() != want.Admin() || du.Disabled() != want.Disabled() || du.HasSecondFactor() != want.HasSecondFactor() ||
				!du.TokensAfter().Equal(want.TokensAfter()) || du.Work() != want.Work() {
				t.Fatalf("Lookup(%q) in %q = %+v, %v; want %+v", u.Username, data, du, err, want)
			}
			// Its personal access tokens are indexed, each found by its digest.
			if got, err := users.AccessTokens(context.Background(), d, u.Username); err != nil || !reflect.DeepEqual(got, u.AccessTokens) {
				t.Fatalf("AccessTokens(%q) in %q = %+v, %v; want %+v", u.Username, data, got, err, u.AccessTokens)
			}
			for _, tok := range u.AccessTokens {
				digest, _ := tok.DigestBytes()
				if owner, got, err := users.LookupAccessToken(context.Background(), d, digest); err != nil || owner != du || got.ID != tok.ID {
					t.Fatalf("AccessToken(%s) in %q = %v, %+v, %v; want %q's %s", tok.Digest, data, owner, got, err, u.Username, tok.ID)
				}
			}
		}
		added := users.User{Username: "zz-fuzz-added", PasswordHash: testHash, Groups: []string{}}
		if findUser(list, added.Username) >= 0 {
			return
		}
		if err := d.Add(context.Background(), added); err != nil {
			t.Fatalf("Add to %q = %v", data, err)
		}
		got, err = Read(edited)
		if want := append(list, added); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Read after Add to %q = %+v, %v; want %+v", data, got, err, want)
		}
	})
}

// newDirUserForTest is NewAccount(u), which must not fail.
func newDirUserForTest(t *testing.T, u users.User) *users.Account {
	t.Helper()
	du, err := users.NewAccount(&u)
	if err != nil {
		t.Fatal(err)
	}
	return du
}
