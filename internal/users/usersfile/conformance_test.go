package usersfile_test

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
	"authsvc/internal/users/userstest"
)

func TestFileDirectoryConformance(t *testing.T) {
	t.Parallel()
	userstest.Run(t, func(t *testing.T) func() users.Directory {
		path := filepath.Join(t.TempDir(), "users.json")
		if err := usersfile.Write(path, nil); err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		return func() users.Directory {
			d, err := usersfile.Open(path, log)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	})
}
