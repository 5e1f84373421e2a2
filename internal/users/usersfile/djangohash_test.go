package usersfile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// TestDjangoHashKept: a users file entry's django_hash loads (the fast
// parser's path as well as the reference's), survives every rewrite of the
// file by another change, and a malformed one refuses the load, naming
// the field.
func TestDjangoHashKept(t *testing.T) {
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	fp := users.DjangoHashFingerprint(key, "pbkdf2_sha256$600000$salt$hash")
	if users.DjangoHashKeyID(fp) != key.ID() || strings.Contains(fp, "salt") {
		t.Fatalf("DjangoHashFingerprint = %q; want %s:HEX, without the hash", fp, key.ID())
	}
	hash := "$2a$04$QiGvq5sFAv6cEEA9pzq5T.2cQg6lLhAq5a0rnGBCUsEObOQyt2uWW"
	for _, tt := range []struct {
		name, entry string
	}{
		{"fast parser", `{"username":"ada","password_hash":"` + hash + `","django_hash":"` + fp + `"}`},
		{"reference parser", `{"username": "ada", "password_hash": "` + hash + `", "django_hash": "` + fp + `", "name": "\u0041da"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "users.json")
			if err := os.WriteFile(path, []byte(`{"users": [`+tt.entry+`]}`), 0o600); err != nil {
				t.Fatal(err)
			}
			dir, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			list, err := dir.List(context.Background())
			if err != nil || len(list) != 1 || list[0].DjangoHash != fp {
				t.Fatalf("List = %+v, %v; want ada with django_hash %s", list, err, fp)
			}
			if err := dir.Update(context.Background(), "ada", func(u *users.User) error { u.Email = "ada@example.com"; return nil }); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(raw), `"django_hash": "`+fp+`"`) && !strings.Contains(string(raw), `"django_hash":"`+fp+`"`) {
				t.Errorf("users file after an update = %s (%v); want django_hash kept", raw, err)
			}
		})
	}
	for _, bad := range []string{"abc", strings.ToUpper(fp), fp[:len(fp)-1], strings.Replace(fp, ":", "-", 1)} {
		list := []users.User{{Username: "ada", PasswordHash: hash, DjangoHash: bad}}
		if err := users.Validate(list); err == nil || !strings.Contains(err.Error(), "django_hash") {
			t.Errorf("Validate(django_hash %q) = %v; want an error naming django_hash", bad, err)
		}
	}
}
