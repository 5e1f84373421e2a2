package main

import (
	"bytes"
	"context"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"authsvc/internal/mfa"
	"authsvc/internal/secret"
	"authsvc/internal/testservers"
	"authsvc/internal/users"
)

// django42TOTP are the fixture's TOTP devices (its README): adi's is
// unconfirmed.
var django42TOTP = map[string]struct {
	key                string
	step, drift, lastT int64
	digits             int
}{
	"whitfield": {key: "4a2291bf0f094f38a9972b8b325af3da6af6f5d2", step: 30, digits: 6, drift: 0, lastT: 59851953},
	"martin":    {key: "f1279cb945aeb214a7cdef23c00d92c23750a1b82884d2425ee8641f1d795b21", step: 30, digits: 6, drift: 1, lastT: 59851954},
	"ralph":     {key: "dbfddd91635aa1ef46ddeb97512e3bfb3b7ab605", step: 60, digits: 8, drift: 0, lastT: -1},
	"adi":       {key: "47443e0cc0687b9636621653900bd8091ff0068c", step: 30, digits: 6, drift: 0, lastT: -1},
}

// django42StaticTokens are whitfield's static tokens.
var django42StaticTokens = []string{"yueigqds", "4lk63kos", "iovo2hcf", "vpkwagmk", "uvrcp62v"}

// importFactorsRE matches the factors part of import's summary line.
var importFactorsRE = regexp.MustCompile(`; factors (\d+) imported, (\d+) skipped(; nothing written)?\n$`)

// importFactors is the factors tally of import's summary line; ok is false
// when stdout has none.
func importFactors(stdout string) (imported, skipped int, ok bool) {
	m := importFactorsRE.FindStringSubmatch(stdout)
	if m == nil {
		return 0, 0, false
	}
	imported, _ = strconv.Atoi(m[1])
	skipped, _ = strconv.Atoi(m[2])
	return imported, skipped, true
}

// wantFactorTally checks the factors part of an import's summary line.
func wantFactorTally(t *testing.T, what, stdout string, imported, skipped int) {
	t.Helper()
	if i, s, ok := importFactors(stdout); !ok || i != imported || s != skipped {
		t.Errorf("%s: summary %q; want factors %d imported, %d skipped", what, stdout, imported, skipped)
	}
}

// oathtoolCode is oathtool's TOTP code of keyHex at Unix time at (t0 0),
// an implementation that shares no code with authsvc's.
func oathtoolCode(t *testing.T, keyHex string, digits int, step, at int64) string {
	t.Helper()
	path, err := exec.LookPath("oathtool")
	if err != nil {
		if requirePython() {
			t.Fatalf("no oathtool (apt-get install oathtool): %v (AUTHSVC_REQUIRE_PYTHON=1 or CI is set)", err)
		}
		t.Skipf("no oathtool (apt-get install oathtool): %v (set AUTHSVC_REQUIRE_PYTHON=1 to fail instead)", err)
	}
	args := []string{"--totp", "-d", strconv.Itoa(digits), "-s", fmt.Sprintf("%ds", step), "-N", fmt.Sprintf("@%d", at), keyHex}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("oathtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// checkImportedFactors checks the fixture's factors as a directory holds
// them (got), under key: each confirmed device's TOTP opens for its user
// and takes oathtool's code of the step Django would accept next; none
// takes a code at or before the device's last_t; whitfield's static
// tokens are his recovery codes; adi has none.
func checkImportedFactors(t *testing.T, got map[string]users.User, key secret.Key) {
	t.Helper()
	ring := secret.NewKeyring(key)
	now := time.Now()
	for name, dev := range django42TOTP {
		u := got[name]
		if name == "adi" {
			if u.MFA != nil {
				t.Errorf("adi's factors = %+v; want none: her device is unconfirmed", u.MFA)
			}
			continue
		}
		if u.MFA == nil || u.MFA.TOTP == nil {
			t.Errorf("%s: no authenticator", name)
			continue
		}
		totp, _, err := u.MFA.TOTP.Open(ring, name)
		if err != nil {
			t.Errorf("%s: Open = %v", name, err)
			continue
		}
		at := now.Unix() + dev.drift*dev.step
		if c, ok := totp.Check(oathtoolCode(t, dev.key, dev.digits, dev.step, at), now); !ok || c != at/dev.step {
			t.Errorf("%s: Check(oathtool's code of counter %d) = %d, %v; want accepted", name, at/dev.step, c, ok)
		}
		if dev.lastT >= 0 {
			then := time.Unix(dev.lastT*dev.step, 0)
			if c, ok := totp.Check(oathtoolCode(t, dev.key, dev.digits, dev.step, dev.lastT*dev.step), then); ok {
				t.Errorf("%s: Check(code of last_t %d) = %d, true; want refused", name, dev.lastT, c)
			}
		}
	}
	f := got["whitfield"].MFA
	if f == nil || len(f.RecoveryCodes) != len(django42StaticTokens) {
		t.Fatalf("whitfield's factors = %+v; want his 5 static tokens as recovery codes", f)
	}
	for _, token := range django42StaticTokens {
		if _, ok, err := f.MatchRecoveryCode(ring, token); !ok || err != nil {
			t.Errorf("whitfield: MatchRecoveryCode(%q) = %v, %v; want a match", token, ok, err)
		}
	}
}

// noFactorInClear fails when data holds any of the fixture's TOTP keys,
// in hex or base32, or any of its static tokens.
func noFactorInClear(t *testing.T, what string, data []byte) {
	t.Helper()
	text := strings.ToLower(string(data))
	for name, dev := range django42TOTP {
		raw, _ := hex.DecodeString(dev.key)
		b32 := strings.ToLower(strings.TrimRight(base32.StdEncoding.EncodeToString(raw), "="))
		if strings.Contains(text, dev.key) || strings.Contains(text, b32) {
			t.Errorf("%s holds %s's TOTP key in clear", what, name)
		}
	}
	for _, token := range django42StaticTokens {
		if strings.Contains(text, token) {
			t.Errorf("%s holds the static token %q", what, token)
		}
	}
}

// TestImportDjangoFactors: user import brings the fixture's django-otp
// devices (API.md, Moving from Django): each confirmed TOTP device is its
// user's authenticator, sealed under the import's key, taking the codes
// Django would, not those at or before its last_t; whitfield's static
// tokens are his recovery codes, hashed; adi's unconfirmed device is
// reported and makes the exit 1, with bill's crypt hash. Neither a key nor
// a token is left in clear in the users file. Importing again without
// --update leaves the factors alone, reported; a dry run counts them as
// the real run does and writes nothing.
func TestImportDjangoFactors(t *testing.T) {
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	code, stdout, stderr := runCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "django", django42Fixture)
	if code != 1 || strings.Count(stderr, "second factor") != 0 || strings.Count(stderr, "otp_") != 1 ||
		!strings.Contains(stderr, "authsvc: user import: skipped record 47 (otp_totp.totpdevice of \"adi\"): an unconfirmed device\n") ||
		!strings.Contains(stderr, `record 23 (auth.user "bill")`) {
		t.Errorf("user import = exit %d, stderr:\n%s\nwant exit 1, bill and adi's device reported", code, stderr)
	}
	wantFactorTally(t, "user import", stdout, 4, 1) // three TOTP and one static device; adi's
	noFactorInClear(t, "stdout and stderr", []byte(stdout+stderr))
	data, err := os.ReadFile(usersPath)
	if err != nil {
		t.Fatal(err)
	}
	noFactorInClear(t, "the users file", data)
	key, err := secret.Load(filepath.Join(dir, "authsvc.key"))
	if err != nil {
		t.Fatal(err)
	}
	got := mustReadUsers(t, usersPath)
	checkImportedFactors(t, got, key)
	if code, out, stderr := runCLI(t, "", nil, "user", "check", "--users", usersPath); code != 0 {
		t.Errorf("user check after the import = exit %d, %s%s; want 0", code, out, stderr)
	}

	// Again, without --update: the users are left alone, and their devices.
	code, stdout, stderr = runCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "django", django42Fixture)
	wantFactorTally(t, "user import again", stdout, 0, 5)
	if code != 1 || !strings.Contains(stderr, `skipped 2 second factors of "whitfield": the user is left alone`) ||
		!strings.Contains(stderr, `skipped 1 second factor of "ralph": the user is left alone`) {
		t.Errorf("user import again = exit %d, stderr:\n%s\nwant 1, the devices of the users left alone reported", code, stderr)
	}
	if after, err := os.ReadFile(usersPath); err != nil || string(after) != string(data) {
		t.Errorf("user import again changed the users file (%v)", err)
	}

	t.Run("dry run", func(t *testing.T) {
		dir := t.TempDir()
		code, stdout, _ := runCLI(t, "", nil, "user", "import", "--dry-run", "--users", filepath.Join(dir, "users.json"), "--from", "django", django42Fixture)
		wantFactorTally(t, "user import --dry-run", stdout, 4, 1)
		if code != 1 {
			t.Errorf("user import --dry-run = exit %d; want 1, as the real run", code)
		}
		if names := dirNames(t, dir); len(names) != 0 {
			t.Errorf("files after user import --dry-run = %v; want none", names)
		}
	})
}

// An otpUser is what a test dump says of one Django user and its
// django-otp devices.
type otpUser struct {
	username, hash string
	totpKey        string // hex; "": no TOTP device
	lastT          int64
	tokens         []string // of a confirmed static device; nil: none
}

// writeOTPDump writes a dumpdata file of users and their devices, the
// static tokens first, as dumpdata writes them, and returns its path.
func writeOTPDump(t *testing.T, dir, name string, list ...otpUser) string {
	t.Helper()
	var out []any
	tokenPK := 0
	for i, u := range list {
		for _, tok := range u.tokens {
			tokenPK++
			out = append(out, map[string]any{"model": "otp_static.statictoken", "pk": tokenPK, "fields": map[string]any{"device": i + 1, "token": tok}})
		}
	}
	for i, u := range list {
		out = append(out, map[string]any{"model": "auth.user", "pk": i + 1, "fields": map[string]any{
			"username": u.username, "password": u.hash, "first_name": strings.ToUpper(u.username[:1]) + u.username[1:], "last_name": "",
			"email": u.username + "@example.com", "is_active": true, "is_staff": false, "is_superuser": false, "groups": []any{},
		}})
		if u.totpKey != "" {
			out = append(out, map[string]any{"model": "otp_totp.totpdevice", "pk": i + 1, "fields": map[string]any{
				"user": []string{u.username}, "name": "authenticator", "confirmed": true, "key": u.totpKey,
				"step": 30, "t0": 0, "digits": 6, "tolerance": 1, "drift": 0, "last_t": u.lastT,
			}})
		}
		if u.tokens != nil {
			out = append(out, map[string]any{"model": "otp_static.staticdevice", "pk": i + 1, "fields": map[string]any{
				"user": []string{u.username}, "name": "backup", "confirmed": true,
			}})
		}
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// openTOTP returns u's authenticator, opened under ring.
func openTOTP(t *testing.T, u users.User, ring secret.Keyring) (mfa.TOTP, bool) {
	t.Helper()
	if u.MFA == nil || u.MFA.TOTP == nil {
		return mfa.TOTP{}, false
	}
	totp, _, err := u.MFA.TOTP.Open(ring, u.Username)
	if err != nil {
		t.Fatalf("%s: Open = %v", u.Username, err)
	}
	return totp, true
}

// TestImportUpdateFactors: user import --update brings the factors of the
// users it created up to date with Django (API.md, Moving from Django):
//   - alice's device, unchanged in Django, keeps the last_t authsvc
//     recorded when it is later than Django's; her recovery codes are
//     those unused on both sides; her sessions live on;
//   - bob's device has a new key in Django: it replaces his, and his
//     sessions end;
//   - carol gets a device in Django: it becomes hers, and her sessions end;
//   - frank's device is gone from Django: so is his authenticator, and his
//     sessions end;
//   - dave, whom user add created, never gets the device Django has for
//     him, reported;
//   - a dry run says the same and writes nothing; a second run changes
//     nothing.
func TestImportUpdateFactors(t *testing.T) {
	dir := t.TempDir()
	usersPath := filepath.Join(dir, "users.json")
	if code, _, stderr := runCLI(t, "dave-authsvc-pw\n", nil, "user", "add", "--users", usersPath, "dave"); code != 0 {
		t.Fatalf("user add dave = exit %d, %s", code, stderr)
	}
	k := func(c string) string { return strings.Repeat(c, 40) }
	alice := otpUser{"alice", djangoPBKDF2(t, "alice-pass", "s1"), k("a"), 100, []string{"alicetk1", "alicetk2", "alicetk3"}}
	bob := otpUser{"bob", djangoPBKDF2(t, "bob-pass", "s2"), k("b"), -1, nil}
	carol := otpUser{"carol", djangoPBKDF2(t, "carol-pass", "s3"), "", 0, nil}
	frank := otpUser{"frank", djangoPBKDF2(t, "frank-pass", "s4"), k("f"), -1, nil}
	dave := otpUser{"dave", djangoPBKDF2(t, "dave-pass", "s5"), k("d"), -1, nil}
	first := writeOTPDump(t, dir, "first.json", alice, bob, carol, frank, dave)
	importDump := func(path string, extra ...string) (int, string, string) {
		return runCLI(t, "", nil, append(append([]string{"user", "import", "--users", usersPath, "--from", "django"}, extra...), path)...)
	}
	code, stdout, stderr := importDump(first)
	wantFactorTally(t, "the first import", stdout, 4, 1)
	if code != 1 || !strings.Contains(stderr, `skipped 1 second factor of "dave": the user is left alone`) {
		t.Errorf("the first import = exit %d, stderr:\n%s\nwant 1, dave's device reported", code, stderr)
	}
	key, err := secret.Load(filepath.Join(dir, "authsvc.key"))
	if err != nil {
		t.Fatal(err)
	}
	ring := secret.NewKeyring(key)

	// alice uses her authenticator (counter 200) and alicetk1 in authsvc.
	list, err := users.ReadFile(usersPath)
	if err != nil {
		t.Fatal(err)
	}
	for i := range list {
		if f := list[i].MFA; list[i].Username == "alice" {
			f.TOTP.LastT = 200
			n, ok, err := f.MatchRecoveryCode(ring, "alicetk1")
			if !ok || err != nil {
				t.Fatalf("alice: MatchRecoveryCode(alicetk1) = %v, %v", ok, err)
			}
			f.RecoveryCodes = slices.Delete(f.RecoveryCodes, n, n+1)
		}
	}
	if err := users.WriteFile(usersPath, list); err != nil {
		t.Fatal(err)
	}
	before := mustReadUsers(t, usersPath)

	// In Django: alice used alicetk3 (last_t 150), bob's key changed,
	// carol enrolled, frank removed his device.
	alice.lastT, alice.tokens = 150, []string{"alicetk1", "alicetk2"}
	bob.totpKey = k("c")
	carol.totpKey, carol.lastT = k("e"), -1
	frank.totpKey = ""
	second := writeOTPDump(t, dir, "second.json", alice, bob, carol, frank, dave)

	raw, err := os.ReadFile(usersPath)
	if err != nil {
		t.Fatal(err)
	}
	dryCode, dryOut, dryErr := importDump(second, "--update", "--dry-run")
	if after, err := os.ReadFile(usersPath); err != nil || string(after) != string(raw) {
		t.Errorf("the users file changed in a dry run (%v)", err)
	}
	code, stdout, stderr = importDump(second, "--update")
	wantFactorTally(t, "import --update", stdout, 4, 1) // alice's two, bob's, carol's; dave's
	if _, u, _, ok := importSummary(stdout); !ok || u != (importTally{updated: 5}) {
		t.Errorf("import --update: summary %q; want 5 users updated", stdout)
	}
	if code != 1 || code != dryCode || stderr != dryErr || strings.Replace(dryOut, "dry run: would import", "imported", 1) != strings.Replace(stdout, "\n", "; nothing written\n", 1) ||
		!strings.Contains(stderr, `skipped 1 second factor of "dave": user import did not create that user, and never touches its factors`) {
		t.Errorf("import --update = exit %d, %q, stderr:\n%s\nwant 1, dave's device reported, as the dry run's exit %d, %q, stderr:\n%s", code, stdout, stderr, dryCode, dryOut, dryErr)
	}
	raw, err = os.ReadFile(usersPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k("a"), k("b"), k("c"), k("e"), k("f")} {
		if strings.Contains(string(raw), key) {
			t.Errorf("the users file holds a TOTP key in clear")
		}
	}
	got := mustReadUsers(t, usersPath)
	sessionsEnded := func(name string) bool {
		return got[name].PasswordGeneration > before[name].PasswordGeneration && got[name].TokensAfter.After(before[name].TokensAfter)
	}

	a := got["alice"]
	if totp, ok := openTOTP(t, a, ring); !ok || hex.EncodeToString(totp.Secret) != k("a") || totp.LastT != 200 || !bytes.Equal(a.MFA.TOTP.SealedSecret, before["alice"].MFA.TOTP.SealedSecret) {
		t.Errorf("alice's authenticator = %+v; want her device kept, sealed as it was, last_t 200 (authsvc's, later than Django's 150)", totp)
	}
	for token, want := range map[string]bool{"alicetk1": false, "alicetk2": true, "alicetk3": false} {
		if _, ok, _ := a.MFA.MatchRecoveryCode(ring, token); ok != want {
			t.Errorf("alice: MatchRecoveryCode(%q) = %v; want %v (used in authsvc, unused, used in Django)", token, ok, want)
		}
	}
	if sessionsEnded("alice") {
		t.Errorf("alice's sessions ended; want them alive, her factors the same devices")
	}
	if totp, ok := openTOTP(t, got["bob"], ring); !ok || hex.EncodeToString(totp.Secret) != k("c") || !sessionsEnded("bob") {
		t.Errorf("bob: authenticator %v, sessions ended %v; want his new key, ended", ok, sessionsEnded("bob"))
	}
	if totp, ok := openTOTP(t, got["carol"], ring); !ok || hex.EncodeToString(totp.Secret) != k("e") || !sessionsEnded("carol") {
		t.Errorf("carol: authenticator %v, sessions ended %v; want her new device, ended", ok, sessionsEnded("carol"))
	}
	if got["frank"].MFA != nil || !sessionsEnded("frank") {
		t.Errorf("frank: factors %+v, sessions ended %v; want none, ended", got["frank"].MFA, sessionsEnded("frank"))
	}
	if got["dave"].MFA != nil || sessionsEnded("dave") {
		t.Errorf("dave: factors %+v, sessions ended %v; want none, alive", got["dave"].MFA, sessionsEnded("dave"))
	}

	// Again: nothing changes.
	code, stdout, _ = importDump(second, "--update")
	wantFactorTally(t, "import --update again", stdout, 4, 1)
	if _, u, _, ok := importSummary(stdout); code != 1 || !ok || u != (importTally{unchanged: 5}) {
		t.Errorf("import --update again = exit %d, %q; want 1, 5 users unchanged", code, stdout)
	}
}

// TestImportDjangoFactorsPostgres: the fixture's factors land in
// PostgreSQL's mfa column as in a users file, sealed and hashed, under the
// --secret-key-file key; --update of a dump where martin's device is gone
// removes his authenticator and ends his sessions, and leaves
// whitfield's as they were.
func TestImportDjangoFactorsPostgres(t *testing.T) {
	pgURL, _, _ := testservers.Postgres(t)
	db := testservers.NewDatabase(t, pgURL)
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "fleet.key")
	importDump := func(path string, extra ...string) (int, string, string) {
		return runCLI(t, "", nil, append(append([]string{"user", "import", "--users", db, "--from", "django", "--secret-key-file", keyPath}, extra...), path)...)
	}
	code, stdout, stderr := importDump(django42Fixture)
	wantFactorTally(t, "user import into PostgreSQL", stdout, 4, 1)
	if code != 1 || !strings.Contains(stderr, `record 47 (otp_totp.totpdevice of "adi"): an unconfirmed device`) {
		t.Errorf("user import into PostgreSQL = exit %d, stderr:\n%s\nwant 1, adi's device reported", code, stderr)
	}
	key, err := secret.Load(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	type row struct {
		user  users.User
		after time.Time
	}
	readRows := func() map[string]row {
		t.Helper()
		rows, err := conn.Query(context.Background(), `select username, mfa::text, password_generation, tokens_after from authsvc_users`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]row{}
		var all strings.Builder
		for rows.Next() {
			var name string
			var text *string
			var gen int64
			var after *time.Time
			if err := rows.Scan(&name, &text, &gen, &after); err != nil {
				t.Fatal(err)
			}
			r := row{user: users.User{Username: name, PasswordGeneration: uint64(gen)}}
			if after != nil {
				r.after = *after
			}
			if text != nil {
				all.WriteString(*text)
				if err := json.Unmarshal([]byte(*text), &r.user.MFA); err != nil {
					t.Fatalf("%s's mfa: %v", name, err)
				}
			}
			got[name] = r
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		noFactorInClear(t, "the mfa column", []byte(all.String()))
		return got
	}
	before := readRows()
	byName := map[string]users.User{}
	for name, r := range before {
		byName[name] = r.user
	}
	checkImportedFactors(t, byName, key)

	// martin removed his device in Django.
	data, err := os.ReadFile(django42Fixture)
	if err != nil {
		t.Fatal(err)
	}
	var records []map[string]any
	if err := json.Unmarshal(data, &records); err != nil {
		t.Fatal(err)
	}
	records = slices.DeleteFunc(records, func(r map[string]any) bool {
		f, _ := r["fields"].(map[string]any)
		return r["model"] == "otp_totp.totpdevice" && fmt.Sprint(f["user"]) == "[martin]"
	})
	if data, err = json.Marshal(records); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, "newer.json")
	if err := os.WriteFile(newer, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = importDump(newer, "--update")
	wantFactorTally(t, "import --update", stdout, 3, 1)
	if _, u, _, ok := importSummary(stdout); code != 1 || !ok || u != (importTally{updated: 1, unchanged: 17, skipped: 1}) {
		t.Errorf("import --update = exit %d, %q; want 1, martin updated, the 17 others unchanged, bill skipped", code, stdout)
	}
	after := readRows()
	m, w := after["martin"], after["whitfield"]
	if m.user.MFA != nil || m.user.PasswordGeneration != before["martin"].user.PasswordGeneration+1 || !m.after.After(before["martin"].after) {
		t.Errorf("martin after --update: factors %+v, generation %d, cut-off %v; want none, one more, later", m.user.MFA, m.user.PasswordGeneration, m.after)
	}
	if !reflect.DeepEqual(w.user.MFA, before["whitfield"].user.MFA) || !w.after.Equal(before["whitfield"].after) {
		t.Errorf("whitfield after --update: factors or cut-off changed; want them as they were")
	}
}
