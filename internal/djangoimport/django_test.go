package djangoimport

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/users"
)

// django42Dump is the real Django 4.2 dump, one user per hash form
// (testdata/django42, a verbatim copy of the shared fixture, whose README
// lists the passwords).
const django42Dump = "../../testdata/django42/dumpdata.json"

// django42Passwords are the passwords of the fixture's users whose hash
// forms Django 4 brought or that are wrapped at import.
var django42Passwords = map[string]string{
	"charles": "difference-engine-1822", // pbkdf2_sha1
	"niklaus": "pascal-language-1970",   // argon2$argon2i$
	"zoë":     "mémoire-dure-scrypt-16", // scrypt
	"tim":     "world-wide-web-1989",    // sha1
	"vint":    "tcp-ip-handshake-1974",  // md5
	"bjarne":  "c-with-classes-1979",    // unsalted_sha1
	"guido":   "benevolent-dictator-1991",
}

// djangoHashes returns each auth.user's password field in a dump.
func djangoHashes(t *testing.T, data []byte) map[string]string {
	t.Helper()
	var dump []struct {
		Model  string
		Fields struct{ Username, Password string }
	}
	if err := json.Unmarshal(data, &dump); err != nil {
		t.Fatal(err)
	}
	hashes := map[string]string{}
	for _, r := range dump {
		if r.Model == "auth.user" {
			hashes[r.Fields.Username] = r.Fields.Password
		}
	}
	return hashes
}

// TestParseDjangoDumpWrapsLegacy: the fixture's legacy fast hashes come out
// wrapped in the policy's hash, never as they are, and match the Django
// password; the forms Django 4 brought are kept as they are; crypt is
// skipped with its reason.
func TestParseDjangoDumpWrapsLegacy(t *testing.T) {
	data, err := os.ReadFile(django42Dump)
	if err != nil {
		t.Fatal(err)
	}
	dumped := djangoHashes(t, data)
	for _, policy := range []password.HashPolicy{
		{Scheme: password.SchemeArgon2id, ArgonMemoryKiB: 64, ArgonTime: 1, ArgonThreads: 1},
		{Scheme: password.SchemeBcrypt, BcryptCost: 4},
	} {
		t.Run(policy.Scheme, func(t *testing.T) {
			dump, err := ParsePolicy(data, time.Now(), policy)
			if err != nil {
				t.Fatal(err)
			}
			list, skipped := dump.Users, dump.Skipped
			if err := users.Validate(list); err != nil {
				t.Errorf("the imported users do not load: %v", err)
			}
			if len(skipped) != 3 || countSecondFactors(skipped) != 1 || !strings.Contains(skipped[0].String(), `"bill"): password: unsupported password hash scheme: Django crypt`) ||
				!strings.Contains(skipped[0].String(), "first 8 characters") || skipped[1].String() != "record 38 (authtoken.token): its user is not imported" ||
				skipped[2].String() != `record 47 (otp_totp.totpdevice of "adi"): an unconfirmed device` {
				t.Errorf("skipped %v; want bill's crypt hash, with its reason, his DRF key and adi's unconfirmed device", skipped)
			}
			got := map[string]users.User{}
			for _, u := range list {
				got[u.Username] = u
			}
			if len(got) != 18 {
				t.Errorf("%d users imported; want the 18 but bill", len(got))
			}
			want := map[string]string{
				"charles": password.SchemePBKDF2SHA1, "niklaus": password.SchemeDjangoArgon2i, "zoë": password.SchemeScrypt,
				"tim": password.SchemeWrappedSHA1, "vint": password.SchemeWrappedMD5,
				"bjarne": password.SchemeWrappedUnsaltedSHA1, "guido": password.SchemeWrappedUnsaltedMD5,
			}
			for name, scheme := range want {
				u := got[name]
				h, err := password.ParseHash(u.PasswordHash)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if h.Scheme() != scheme || u.Disabled {
					t.Errorf("%s: scheme %s, disabled %v; want %s, enabled", name, h.Scheme(), u.Disabled, scheme)
				}
				legacy := strings.HasPrefix(scheme, "wrapped_")
				if legacy != (u.PasswordHash != dumped[name]) {
					t.Errorf("%s: stored %.30q…, dumped %.30q…; want only the legacy forms changed", name, u.PasswordHash, dumped[name])
				}
				if legacy {
					digest := dumped[name][strings.LastIndexByte(dumped[name], '$')+1:]
					if strings.Contains(u.PasswordHash, digest) || !strings.Contains(u.PasswordHash, "$"+policyPrefix(policy)) {
						t.Errorf("%s: stored %q; want the policy's hash of the legacy digest, not the digest", name, u.PasswordHash)
					}
				}
				if pw := django42Passwords[name]; !h.Verify([]byte(pw)) || h.Verify([]byte(pw+"x")) {
					t.Errorf("%s (%s): the Django password does not match, or a wrong one does", name, h.Scheme())
				}
			}
		})
	}
}

// policyPrefix is how a hash under policy begins, after its first '$'.
func policyPrefix(p password.HashPolicy) string {
	if p.Scheme == password.SchemeBcrypt {
		return fmt.Sprintf("2a$%02d$", p.BcryptCost)
	}
	return "argon2id$v=19$"
}

// TestParseDjangoDumpLegacyShapes: every spelling of a legacy form Django
// matches is wrapped, under the default policy when none is given; one
// Django never matches is skipped, naming the form and never the hash; a
// policy that cannot hash is an error, not a user left with a fast hash.
func TestParseDjangoDumpLegacyShapes(t *testing.T) {
	dump := `[` +
		`{"model": "auth.user", "pk": 1, "fields": {"username": "a", "password": "sha1$s$751d50955005577ed2556efd833300010e241159"}},` +
		`{"model": "auth.user", "pk": 2, "fields": {"username": "b", "password": "md5$$5f4dcc3b5aa765d61d8327deb882cf99"}},` +
		`{"model": "auth.user", "pk": 3, "fields": {"username": "c", "password": "5f4dcc3b5aa765d61d8327deb882cf99"}},` +
		`{"model": "auth.user", "pk": 4, "fields": {"username": "d", "password": "sha1$$5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8"}},` +
		`{"model": "auth.user", "pk": 5, "fields": {"username": "e", "password": "5F4DCC3B5AA765D61D8327DEB882CF99"}},` +
		`{"model": "auth.user", "pk": 6, "fields": {"username": "f", "password": "md5$salt$5f4dcc3b5aa765d61d8327deb882cf9"}},` +
		`{"model": "auth.user", "pk": 7, "fields": {"username": "g", "password": "sha1$s$751d50955005577ed2556efd833300010e241159", "is_active": false}}` +
		`]`
	parsed, err := Parse([]byte(dump), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	list, skipped := parsed.Users, parsed.Skipped
	if len(list) != 5 || len(skipped) != 2 {
		t.Fatalf("imported %d, skipped %v; want 5 imported, e and f skipped", len(list), skipped)
	}
	for _, s := range skipped {
		if !strings.Contains(s.String(), "hex digits, which Django never matches") || strings.Contains(strings.ToLower(s.String()), "5f4dcc3b") {
			t.Errorf("skipped %q; want the reason, without the hash", s)
		}
	}
	for _, u := range list {
		h, err := password.ParseHash(u.PasswordHash)
		if err != nil {
			t.Fatalf("%s: %v", u.Username, err)
		}
		if !strings.Contains(u.PasswordHash, "$$argon2id$v=19$m=19456,t=2,p=1$") || !h.Verify([]byte("password")) || h.Verify([]byte("Password")) {
			t.Errorf("%s: %q; want the default policy's argon2id of the digest, matching %q", u.Username, u.PasswordHash, "password")
		}
		if u.Disabled != (u.Username == "g") {
			t.Errorf("%s: disabled %v", u.Username, u.Disabled)
		}
	}
	if _, err := ParsePolicy([]byte(dump), time.Now(), password.HashPolicy{Scheme: "sha1"}); err == nil {
		t.Error("a policy that cannot hash imported the legacy hashes")
	}
}

// TestParseDjangoDumpTokens: DRF keys come out with their user, natural
// key or primary key, and their created time; each user's cut-off is moved
// back to its earliest key, never forward; keys of users left out are
// skipped with them; a key of the wrong form is skipped without being
// quoted.
func TestParseDjangoDumpTokens(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const pbkdf2 = "pbkdf2_sha256$1000$salt$kOXRpcmI0ZiIpeGvu8jJ+43wCfh/s3C+6G/DnfA8RK0="
	dump := `[` +
		`{"model": "auth.user", "pk": 1, "fields": {"username": "ada", "password": "` + pbkdf2 + `"}},` +
		`{"model": "auth.user", "pk": 2, "fields": {"username": "bob", "password": "` + pbkdf2 + `"}},` +
		`{"model": "auth.user", "pk": 3, "fields": {"username": "bad name", "password": "` + pbkdf2 + `"}},` +
		`{"model": "auth.user", "pk": 4, "fields": {"username": "cy", "password": "` + pbkdf2 + `"}},` +
		`{"model": "authtoken.token", "pk": "882ff61e9669694d05a4e17a8fb68b49826d3e52", "fields": {"user": ["ada"], "created": "2024-03-01T10:00:00.123Z"}},` +
		`{"model": "authtoken.token", "pk": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "fields": {"user": 2, "created": "2025-01-02T03:04:05.678+02:00"}},` +
		`{"model": "authtoken.token", "pk": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "fields": {"user": 3, "created": "2024-01-01T00:00:00Z"}},` +
		`{"model": "authtoken.token", "pk": "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "fields": {"user": ["cy"], "created": "2024-01-01T00:00:00Z"}},` +
		`{"model": "authtoken.token", "pk": "dddddddddddddddddddddddddddddddddddddddd", "fields": {"user": ["cy"], "created": "2030-01-01T00:00:00"}}` +
		`]`
	parsed, err := Parse([]byte(dump), now)
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{
		{Key: "882ff61e9669694d05a4e17a8fb68b49826d3e52", Username: "ada", Created: time.Date(2024, 3, 1, 10, 0, 0, 123e6, time.UTC)},
		{Key: strings.Repeat("a", 40), Username: "bob", Created: time.Date(2025, 1, 2, 1, 4, 5, 678e6, time.UTC)},
		{Key: strings.Repeat("d", 40), Username: "cy", Created: now}, // in the future: now
	}
	if fmt.Sprint(parsed.Tokens) != fmt.Sprint(want) {
		t.Errorf("Tokens = %v; want %v", parsed.Tokens, want)
	}
	cutoffs := map[string]time.Time{}
	for _, u := range parsed.Users {
		cutoffs[u.Username] = u.TokensAfter
	}
	wantCutoffs := map[string]time.Time{"ada": want[0].Created, "bob": want[1].Created, "cy": now}
	if fmt.Sprint(cutoffs) != fmt.Sprint(wantCutoffs) {
		t.Errorf("cut-offs = %v; want %v", cutoffs, wantCutoffs)
	}
	var reasons []string
	for _, s := range parsed.Skipped {
		reasons = append(reasons, s.String())
	}
	got := strings.Join(reasons, "\n")
	if len(reasons) != 3 || !strings.Contains(got, `record 6 (authtoken.token): its user is not imported`) ||
		!strings.Contains(got, `authtoken.token of "cy"): key: not 40 lowercase hex`) || strings.Contains(strings.ToLower(got), "cccccccc") {
		t.Errorf("skipped:\n%s\nwant bad name's record and key, and cy's upper-case key, never quoting a key", got)
	}
}

// countSecondFactors counts the django-otp devices among skipped.
func countSecondFactors(skipped []Skip) int {
	n := 0
	for _, s := range skipped {
		if s.Model() == "second factor" {
			n++
		}
	}
	return n
}

// TestParseDjangoDumpTwins (issue 28, point 5): of two Django users that
// NFKC folds into one name (mallory and a fullwidth ｍallory), the import
// keeps one record at most, and the DRF keys and django-otp devices of the
// record left out are left out with it, whichever key names it: natural
// (before or after NFKC) or primary, the twin first or last. A key or a
// device is never given to a user other than the one Django gave it to.
func TestParseDjangoDumpTwins(t *testing.T) {
	const pbkdf2 = "pbkdf2_sha256$1000$salt$kOXRpcmI0ZiIpeGvu8jJ+43wCfh/s3C+6G/DnfA8RK0="
	const crypt = "crypt$$ab01FAX.bQRSU" // refused: its record is left out
	// A Django user of the dump, with one DRF key, one TOTP device and one
	// static device of one token, each named by ref.
	type djangoUser struct {
		pk                   int
		username, hash       string
		drf, totpKey, static string
	}
	mallory := func(pk int) djangoUser {
		return djangoUser{pk, "mallory", pbkdf2, strings.Repeat("a", 40), strings.Repeat("11", 20), "mallorys1"}
	}
	twin := func(pk int, hash string) djangoUser {
		return djangoUser{pk, "ｍallory", hash, strings.Repeat("b", 40), strings.Repeat("22", 20), "attacker1"}
	}
	natural := func(u djangoUser) string { return strconv.Quote(u.username) }
	byPK := func(u djangoUser) string { return strconv.Itoa(u.pk) }
	tests := []struct {
		name  string
		users []djangoUser
		ref   func(djangoUser) string // how the user's key, devices name it: ["name"] or pk
		kept  int                     // index in users of the record imported as mallory, whose key and devices mallory gets; -1: none
	}{
		{"mallory first, natural keys", []djangoUser{mallory(1), twin(2, pbkdf2)}, func(u djangoUser) string { return "[" + natural(u) + "]" }, 0},
		{"twin first, natural keys", []djangoUser{twin(1, pbkdf2), mallory(2)}, func(u djangoUser) string { return "[" + natural(u) + "]" }, 0},
		{"mallory first, primary keys", []djangoUser{mallory(1), twin(2, pbkdf2)}, byPK, 0},
		{"twin first, primary keys", []djangoUser{twin(1, pbkdf2), mallory(2)}, byPK, 0},
		// The twin is left out for its hash, not for its name.
		{"refused twin first, natural keys", []djangoUser{twin(1, crypt), mallory(2)}, func(u djangoUser) string { return "[" + natural(u) + "]" }, 1},
		{"refused twin first, primary keys", []djangoUser{twin(1, crypt), mallory(2)}, byPK, 1},
		// A natural key names the user whose username is that one as
		// dumped, not one that NFKC makes it: the twin alone is in the
		// dump, imported as mallory, and keys and devices of ["mallory"]
		// are some other Django user's.
		{"natural key after NFKC, its user not in the dump", []djangoUser{twin(1, pbkdf2)}, func(djangoUser) string { return `["mallory"]` }, -1},
		// Two records of one primary key: which one a key names is not known.
		{"one primary key on two records", []djangoUser{mallory(1), {1, "bob", pbkdf2, strings.Repeat("c", 40), strings.Repeat("33", 20), "bobcode1"}}, byPK, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var records []string
			for i, u := range tt.users {
				records = append(records,
					fmt.Sprintf(`{"model": "auth.user", "pk": %d, "fields": {"username": %q, "password": %q}}`, u.pk, u.username, u.hash))
				ref := tt.ref(u)
				records = append(records,
					fmt.Sprintf(`{"model": "authtoken.token", "pk": %q, "fields": {"user": %s, "created": "2024-01-01T00:00:00Z"}}`, u.drf, ref),
					fmt.Sprintf(`{"model": "otp_totp.totpdevice", "pk": %d, "fields": {"user": %s, "confirmed": true, "key": %q, "step": 30, "t0": 0, "digits": 6, "drift": 0, "last_t": -1}}`, u.pk, ref, u.totpKey),
					fmt.Sprintf(`{"model": "otp_static.staticdevice", "pk": %d, "fields": {"user": %s, "confirmed": true}}`, 10+i, ref),
					fmt.Sprintf(`{"model": "otp_static.statictoken", "pk": %d, "fields": {"device": %d, "token": %q}}`, 10+i, 10+i, u.static))
			}
			dump, err := Read([]byte("["+strings.Join(records, ",\n")+"]"), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			var wantTokens []string
			wantFactors := map[string]string{}
			for i, u := range tt.users {
				if i != tt.kept {
					continue
				}
				name := users.NormalizeUsername(u.username)
				wantTokens = append(wantTokens, name+" "+u.drf)
				wantFactors[name] = u.totpKey + " " + u.static
			}
			var gotTokens []string
			for _, k := range dump.Tokens {
				gotTokens = append(gotTokens, k.Username+" "+k.Key)
			}
			if !slices.Equal(gotTokens, wantTokens) {
				t.Errorf("DRF keys = %q; want %q", gotTokens, wantTokens)
			}
			gotFactors := map[string]string{}
			for name, f := range dump.Factors {
				s := "(no TOTP) " + strings.Join(f.RecoveryCodes, ",")
				if f.TOTP != nil {
					s = hex.EncodeToString(f.TOTP.Secret) + " " + strings.Join(f.RecoveryCodes, ",")
				}
				gotFactors[name] = s
			}
			if fmt.Sprint(gotFactors) != fmt.Sprint(wantFactors) {
				t.Errorf("factors = %v; want %v", gotFactors, wantFactors)
			}
			// Every key and device not imported is reported, and none is
			// quoted.
			kept := min(tt.kept+1, 1)
			if got, want := countSkips(dump.Skipped, "authtoken.token"), len(tt.users)-kept; got != want {
				t.Errorf("DRF keys skipped = %d; want %d (%v)", got, want, dump.Skipped)
			}
			if got, want := countSkips(dump.Skipped, "second factor"), 2*(len(tt.users)-kept); got != want {
				t.Errorf("devices skipped = %d; want %d (%v)", got, want, dump.Skipped)
			}
			for _, s := range dump.Skipped {
				for _, u := range tt.users {
					if strings.Contains(s.String(), u.drf) || strings.Contains(s.String(), u.totpKey) || strings.Contains(s.String(), u.static) {
						t.Errorf("skipped %q quotes a key, a secret or a code", s)
					}
				}
			}
		})
	}
}

// countSkips counts the skips of records of model.
func countSkips(skips []Skip, model string) int {
	n := 0
	for _, s := range skips {
		if s.Model() == model {
			n++
		}
	}
	return n
}

// TestParseDjangoDumpSharedStaticPK: two static devices of one pk, of two
// users, leave it unknown whose device each token is: both devices and
// their tokens are skipped, and neither user gets the other's codes.
func TestParseDjangoDumpSharedStaticPK(t *testing.T) {
	const pbkdf2 = "pbkdf2_sha256$1000$salt$kOXRpcmI0ZiIpeGvu8jJ+43wCfh/s3C+6G/DnfA8RK0="
	dump, err := Read([]byte(`[
		{"model": "auth.user", "pk": 1, "fields": {"username": "ann", "password": "`+pbkdf2+`"}},
		{"model": "auth.user", "pk": 2, "fields": {"username": "bea", "password": "`+pbkdf2+`"}},
		{"model": "otp_static.staticdevice", "pk": 5, "fields": {"user": ["ann"], "confirmed": true}},
		{"model": "otp_static.staticdevice", "pk": 5, "fields": {"user": ["bea"], "confirmed": true}},
		{"model": "otp_static.statictoken", "pk": 1, "fields": {"device": 5, "token": "annscode"}},
		{"model": "otp_static.statictoken", "pk": 2, "fields": {"device": 5, "token": "beascode"}}
	]`), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(dump.Factors) != 0 || countSkips(dump.Skipped, "second factor") != 2 {
		t.Errorf("factors %v, skipped %v; want none, both devices skipped", dump.Factors, dump.Skipped)
	}
}
