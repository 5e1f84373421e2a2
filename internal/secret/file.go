package secret

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// Errors of Load, beside fs.ErrNotExist for a missing file.
var (
	// ErrMalformedFile: the file is not 64 hex characters and at most one
	// newline.
	ErrMalformedFile = errors.New("malformed secret key file")
	// ErrFileMode: the file is not a regular file, or its mode lets others
	// than its owner and group read it, or others than its owner write it.
	ErrFileMode = errors.New("secret key file too open")
)

// maxFile is the longest valid key file: 64 hex characters and "\r\n".
const maxFile = 2*Size + 2

// Load reads the key file at path: exactly 64 hex characters (either
// case), then nothing, "\n" or "\r\n".
//
// It refuses a file that is not regular, that anyone but its owner and
// its group can read, or that anyone but its owner can write
// (ErrFileMode). OpenSSH refuses a private key readable by group or
// others; group read is allowed here, as PostgreSQL allows it for a key
// file owned by root, because that is how a key is shared with the
// service's account through a group (and how Kubernetes' fsGroup mounts a
// secret). The file authsvc creates is mode 0600.
//
// Errors name the file and the problem (with a byte position, never a
// byte) and never hold any of the content; a missing file is
// fs.ErrNotExist.
func Load(path string) (Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return Key{}, fileError(path, err)
	}
	defer f.Close()
	// The opened file's own mode, not a second look-up of the path.
	fi, err := f.Stat()
	if err != nil {
		return Key{}, fileError(path, err)
	}
	if !fi.Mode().IsRegular() {
		return Key{}, fmt.Errorf("secret key file %s: %w: not a regular file", path, ErrFileMode)
	}
	if perm := fi.Mode().Perm(); perm&0o027 != 0 && runtime.GOOS != "windows" {
		return Key{}, fmt.Errorf("secret key file %s: %w: mode %#o lets others than its owner read it or others than its owner and group write it (chmod 600)", path, ErrFileMode, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return Key{}, fileError(path, err)
	}
	raw, problem := parse(data)
	if problem != "" {
		return Key{}, fmt.Errorf("secret key file %s: %w: %s; want 64 hex characters and at most one newline", path, ErrMalformedFile, problem)
	}
	return newKey(raw), nil
}

// parse decodes a key file's content, or says what is wrong with it
// without quoting it.
func parse(data []byte) (raw []byte, problem string) {
	if len(data) > maxFile {
		return nil, fmt.Sprintf("longer than %d bytes", maxFile)
	}
	text := data
	switch {
	case len(text) >= 2 && text[len(text)-2] == '\r' && text[len(text)-1] == '\n':
		text = text[:len(text)-2]
	case len(text) >= 1 && text[len(text)-1] == '\n':
		text = text[:len(text)-1]
	}
	if len(text) == 0 {
		return nil, "empty"
	}
	for i, c := range text {
		if !isHex(c) {
			return nil, fmt.Sprintf("byte %d is not a hex digit", i+1)
		}
	}
	if len(text) != 2*Size {
		return nil, fmt.Sprintf("%d hex characters", len(text))
	}
	raw = make([]byte, Size)
	if _, err := hex.Decode(raw, text); err != nil {
		return nil, "not hex" // unreachable: every byte was checked
	}
	return raw, ""
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Write creates the key file at path holding k (64 lowercase hex
// characters and a newline, mode 0600), atomically: the key is written in
// full to a temporary file in the same directory, synced, then linked to
// path, and the directory is synced. It never replaces a file: when path
// exists it fails with fs.ErrExist, because a replaced key would lose
// every value sealed under it (a rotation writes the new key elsewhere
// and keeps the old one in the Keyring).
func Write(path string, k Key) error {
	if k.b() == nil {
		return fmt.Errorf("secret key file %s: %w", path, ErrNoKey)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp") // mode 0600
	if err != nil {
		return fileError(path, err)
	}
	defer os.Remove(tmp.Name()) // path, once linked, keeps the file
	text := make([]byte, 2*Size+1)
	hex.Encode(text, k.b().raw[:])
	text[2*Size] = '\n'
	_, err = tmp.Write(text)
	if err == nil {
		err = tmp.Chmod(0o600)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileError(path, err)
	}
	// A link, unlike a rename, fails when path exists, and unlike
	// O_EXCL it never shows a half-written file to a reader.
	if err := os.Link(tmp.Name(), path); err != nil {
		return fileError(path, err)
	}
	if err := SyncDir(dir); err != nil {
		return fileError(path, err)
	}
	return nil
}

// LoadOrCreate loads the key file at path, or creates it with a new key
// when it does not exist; created reports which. Processes and goroutines
// that call it at the same moment end with the same key: one of them
// creates the file (Write never replaces one) and the others load it.
func LoadOrCreate(path string) (key Key, created bool, err error) {
	key, err = Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	key, err = Generate()
	if err != nil {
		return Key{}, false, err
	}
	err = Write(path, key)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it since our Load: theirs is the key.
		key, err = Load(path)
		return key, false, err
	}
	if err != nil {
		return Key{}, false, err
	}
	return key, true, nil
}

// SyncDir syncs the directory dir, so that a file just created, linked
// or renamed in it survives a crash. Every durable write of authsvc's own
// files ends with it: the key file's here, the users file's and its
// cut-offs' in package usersfile.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// fileError names the key file once: the path errors of package os would
// repeat it, or name the temporary file.
func fileError(path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	if errors.Is(err, fs.ErrPermission) {
		// Most often a key made by another user: in a container, the
		// host's file keeps its host owner and mode.
		return fmt.Errorf("secret key file %s: %w (authsvc runs as uid %d: make the file readable by it, e.g. mode 0640 in a group it belongs to; docker compose: see the first lines of docker-compose.yml)", path, err, os.Getuid())
	}
	return fmt.Errorf("secret key file %s: %w", path, err)
}
