package users

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password"

	"golang.org/x/crypto/bcrypt"
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
		users, err := Parse([]byte(tt.doc))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse(%q) = %v, %v; want error containing %q", tt.name, tt.doc, users, err, tt.want)
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
	if _, err := ReadFile(path); err == nil || err.Error() != want {
		t.Errorf("ReadFile(%q) = %v; want %q", path, err, want)
	}
	missing := filepath.Join(dir, "missing.json")
	if _, err := ReadFile(missing); !os.IsNotExist(err) {
		t.Errorf("ReadFile(%q) = %v; want a not-exist error", missing, err)
	}
}

func TestParseUsersGood(t *testing.T) {
	doc := usersJSON(
		entry("alice", hashField(testHash), `"name": "Alice"`, `"email": "alice@example.com"`, `"groups": ["dev", "ops"]`, `"admin": true`),
		entry("bob", hashField("$2b$"+testHash[4:]), `"groups": null`, `"disabled": true`),
		entry("c.d+e-f_g@h", hashField("$2y$"+testHash[4:])),
	)
	want := []User{
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

func TestWriteUsersFileRoundTrip(t *testing.T) {
	users := []User{
		{Username: "alice", PasswordHash: testHash, Name: "Alice <A&B>", Email: "alice@example.com", Groups: []string{"dev"}, Admin: true},
		{Username: "bob", PasswordHash: testHash, Name: "Bøb \u2028", Groups: []string{}, Disabled: true},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	// An existing file is replaced, and its mode with it.
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, list := range [][]User{users, nil, users} {
		if err := WriteFile(path, list); err != nil {
			t.Fatalf("WriteFile(%q, %d users) = %v; want nil", path, len(list), err)
		}
		got, err := ReadFile(path)
		want := list
		if want == nil {
			want = []User{}
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ReadFile after WriteFile(%+v) = %+v, %v; want the same", list, got, err)
		}
		checkMode(t, path, 0o600)
		if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{"users.json"}) {
			t.Errorf("files in dir after WriteFile = %q; want only users.json", names)
		}
	}
}

func TestWriteUsersFileError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "users.json")
	if err := WriteFile(path, nil); err == nil {
		t.Errorf("WriteFile(%q) = nil; want an error", path)
	}
}

func TestEditUsers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	add := func(users []User) ([]User, error) {
		return append(users, User{Username: "alice", PasswordHash: testHash, Groups: []string{}}), nil
	}
	if err := EditFile(path, false, add); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("EditFile(missing file, create=false) = %v; want a does-not-exist error", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("after EditFile(create=false): stat = %v; want not exist", err)
	}
	if err := EditFile(path, true, add); err != nil {
		t.Fatalf("EditFile(missing file, create=true) = %v; want nil", err)
	}
	if err := EditFile(path, false, func([]User) ([]User, error) {
		return nil, fmt.Errorf("refused")
	}); err == nil || err.Error() != "refused" {
		t.Errorf("EditFile(edit fails) = %v; want refused", err)
	}
	got, err := ReadFile(path)
	if err != nil || len(got) != 1 || got[0].Username != "alice" {
		t.Errorf("ReadFile after a failed edit = %+v, %v; want alice alone", got, err)
	}
	// A broken file is never overwritten by an edit.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := EditFile(path, true, add); err == nil {
		t.Errorf("EditFile(broken file) = nil; want an error")
	}
	if data, _ := os.ReadFile(path); string(data) != "{" {
		t.Errorf("broken file after EditFile = %q; want it untouched", data)
	}
}

// TestSlowestCheckEmpty: a directory with no usable hash still costs a
// failed login a check: against the default hash policy's.
func TestSlowestCheckEmpty(t *testing.T) {
	x, err := newUserIndex([]User{{Username: "a", PasswordHash: "!unusable"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := password.DefaultHashPolicy()
	if h := x.slowest.Hash; h.Scheme() != password.SchemeArgon2id || h.MemoryKiB != p.ArgonMemoryKiB || h.Time != p.ArgonTime {
		t.Errorf("slowest check of a directory without a usable hash = %s; want the default policy's argon2id", x.slowest.Shape)
	}
}

// TestSlowestCheckCost: the check failed logins cost is at the slowest
// cost in the directory, not the most common one: an admin at cost 6 among
// users at cost 4 must not be told apart by a wrong password's time.
func TestSlowestCheckCost(t *testing.T) {
	for _, tt := range []struct {
		costs []int
		want  int
	}{
		{[]int{4}, 4},
		{[]int{4, 5, 5}, 5},
		{[]int{6, 4, 4, 4}, 6},
	} {
		var users []User
		for i, c := range tt.costs {
			users = append(users, User{Username: fmt.Sprint("u", i), PasswordHash: mustHash(t, "pw", c)})
		}
		x, err := newUserIndex(users, nil)
		if err != nil {
			t.Fatal(err)
		}
		if x.slowest.Hash.Scheme() != password.SchemeBcrypt || x.slowest.Hash.Cost != tt.want {
			t.Errorf("newUserIndex(costs %v).slowest = %s; want bcrypt at cost %d", tt.costs, x.slowest.Shape, tt.want)
		}
	}
}

// TestWrongPasswordPadded: a wrong password against a fast hash takes at
// least as long as a check against the slowest hash, so a user with a cheap
// hash cannot be told from an unknown user by time.
func TestWrongPasswordPadded(t *testing.T) {
	x, err := newUserIndex([]User{
		{Username: "admin", PasswordHash: mustHash(t, "admin-pw", 4)},
		{Username: "alice", PasswordHash: mustHash(t, "alice-pw", 4)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const slow = 80 * time.Millisecond
	x.slowest.Took.Store(int64(slow)) // as if the slowest hash took 80 ms to check
	start := time.Now()
	if _, ok, _ := Authenticate(context.Background(), x, "alice", "wrong", verifyHere, nil); ok {
		t.Fatal("authenticate(alice, wrong) = ok")
	}
	if took := time.Since(start); took < slow {
		t.Errorf("wrong password against a cost-4 hash took %v; want at least the slowest check's %v", took, slow)
	}
	// The right password is not held back.
	x.slowest.Took.Store(int64(time.Hour))
	if _, ok, _ := Authenticate(context.Background(), x, "alice", "alice-pw", verifyHere, nil); !ok {
		t.Errorf("authenticate(alice, right) failed")
	}
}

// mustHash returns the bcrypt hash of password at cost.
func mustHash(t testing.TB, password string, cost int) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestNewDirectoryDummyCost(t *testing.T) {
	users := []User{
		{Username: "a", PasswordHash: mustHash(t, "a", 5)},
		{Username: "b", PasswordHash: mustHash(t, "b", 4)},
		{Username: "c", PasswordHash: mustHash(t, "c", 5)},
	}
	d1, err := newUserIndex(users, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d1.slowest.Hash.Cost != 5 {
		t.Errorf("newUserIndex(costs 5, 4, 5).slowest = %s; want cost 5", d1.slowest.Shape)
	}

	// Same cost: the previous dummy hash is reused, not recomputed.
	d2, err := newUserIndex(users[:1], d1)
	if err != nil {
		t.Fatal(err)
	}
	if d2.slowest.Hash.Cost != 5 || d2.slowest != d1.slowest {
		t.Errorf("newUserIndex(cost 5, prev at 5): %s, slowest check reused %v; want cost 5, true", d2.slowest.Shape, d2.slowest == d1.slowest)
	}

	// A new cost: a new dummy hash at that cost.
	d3, err := newUserIndex(users[1:2], d2)
	if err != nil {
		t.Fatal(err)
	}
	if cost := d3.slowest.Hash.Cost; cost != 4 {
		t.Errorf("newUserIndex(cost 4, prev at 5): slowest at cost %d; want 4", cost)
	}

	if _, err := newUserIndex([]User{{Username: "x", PasswordHash: "nope"}}, nil); err == nil {
		t.Errorf("newUserIndex(bad hash) = nil error; want an error")
	}
}

func TestDirectoryAuthenticate(t *testing.T) {
	p72 := strings.Repeat("p", 72)
	users := []User{
		{Username: "alice", PasswordHash: mustHash(t, "right", 4), Name: "Alice", Groups: []string{"dev"}, Admin: true},
		{Username: "carol", PasswordHash: mustHash(t, "right", 4), Disabled: true},
		{Username: "dave", PasswordHash: mustHash(t, p72, 4)},
	}
	d, err := newUserIndex(users, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		username, password string
		ok                 bool
	}{
		{"alice", "right", true},
		{"alice", "wrong", false},
		{"alice", "", false},
		{"alice", "right\n", false},
		{"Alice", "right", false},
		{"nobody", "right", false},
		{"", "", false},
		{"carol", "right", false}, // disabled
		{"dave", p72, true},
		// bcrypt reads 72 bytes: it would accept these; authenticate must not.
		{"dave", p72 + "x", false},
		{"dave", p72 + strings.Repeat("y", 1000), false},
	} {
		u, ok, _ := Authenticate(context.Background(), d, tt.username, tt.password, verifyHere, nil)
		if ok != tt.ok || (u != nil) != tt.ok {
			t.Errorf("authenticate(%q, %q) = %v, %v; want ok %v", tt.username, tt.password, u, ok, tt.ok)
			continue
		}
		if ok && u.username != tt.username {
			t.Errorf("authenticate(%q, %q).info.Username = %q; want %q", tt.username, tt.password, u.username, tt.username)
		}
	}
	u, _, _ := Authenticate(context.Background(), d, "alice", "right", verifyHere, nil)
	wantInfo := `{"username":"alice","name":"Alice","email":"","groups":["dev"],"admin":true}` + "\n"
	if u == nil || string(u.appendInfoJSON(nil)) != wantInfo || !u.isAdmin() {
		t.Errorf("authenticate(alice).appendInfoJSON = %q; want %q", u.appendInfoJSON(nil), wantInfo)
	}
	if u != nil && bytes.Contains(u.appendInfoJSON(nil), []byte("$2")) {
		t.Errorf("appendInfoJSON %q holds a hash", u.appendInfoJSON(nil))
	}
}

func TestDirectorySessionUser(t *testing.T) {
	aliceHash, bobHash := mustHash(t, "a", 4), mustHash(t, "b", 4)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	before, err := newUserIndex([]User{
		{Username: "alice", PasswordHash: aliceHash},
		{Username: "bob", PasswordHash: bobHash},
		{Username: "carol", PasswordHash: aliceHash},
		{Username: "dave", PasswordHash: aliceHash},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := newUserIndex([]User{
		{Username: "alice", PasswordHash: mustHash(t, "a2", 4), TokensAfter: t0.Add(time.Hour), PasswordGeneration: 1}, // password changed
		{Username: "carol", PasswordHash: aliceHash, Disabled: true},
		{Username: "dave", PasswordHash: mustHash(t, "rehashed", 5)}, // rehashed on login: no cut-off
		// bob deleted
	}, before)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		d        *userIndex
		user     string
		issuedAt time.Time
		stamp    uint64 // the session's password generation (SessionGeneration)
		want     string // "" for nil
	}{
		{before, "alice", t0, 1, "alice"},
		{before, "bob", t0, 1, "bob"},
		{before, "nobody", t0, 1, ""},
		{before, "alice", t0, 2, ""},                              // a generation the user never had
		{after, "alice", t0, 1, ""},                               // before the cut-off
		{after, "alice", t0.Add(time.Hour), 2, "alice"},           // at it, on the new password
		{after, "alice", t0.Add(2 * time.Hour), 1, ""},            // after it, but on the old password: a login that raced the change
		{after, "alice", t0.Add(2 * time.Hour), 0, ""},            // no generation at all: fail closed
		{after, "alice", t0.Add(2 * time.Hour), 1 << 60, "alice"}, // a stamp of an earlier version: the cut-off alone judges
		{after, "alice", t0, 1 << 60, ""},
		{after, "bob", t0, 1, ""},
		{after, "carol", t0, 1, ""},
		{after, "dave", t0, 1, "dave"}, // another hash alone kills nothing: a rehash keeps the generation
	} {
		which := "before"
		if tt.d == after {
			which = "after"
		}
		d := &laggingDirectory{copy: tt.d, now: tt.d}
		u, err := SessionUser(context.Background(), d, tt.user, tt.issuedAt, tt.stamp)
		if err != nil {
			t.Fatal(err)
		}
		if got := userName(u); got != tt.want {
			t.Errorf("%s.SessionUser(%s issued %v on generation %d) = %q; want %q", which, tt.user, tt.issuedAt, tt.stamp, got, tt.want)
		}
	}

	// An instance whose copy (before) is older than the directory now
	// (after): a token its copy finds dead is judged on the directory now
	// (Recheck), so a token issued on the newer state lives; one its copy
	// finds live is answered so until it reloads (API.md's 5 s bound).
	for _, tt := range []struct {
		user     string
		issuedAt time.Time
		stamp    uint64
		want     string
		recheck  bool
	}{
		{"alice", t0.Add(time.Hour), 2, "alice", true}, // issued by another instance after the password change
		{"alice", t0.Add(2 * time.Hour), 3, "", true},  // a generation neither copy has
		{"alice", t0, 1, "alice", false},               // dead by the directory now; this instance notices at its reload
		{"nobody", t0, 1, "", true},
	} {
		d := &laggingDirectory{copy: before, now: after}
		u, err := SessionUser(context.Background(), d, tt.user, tt.issuedAt, tt.stamp)
		if err != nil {
			t.Fatal(err)
		}
		if got := userName(u); got != tt.want || (d.rechecks > 0) != tt.recheck {
			t.Errorf("SessionUser(%s issued %v on generation %d) with a lagging copy = %q after %d rechecks; want %q, rechecked %v", tt.user, tt.issuedAt, tt.stamp, got, d.rechecks, tt.want, tt.recheck)
		}
	}
}

// userName returns u's name, or "" for nil.
func userName(u *Account) string {
	if u == nil {
		return ""
	}
	return u.username
}

// A laggingDirectory is a directory whose Lookup answers from an
// instance's copy, which may be older than the backing's state now, which
// Recheck reads. Only the methods SessionUser calls are there.
type laggingDirectory struct {
	Directory
	copy, now *userIndex
	rechecks  int
}

func (d *laggingDirectory) Lookup(ctx context.Context, username string) (*Account, error) {
	return d.copy.Lookup(ctx, username)
}

func (d *laggingDirectory) Recheck(ctx context.Context, username string) (*Account, error) {
	d.rechecks++
	return d.now.Lookup(ctx, username)
}

// TestCutsBetween: a reload reports to the cut hook every user whose tokens
// died in it, with the time before which they died and the stamp of the
// user's password now, and no one else.
func TestCutsBetween(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0.Add(24 * time.Hour)
	rehashed := mustHash(t, "pw", 5)
	for _, tt := range []struct {
		name     string
		old, new User // new.Username "" for a deleted user
		want     time.Time
	}{
		{"unchanged", User{Username: "u", PasswordHash: testHash}, User{Username: "u", PasswordHash: testHash}, time.Time{}},
		{"deleted", User{Username: "u", PasswordHash: testHash}, User{}, now},
		{"newly disabled", User{Username: "u", PasswordHash: testHash}, User{Username: "u", PasswordHash: testHash, Disabled: true}, now},
		{"still disabled", User{Username: "u", PasswordHash: testHash, Disabled: true}, User{Username: "u", PasswordHash: testHash, Disabled: true}, time.Time{}},
		{"enabled again", User{Username: "u", PasswordHash: testHash, Disabled: true}, User{Username: "u", PasswordHash: testHash}, time.Time{}},
		{"disabled with a new cut-off", User{Username: "u", PasswordHash: testHash}, User{Username: "u", PasswordHash: testHash, Disabled: true, TokensAfter: t0}, now},
		{"first cut-off", User{Username: "u", PasswordHash: testHash}, User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, t0},
		{"later cut-off", User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, User{Username: "u", PasswordHash: testHash, TokensAfter: t0.Add(time.Hour)}, t0.Add(time.Hour)},
		{"same cut-off", User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, time.Time{}},
		{"earlier cut-off (an older file put back)", User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, User{Username: "u", PasswordHash: testHash, TokensAfter: t0.Add(-time.Hour)}, time.Time{}},
		{"rehashed, no new cut-off", User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, User{Username: "u", PasswordHash: rehashed, TokensAfter: t0}, time.Time{}},
		{"profile edited", User{Username: "u", PasswordHash: testHash}, User{Username: "u", PasswordHash: testHash, Name: "U", Admin: true}, time.Time{}},
		{"password changed", User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, User{Username: "u", PasswordHash: rehashed, TokensAfter: t0.Add(time.Hour), PasswordGeneration: 1}, t0.Add(time.Hour)},
		{"password generation moved back (an older file put back)", User{Username: "u", PasswordHash: rehashed, TokensAfter: t0, PasswordGeneration: 3}, User{Username: "u", PasswordHash: testHash, TokensAfter: t0, PasswordGeneration: 2}, t0},
		{"password generation moved, same cut-off", User{Username: "u", PasswordHash: testHash, TokensAfter: t0}, User{Username: "u", PasswordHash: testHash, TokensAfter: t0, PasswordGeneration: 1}, t0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			other := User{Username: "other", PasswordHash: testHash} // in both, unchanged
			old, err := newUserIndex([]User{tt.old, other}, nil)
			if err != nil {
				t.Fatal(err)
			}
			next := []User{other}
			if tt.new.Username != "" {
				next = append(next, tt.new)
			}
			next = append(next, User{Username: "added", PasswordHash: testHash, Disabled: true, TokensAfter: t0})
			cur, err := newUserIndex(next, old)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Cut{}
			cutsBetween(old, cur, now, func(c Cut) {
				if _, dup := got[c.Username]; dup {
					t.Errorf("cutsBetween reported %s twice", c.Username)
				}
				got[c.Username] = c
			})
			want := map[string]Cut{}
			if !tt.want.IsZero() {
				want["u"] = Cut{Username: "u", Before: tt.want, Stamp: SessionGeneration(tt.new.PasswordGeneration)}
				if tt.new.Username == "" {
					want["u"] = Cut{Username: "u", Before: tt.want} // deleted: no stamp
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cutsBetween(old, new) with u %s = %v; want %v", tt.name, got, want)
			}
		})
	}
	// The first load has nothing to compare with: it cuts nothing.
	first, err := newUserIndex([]User{{Username: "u", PasswordHash: testHash, Disabled: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cutsBetween(nil, first, now, func(c Cut) {
		t.Errorf("cutsBetween(nil, first load) reported %s; want no one", c.Username)
	})
}

func TestSessionGeneration(t *testing.T) {
	for _, tt := range []struct{ g, want uint64 }{
		{0, 1}, {1, 2}, {65534, 65535}, {65535, MaxSessionGeneration}, {65536, 1}, {1<<64 - 1, MaxSessionGeneration},
	} {
		if got := SessionGeneration(tt.g); got != tt.want {
			t.Errorf("SessionGeneration(%d) = %d; want %d", tt.g, got, tt.want)
		}
	}
}

func TestUserSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	if _, err := OpenFile(path, log); err == nil {
		t.Errorf("OpenFile(missing file) = nil error; want an error")
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFile(path, log); err == nil || !strings.Contains(err.Error(), path+": not a users file") {
		t.Errorf("OpenFile(broken file) = %v; want an error naming the file and the problem", err)
	}

	// mtime steps forward by a second at each write, so changed() sees every one.
	mtime := time.Now().Add(-time.Hour)
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		mtime = mtime.Add(time.Second)
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	names := func(d *userIndex) []string {
		var ns []string
		for n := range d.byName {
			ns = append(ns, n)
		}
		return ns
	}

	write(usersJSON(okAlice))
	s, err := OpenFile(path, log)
	if err != nil {
		t.Fatalf("OpenFile(good file) = %v", err)
	}
	first := s.index()
	if got := names(first); !reflect.DeepEqual(got, []string{"alice"}) {
		t.Errorf("users after load = %q; want [alice]", got)
	}
	if s.changed() {
		t.Errorf("changed() right after load = true; want false")
	}

	// A broken rewrite is refused; alice stays.
	write(`{"users": [` + okAlice)
	if !s.changed() {
		t.Errorf("changed() after a rewrite = false; want true")
	}
	if err := s.Reload(context.Background()); err == nil {
		t.Errorf("reload(broken file) = nil; want an error")
	}
	if s.index() != first {
		t.Errorf("dir() after a refused reload changed; want the previous directory")
	}
	// logReload logs the refusal once and marks the file seen.
	s.logReload("test", WatchHooks{})
	if s.index() != first || s.changed() {
		t.Errorf("after logReload(broken file): dir kept %v, changed() %v; want true, false", s.index() == first, s.changed())
	}

	// A good rewrite replaces the users; the dummy hash (cost 4 both times) is kept.
	write(usersJSON(entry("bob", hashField(testHash))))
	if !s.changed() {
		t.Errorf("changed() after a good rewrite = false; want true")
	}
	s.logReload("test", WatchHooks{})
	if got := names(s.index()); !reflect.DeepEqual(got, []string{"bob"}) {
		t.Errorf("users after reload = %q; want [bob]", got)
	}
	if s.index().slowest != first.slowest {
		t.Errorf("reload at the same cost made a new dummy hash; want the previous one")
	}
	if s.changed() {
		t.Errorf("changed() right after reload = true; want false")
	}

	// An atomic replace (a new inode) with the same size and mtime is a change too.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	tmp := filepath.Join(dir, "new.json")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if !s.changed() {
		t.Errorf("changed() after rename over the file = false; want true")
	}
	s.logReload("test", WatchHooks{})

	// A removed file is a change; the reload fails and the users stay.
	cur := s.index()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if !s.changed() {
		t.Errorf("changed() after remove = false; want true")
	}
	s.logReload("test", WatchHooks{})
	if s.index() != cur || s.changed() {
		t.Errorf("after logReload(removed file): dir kept %v, changed() %v; want true, false", s.index() == cur, s.changed())
	}
}

func FuzzParseUsers(f *testing.F) {
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
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		users, err := Parse(data)
		// The fast parser agrees with the reference on every input.
		strict, strictErr := parseUsersStrict(data)
		if fmt.Sprint(err) != fmt.Sprint(strictErr) || !reflect.DeepEqual(users, strict) {
			t.Fatalf("Parse(%q) = %+v, %v; want parseUsersStrict's %+v, %v", data, users, err, strict, strictErr)
		}
		if err != nil {
			if users != nil {
				t.Errorf("Parse(%q) = %v, %v; want nil users with an error", data, users, err)
			}
			return
		}
		if users == nil {
			t.Fatalf("Parse(%q) = nil, nil; want a non-nil list", data)
		}
		path := filepath.Join(t.TempDir(), "users.json")
		if err := WriteFile(path, users); err != nil {
			t.Fatalf("WriteFile(Parse(%q)) = %v", data, err)
		}
		got, err := ReadFile(path)
		if err != nil {
			t.Fatalf("ReadFile(WriteFile(Parse(%q))) = %v", data, err)
		}
		if !reflect.DeepEqual(got, users) {
			t.Fatalf("ReadFile(WriteFile(Parse(%q))) = %+v; want %+v", data, got, users)
		}
		// A streaming edit of the file as it was keeps every entry it does
		// not touch, and the index built while reading it is the users'.
		edited := filepath.Join(t.TempDir(), "users.json")
		if err := os.WriteFile(edited, data, 0o600); err != nil {
			t.Fatal(err)
		}
		d := NewFile(edited, slog.New(slog.DiscardHandler))
		if err := d.Reload(context.Background()); err != nil {
			t.Fatalf("Reload of %q = %v; want nil", data, err)
		}
		if x := d.index(); len(x.byName) != len(users) {
			t.Fatalf("index of %q has %d users; want %d", data, len(x.byName), len(users))
		}
		for _, u := range users {
			du, err := d.Lookup(context.Background(), u.Username)
			want := newDirUserForTest(t, u)
			if err != nil || du.storedHash != want.storedHash || !reflect.DeepEqual(du.Info(), want.Info()) || du.flags != want.flags ||
				du.cutoff != want.cutoff || du.work != want.work {
				t.Fatalf("Lookup(%q) in %q = %+v, %v; want %+v", u.Username, data, du, err, want)
			}
		}
		added := User{Username: "zz-fuzz-added", PasswordHash: testHash, Groups: []string{}}
		if findUser(users, added.Username) >= 0 {
			return
		}
		if err := d.Add(context.Background(), added); err != nil {
			t.Fatalf("Add to %q = %v", data, err)
		}
		got, err = ReadFile(edited)
		if want := append(users, added); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("ReadFile after Add to %q = %+v, %v; want %+v", data, got, err, want)
		}
	})
}

// newDirUserForTest is NewAccount(u), which must not fail.
func newDirUserForTest(t *testing.T, u User) *Account {
	t.Helper()
	du, err := NewAccount(&u)
	if err != nil {
		t.Fatal(err)
	}
	return du
}

// checkMode fails t unless the file at path has permission bits mode.
func checkMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Errorf("os.Stat(%q) = %v", path, err)
		return
	}
	if got := info.Mode().Perm(); got != mode {
		t.Errorf("mode of %s = %v; want %v", path, got, mode)
	}
}

// dirNames returns the sorted names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// verifyHere checks a password on the caller's goroutine, as a nil pool does.
var verifyHere = (*password.Pool)(nil).Verify
