package main

import (
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"authsvc/internal/secret"
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
