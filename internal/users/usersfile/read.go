package usersfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"authsvc/internal/password"
	"authsvc/internal/users"
)

// Parse decodes and validates a users file. Its errors name the entry
// and the field at fault.
func Parse(data []byte) ([]users.User, error) {
	return decodeUsers(bytes.NewReader(data))
}

// decodeUsers reads and validates a users file from r in one pass
// (parse.go), falling back to parseUsersStrict where only it can say
// exactly what is wrong.
func decodeUsers(r io.ReadSeeker) ([]users.User, error) {
	list := []users.User{}
	err := scanUsers(r, collectUsers(&list))
	switch {
	case err == errStrict:
		return decodeUsersStrict(r)
	case err != nil:
		return nil, err
	}
	return list, nil
}

// decodeUsersStrict reads all of r from its start and parses it with
// parseUsersStrict.
func decodeUsersStrict(r io.ReadSeeker) ([]users.User, error) {
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return parseUsersStrict(data)
}

// collectUsers returns a sink that appends each entry to users, after the
// checks parseUsersStrict makes of a decoded entry: its name unique, its
// hash valid.
func collectUsers(list *[]users.User) entrySink {
	seen := make(map[string]bool)
	var digests tokenDigests
	return func(i int, e *rawEntry, _ []byte) error {
		if err := users.CheckUsername(string(e.username)); err != nil {
			return fmt.Errorf("users[%d]: %w", i, err)
		}
		if seen[string(e.username)] {
			return errDuplicate
		}
		u := e.user()
		seen[u.Username] = true
		if _, err := password.ParseHash(u.PasswordHash); err != nil {
			return fmt.Errorf("%s: password_hash: %v", entryAt(i, u.Username), err)
		}
		if err := digests.add(i, u.Username, u.AccessTokens, nil); err != nil {
			return err
		}
		*list = append(*list, u)
		return nil
	}
}

// parseUsersStrict is the reference parser of a users file, built on
// encoding/json: what the fast parser must agree with, and what reports
// what it does not take.
func parseUsersStrict(data []byte) ([]users.User, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	// The entries are decoded one by one so that errors can name them.
	var doc struct {
		Users []json.RawMessage `json:"users"`
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not a users file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not a users file: data after the top-level object")
	}
	if err := checkFieldNames(data, "users"); err != nil {
		return nil, fmt.Errorf("not a users file: %w", err)
	}
	if doc.Users == nil { // null, {} or {"users": null}
		return nil, errors.New(`not a users file: no "users" array`)
	}
	list := make([]users.User, len(doc.Users))
	seen := make(map[string]int, len(doc.Users))
	var digests tokenDigests
	for i := range list {
		u, err := decodeEntryStrict(i, doc.Users[i])
		if err != nil {
			return nil, err
		}
		if j, dup := seen[u.Username]; dup {
			return nil, fmt.Errorf("%s: username: duplicate of users[%d]", entryAt(i, u.Username), j)
		}
		seen[u.Username] = i
		if _, err := password.ParseHash(u.PasswordHash); err != nil {
			return nil, fmt.Errorf("%s: password_hash: %v", entryAt(i, u.Username), err)
		}
		if err := digests.add(i, u.Username, u.AccessTokens, nil); err != nil {
			return nil, err
		}
		if u.Groups == nil {
			u.Groups = []string{}
		}
		list[i] = u
	}
	return list, nil
}

// decodeEntryStrict decodes users file entry i from raw with encoding/json
// and checks its username and field names: the reference for an entry.
func decodeEntryStrict(i int, raw []byte) (users.User, error) {
	var u users.User
	at := fmt.Sprintf("users[%d]", i)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&u); err != nil {
		return users.User{}, fmt.Errorf("%s: %w", at, err)
	}
	if err := users.CheckUsername(u.Username); err != nil {
		return users.User{}, fmt.Errorf("%s: %w", at, err)
	}
	if err := checkFieldNames(raw, userFields...); err != nil {
		return users.User{}, fmt.Errorf("%s: %w", entryAt(i, u.Username), err)
	}
	// A token whose record cannot be judged (no digest, no expiry) must
	// not load; only entries with "access_tokens" come here to be checked,
	// since the fast decoder leaves them all to this one.
	if err := users.CheckAccessTokens(u.AccessTokens); err != nil {
		return users.User{}, fmt.Errorf("%s: %v", entryAt(i, u.Username), err)
	}
	if len(u.AccessTokens) == 0 {
		u.AccessTokens = nil // [] is written as nothing: as read back
	}
	if err := users.CheckResetLink(u.ResetLink); err != nil {
		return users.User{}, fmt.Errorf("%s: %v", entryAt(i, u.Username), err)
	}
	return u, nil
}

// userFields are the names of a users file entry's fields.
var userFields = func() []string {
	var names []string
	for f := range reflect.TypeFor[users.User]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		names = append(names, name)
	}
	return names
}()

// checkFieldNames returns an error naming the first field of the JSON object
// obj that is not exactly one of names, or that comes twice. encoding/json
// matches names regardless of case (and folds ſ to s, K to k), so a
// hand-edited "ADMIN": true would otherwise make an admin, and of two
// "admin" fields the last would silently win.
func checkFieldNames(obj []byte, names ...string) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	seen := make(map[string]bool, len(names))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		switch {
		case !slices.Contains(names, name):
			return fmt.Errorf("unknown field %q", name)
		case seen[name]:
			return fmt.Errorf("duplicate field %q", name)
		}
		seen[name] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return err
		}
	}
	return nil
}

// Read reads and validates the users file at path.
func Read(path string) ([]users.User, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	list, err := decodeUsers(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return list, nil
}
