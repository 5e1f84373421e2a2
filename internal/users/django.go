package users

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"authsvc/internal/password"
)

// A djangoRecord is one record of `manage.py dumpdata`'s JSON output.
type djangoRecord struct {
	Model  string          `json:"model"`
	PK     json.RawMessage `json:"pk"`
	Fields json.RawMessage `json:"fields"`
}

// djangoUser is the fields of an auth.user record that authsvc maps.
type djangoUser struct {
	Username    string          `json:"username"`
	Password    string          `json:"password"`
	FirstName   string          `json:"first_name"`
	LastName    string          `json:"last_name"`
	Email       string          `json:"email"`
	IsActive    *bool           `json:"is_active"`
	IsStaff     bool            `json:"is_staff"`
	IsSuperuser bool            `json:"is_superuser"`
	Groups      json.RawMessage `json:"groups"`
}

// DjangoSkip is a record the importer leaves out, and why.
type DjangoSkip struct {
	at, reason string
}

func (s DjangoSkip) String() string { return s.at + ": " + s.reason }

// ParseDjangoDump maps the auth.user records of a dumpdata JSON array to
// users (API.md "Users"): username (NFKC), password hash as is, name from
// first and last name, email, disabled when not active or the password is
// unusable, admin when staff or superuser, groups by name. Groups may be
// natural keys (--natural-foreign, as API.md asks) or primary keys of the
// dump's own auth.group records. Records of other models are passed over;
// a user record that cannot be mapped is skipped with its reason. now is
// every imported user's cut-off: no token of an earlier user of the same
// name lives on.
//
// Django's legacy fast hashes (sha1, md5, unsalted_sha1, unsalted_md5) are
// never kept as they are: each is wrapped in the default hash policy's hash
// of its digest (password.DjangoLegacy), what `user import` has, since it
// takes no hash flags.
func ParseDjangoDump(data []byte, now time.Time) ([]User, []DjangoSkip, error) {
	return ParseDjangoDumpPolicy(data, now, password.DefaultHashPolicy())
}

// ParseDjangoDumpPolicy is ParseDjangoDump wrapping the legacy fast hashes
// under policy. The wrapping costs one policy hash each, run on every core.
func ParseDjangoDumpPolicy(data []byte, now time.Time, policy password.HashPolicy) ([]User, []DjangoSkip, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return nil, nil, errors.New("not a dumpdata JSON array (run dumpdata with --format json, the default)")
	}
	var records []djangoRecord
	if err := json.Unmarshal(data, &records); err != nil {
		return nil, nil, fmt.Errorf("not a dumpdata JSON array: %v", err)
	}
	groupsByPK := make(map[string]string)
	for _, r := range records {
		if r.Model != "auth.group" {
			continue
		}
		var g struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(r.Fields, &g) == nil && g.Name != "" {
			groupsByPK[string(bytes.TrimSpace(r.PK))] = g.Name
		}
	}
	var users []User
	var skipped []DjangoSkip
	var legacy []legacyHash
	seen := make(map[string]string)
	for i, r := range records {
		if r.Model != "auth.user" {
			continue
		}
		at := fmt.Sprintf("record %d (auth.user)", i)
		var f djangoUser
		if err := json.Unmarshal(r.Fields, &f); err != nil {
			skipped = append(skipped, DjangoSkip{at, "fields: " + err.Error()})
			continue
		}
		username := NormalizeUsername(f.Username)
		at = fmt.Sprintf("record %d (auth.user %q)", i, username)
		if err := CheckUsername(username); err != nil {
			skipped = append(skipped, DjangoSkip{at, err.Error()})
			continue
		}
		if first, dup := seen[username]; dup {
			skipped = append(skipped, DjangoSkip{at, "username: a second record for it, after " + first})
			continue
		}
		// A legacy fast form is wrapped below, once the record is known to
		// be imported; anything else is kept as it is.
		old, isLegacy, err := password.ParseDjangoLegacy(f.Password)
		usable := true
		if err == nil && !isLegacy {
			var hash *password.Hash
			hash, err = password.ParseHash(f.Password)
			usable = err == nil && hash.Usable()
		}
		if err != nil {
			skipped = append(skipped, DjangoSkip{at, "password: " + err.Error()})
			continue
		}
		groups, err := djangoGroups(f.Groups, groupsByPK)
		if err != nil {
			skipped = append(skipped, DjangoSkip{at, "groups: " + err.Error()})
			continue
		}
		if err := CheckProfile(strings.TrimSpace(f.FirstName+" "+f.LastName), f.Email, groups); err != nil {
			skipped = append(skipped, DjangoSkip{at, err.Error()})
			continue
		}
		seen[username] = at
		active := f.IsActive == nil || *f.IsActive // Django's default
		users = append(users, User{
			Username:     username,
			PasswordHash: f.Password,
			Name:         strings.TrimSpace(f.FirstName + " " + f.LastName),
			Email:        f.Email,
			Groups:       groups,
			Admin:        f.IsStaff || f.IsSuperuser,
			Disabled:     !active || !usable,
			TokensAfter:  now,
		})
		if isLegacy {
			legacy = append(legacy, legacyHash{user: len(users) - 1, hash: old})
		}
	}
	if err := wrapLegacy(users, legacy, policy); err != nil {
		return nil, nil, err
	}
	return users, skipped, nil
}

// A legacyHash is a user's legacy fast hash, still to be wrapped.
type legacyHash struct {
	user int // index in the users
	hash *password.DjangoLegacy
}

// wrapLegacy sets each legacy user's hash to its wrapping under policy, on
// as many goroutines as there are cores: a policy hash is tens of
// milliseconds, and an old project may hold many legacy hashes.
func wrapLegacy(users []User, legacy []legacyHash, policy password.HashPolicy) error {
	jobs := make(chan legacyHash)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(legacy)) {
		wg.Go(func() {
			for j := range jobs {
				wrapped, err := j.hash.Wrap(policy)
				if err != nil {
					select {
					case errs <- fmt.Errorf("wrapping a legacy Django hash: %w", err):
					default:
					}
					continue
				}
				users[j.user].PasswordHash = wrapped
			}
		})
	}
	for _, j := range legacy {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// djangoGroups returns the group names of a user record's groups: natural
// keys (["name"]) or primary keys of the dump's auth.group records.
func djangoGroups(raw json.RawMessage, byPK map[string]string) ([]string, error) {
	groups := []string{}
	if len(raw) == 0 || string(raw) == "null" {
		return groups, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New("not a list")
	}
	for _, item := range items {
		var natural []string
		if json.Unmarshal(item, &natural) == nil && len(natural) == 1 {
			groups = append(groups, natural[0])
			continue
		}
		name, ok := byPK[string(bytes.TrimSpace(item))]
		if !ok {
			return nil, fmt.Errorf("%s is neither a natural key nor a group in the dump (use dumpdata auth.user auth.group --natural-foreign)", item)
		}
		groups = append(groups, name)
	}
	return groups, nil
}
