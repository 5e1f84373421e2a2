package usersfile

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"authsvc/internal/servertest"
	"authsvc/internal/users"
)

func TestWriteUsersFileRoundTrip(t *testing.T) {
	list := []users.User{
		{Username: "alice", PasswordHash: testHash, Name: "Alice <A&B>", Email: "alice@example.com", Groups: []string{"dev"}, Admin: true},
		{Username: "bob", PasswordHash: testHash, Name: "Bøb \u2028", Groups: []string{}, Disabled: true},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	// An existing file is replaced, and its mode with it.
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, list := range [][]users.User{list, nil, list} {
		if err := Write(path, list); err != nil {
			t.Fatalf("Write(%q, %d users) = %v; want nil", path, len(list), err)
		}
		got, err := Read(path)
		want := list
		if want == nil {
			want = []users.User{}
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Read after Write(%+v) = %+v, %v; want the same", list, got, err)
		}
		servertest.CheckMode(t, path, 0o600)
		if names := servertest.DirNames(t, dir); !reflect.DeepEqual(names, []string{"users.json"}) {
			t.Errorf("files in dir after Write = %q; want only users.json", names)
		}
	}
}

func TestWriteUsersFileError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "users.json")
	if err := Write(path, nil); err == nil {
		t.Errorf("Write(%q) = nil; want an error", path)
	}
}

func TestEditUsers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	add := func(list []users.User) ([]users.User, error) {
		return append(list, users.User{Username: "alice", PasswordHash: testHash, Groups: []string{}}), nil
	}
	if err := Edit(path, false, add); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Edit(missing file, create=false) = %v; want a does-not-exist error", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("after Edit(create=false): stat = %v; want not exist", err)
	}
	if err := Edit(path, true, add); err != nil {
		t.Fatalf("Edit(missing file, create=true) = %v; want nil", err)
	}
	if err := Edit(path, false, func([]users.User) ([]users.User, error) {
		return nil, fmt.Errorf("refused")
	}); err == nil || err.Error() != "refused" {
		t.Errorf("Edit(edit fails) = %v; want refused", err)
	}
	got, err := Read(path)
	if err != nil || len(got) != 1 || got[0].Username != "alice" {
		t.Errorf("Read after a failed edit = %+v, %v; want alice alone", got, err)
	}
	// A broken file is never overwritten by an edit.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Edit(path, true, add); err == nil {
		t.Errorf("Edit(broken file) = nil; want an error")
	}
	if data, _ := os.ReadFile(path); string(data) != "{" {
		t.Errorf("broken file after Edit = %q; want it untouched", data)
	}
}
