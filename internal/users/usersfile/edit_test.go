package usersfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"authsvc/internal/servertest"
	"authsvc/internal/users"
)

// TestEditCopiesEntriesVerbatim: an edit copies the entries it does not
// touch byte for byte, whatever their layout, and writes the one it
// touches as Write would.
func TestEditCopiesEntriesVerbatim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	alice := `{"username":"alice",  "password_hash": "` + testHash + `", "\u0061dmin": true, "name": "A\u003cB"}`
	carol := "{\n\t\"username\": \"carol\",\n\t\"password_hash\": \"" + testHash + "\", \"groups\": null}"
	doc := "{\"users\": [" + alice + ",\n  " + entry("bob", hashField(testHash)) + "," + carol + "]}\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	d := New(path, slog.New(slog.DiscardHandler))
	if err := d.Update(context.Background(), "bob", func(u *users.User) error { u.Name = "Bob"; return nil }); err != nil {
		t.Fatalf("Update(bob) = %v", err)
	}
	if err := d.Add(context.Background(), users.User{Username: "dave", PasswordHash: testHash}); err != nil {
		t.Fatalf("Add(dave) = %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bob := "{\n      \"username\": \"bob\",\n      \"password_hash\": \"" + testHash + "\",\n      \"name\": \"Bob\",\n      \"email\": \"\",\n" +
		"      \"groups\": [],\n      \"admin\": false,\n      \"disabled\": false\n    }"
	for _, want := range []string{"{\n  \"users\": [\n    " + alice + ",\n    " + bob + ",\n    " + carol + ",\n    {\n      \"username\": \"dave\"", "\n  ]\n}\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("users file after Update(bob), Add(dave) = %s; want it to hold %q", data, want)
		}
	}
	list, err := Read(path)
	if err != nil || len(list) != 4 || !list[0].Admin || list[0].Name != "A<B" || list[1].Name != "Bob" || list[3].Username != "dave" {
		t.Errorf("Read after the edits = %+v, %v; want alice (admin, A<B), Bob, carol, dave", list, err)
	}
}

// TestEditLayoutUnchanged: editing a file Write wrote gives the
// file Write would write for the result.
func TestEditLayoutUnchanged(t *testing.T) {
	dir := t.TempDir()
	path := writeManyUsers(t, dir, 30, nil)
	d := New(path, slog.New(slog.DiscardHandler))
	if err := d.Delete(context.Background(), "user0007"); err != nil {
		t.Fatal(err)
	}
	if err := d.Add(context.Background(), users.User{Username: "zed", PasswordHash: testHash, Groups: []string{"dev"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	list, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "want.json")
	if err := Write(want, list); err != nil {
		t.Fatal(err)
	}
	if w, _ := os.ReadFile(want); !bytes.Equal(got, w) {
		t.Errorf("file after Delete and Add =\n%s\nwant Write's\n%s", got, w)
	}
	if len(list) != 30 || findUser(list, "user0007") >= 0 || list[29].Username != "zed" {
		t.Errorf("users after Delete(user0007), Add(zed) = %d, user0007 at %d, last %q; want 30, -1, zed", len(list), findUser(list, "user0007"), list[29].Username)
	}
	// Down to none and back.
	for _, u := range list {
		if err := d.Delete(context.Background(), u.Username); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(path); string(got) != "{\n  \"users\": []\n}\n" {
		t.Errorf("file after deleting everyone = %q; want Write's empty file", got)
	}
}

// TestEditErrors: a file that does not validate is refused before the
// edit's own errors, and nothing is written either way.
func TestEditErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	d := New(path, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	for _, tt := range []struct {
		name, doc string
		edit      func() error
		want      string
	}{
		{"taken, then a bad hash", usersJSON(okAlice, entry("bob", hashField("hunter2"))),
			func() error { return d.Add(ctx, users.User{Username: "alice", PasswordHash: testHash}) },
			path + `: users[1] ("bob"): password_hash: not a supported password hash`},
		{"taken", usersJSON(okAlice, entry("bob", hashField(testHash))),
			func() error { return d.Add(ctx, users.User{Username: "bob", PasswordHash: testHash}) },
			`user "bob": user already exists`},
		{"duplicate names", usersJSON(okAlice, entry("bob", hashField(testHash)), entry("bob", hashField(testHash))),
			func() error { return d.Add(ctx, users.User{Username: "carol", PasswordHash: testHash}) },
			path + `: users[2] ("bob"): username: duplicate of users[1]`},
		{"bad hash, then a bad name", usersJSON(entry("alice", hashField("hunter2")), entry("bob smith", hashField(testHash))),
			func() error { return d.Add(ctx, users.User{Username: "carol", PasswordHash: testHash}) },
			path + `: users[0] ("alice"): password_hash: not a supported password hash`},
		{"bad name, then a bad hash", usersJSON(okAlice, entry("bob smith", hashField(testHash)), entry("carol", hashField("hunter2"))),
			func() error { return d.Add(ctx, users.User{Username: "dave", PasswordHash: testHash}) },
			path + `: users[1]: username "bob smith"`},
		{"missing", usersJSON(okAlice),
			func() error { return d.Delete(ctx, "bob") },
			`user "bob": no such user`},
		{"change fails", usersJSON(okAlice),
			func() error { return d.Update(ctx, "alice", func(*users.User) error { return errors.New("refused") }) },
			`refused`},
		{"broken JSON", usersJSON(okAlice) + "x",
			func() error { return d.Update(ctx, "alice", func(*users.User) error { return nil }) },
			path + `: not a users file: data after the top-level object`},
		{"unknown field", usersJSON(okAlice, entry("bob", hashField(testHash), `"Admin": true`)),
			func() error { return d.Delete(ctx, "alice") },
			path + `: users[1] ("bob"): unknown field "Admin"`},
	} {
		if err := os.WriteFile(path, []byte(tt.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := tt.edit(); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: edit = %v; want %q…", tt.name, err, tt.want)
		}
		if data, _ := os.ReadFile(path); string(data) != tt.doc {
			t.Errorf("%s: refused edit changed the file to %q", tt.name, data)
		}
		if names := servertest.DirNames(t, filepath.Dir(path)); !reflect.DeepEqual(names, []string{"users.json", "users.json.lock"}) {
			t.Errorf("%s: files after a refused edit = %q; want users.json and its lock", tt.name, names)
		}
	}
}

// TestEditHashCheckedLate: hashes are checked beside the reading, in
// batches; a refused one far into the file still names its entry, and
// nothing is written.
func TestEditHashCheckedLate(t *testing.T) {
	path := writeManyUsers(t, t.TempDir(), 3000, func(u *users.User) {
		if u.Username == "user2500" || u.Username == "user2900" {
			u.PasswordHash = "$2a$03$" + testHash[7:]
		}
	})
	before, _ := os.ReadFile(path)
	d := New(path, slog.New(slog.DiscardHandler))
	err := d.Update(context.Background(), "user0001", func(u *users.User) error { u.Name = "x"; return nil })
	if want := path + `: users[2500] ("user2500"): password_hash: bcrypt cost 3 is below the minimum 4`; err == nil || err.Error() != want {
		t.Errorf("Update in a file with a bad hash at users[2500] = %v; want %q", err, want)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("refused Update changed the file")
	}
}

// TestAddAllStreaming: AddAll adds the free names once each, in order, and
// reports the taken ones, in one write.
func TestAddAllStreaming(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.json")
	if err := os.WriteFile(path, []byte(usersJSON(okAlice, entry("bob", hashField(testHash)))), 0o600); err != nil {
		t.Fatal(err)
	}
	d := New(path, slog.New(slog.DiscardHandler))
	add := []users.User{{Username: "carol", PasswordHash: testHash}, {Username: "bob", PasswordHash: testHash, Name: "Other"},
		{Username: "carol", PasswordHash: testHash, Name: "Again"}, {Username: "dave", PasswordHash: testHash}}
	existing, err := d.AddAll(context.Background(), add)
	if want := []string{"bob", "carol"}; err != nil || !reflect.DeepEqual(existing, want) {
		t.Errorf("AddAll = %q, %v; want %q, nil", existing, err, want)
	}
	list, err := Read(path)
	var names []string
	for _, u := range list {
		names = append(names, u.Username+"/"+u.Name)
	}
	if want := []string{"alice/", "bob/", "carol/", "dave/"}; err != nil || !reflect.DeepEqual(names, want) {
		t.Errorf("users after AddAll = %q, %v; want %q", names, err, want)
	}
}

// TestWriteFileAsMarshalIndent: Write, which streams entry by entry,
// writes json.MarshalIndent's file for the whole document, byte for byte:
// nil groups as null, HTML characters escaped, no users as [].
func TestWriteFileAsMarshalIndent(t *testing.T) {
	dir := t.TempDir()
	when := time.Date(2026, 11, 25, 3, 4, 5, 6, time.UTC)
	many := make([]users.User, 3000) // past a write chunk
	for i := range many {
		many[i] = users.User{Username: fmt.Sprintf("user%04d", i), PasswordHash: testHash, Name: strings.Repeat("n", i%300), Groups: []string{"dev"}}
	}
	for _, tt := range []struct {
		name  string
		users []users.User
	}{
		{"nil", nil},
		{"none", []users.User{}},
		{"odd fields", []users.User{
			{Username: "alice", PasswordHash: testHash, Name: "A<B> & \u2028 zoë", Email: "a@example.com"},
			{Username: "bob", PasswordHash: testHash, Groups: []string{}, Admin: true, Disabled: true, TokensAfter: when, PasswordGeneration: 7, FailuresAfter: when},
		}},
		{"many", many},
	} {
		doc := struct {
			Users []users.User `json:"users"`
		}{tt.users}
		if doc.Users == nil {
			doc.Users = []users.User{}
		}
		want, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		path := filepath.Join(dir, tt.name+".json")
		if err := Write(path, tt.users); err != nil {
			t.Fatalf("Write(%s) = %v", tt.name, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Write(%s) =\n%.2000s\nwant MarshalIndent's\n%.2000s", tt.name, got, want)
		}
		for _, u := range tt.users {
			if u.Username == "alice" && u.Groups != nil {
				t.Errorf("Write made alice's nil groups %q in its argument", u.Groups)
			}
		}
	}
}

// TestEditChecksHashesNotLoaded: an edit through a loaded directory skips
// parsing only the hashes it loaded: one another writer put in the file
// since, and that a load would refuse, refuses the edit.
func TestEditChecksHashesNotLoaded(t *testing.T) {
	path := writeManyUsers(t, t.TempDir(), 10, nil)
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(testHash, "$04$", "$03$", 1) // bcrypt below its least cost
	i := bytes.Index(data, []byte(testHash))
	data = append(data[:i:i], append([]byte(bad), data[i+len(testHash):]...)...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	err = d.Update(context.Background(), "user0005", func(u *users.User) error { u.Name = "Five"; return nil })
	if err == nil || !strings.Contains(err.Error(), `users[0] ("user0000"): password_hash`) {
		t.Errorf("Update through a loaded directory of a file with a bad hash since = %v; want user0000's password_hash refused", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Errorf("users file written by an edit that was refused")
	}
}

// BenchmarkEditLoaded100k: one UpdateAll of one user in a loaded
// directory of 100,000 users: the rewrite, its checks and the reload.
// B/op is what one such write adds to the server's heap, for the GC to
// collect: before loaded hashes were skipped, every hash parsed again.
func BenchmarkEditLoaded100k(b *testing.B) {
	path := writeManyUsers(b, b.TempDir(), 100_000, nil)
	d, err := Open(path, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		failed, err := d.UpdateAll(context.Background(), map[string]func(*users.User) error{
			"user0005": func(u *users.User) error { u.Name = fmt.Sprint(i); return nil },
		})
		if err != nil || len(failed) != 0 {
			b.Fatal(failed, err)
		}
	}
}
