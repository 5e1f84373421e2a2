package password

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// The Django fixture lives beside the repository (README: Where things are).
const (
	djangoDumpPath = "../../testdata/django/dumpdata.json"
	djangoSpecPath = "../../testdata/django/spec.json"
)

// Vectors made by Django 3.2.25 itself (python3-django, python3-bcrypt
// 3.2.2, python3-argon2 21.1.0), with small parameters so the tests stay
// fast; each comment says how, and what Django's verify answered.
const (
	// BCryptPasswordHasher (rounds=4).encode(72 × "p"): Django matches
	// 72 × "p" + "x" (it reads 72 bytes) and not 71 × "p".
	djangoBcrypt72 = "bcrypt$$2b$04$01nlLAqtbAOG10wK2KiGNu8BqBVQr1B9/xRe6EX3088v0xpHDU/DC"
	// BCryptSHA256PasswordHasher (rounds=4).encode(50 × "ł", 100 bytes):
	// matches; 36 × "ł" (its first 72 bytes) does not.
	djangoBcryptSHA256Long = "bcrypt_sha256$$2b$04$sS6C3nLTNkIbmMdLRTxDmeLWcMdZjeI6Q4byHQ7Evr8DYW/Pptd4y"
	// PBKDF2PasswordHasher.encode("contraseña", "sälz", 1000): a salt that
	// is not ASCII, used as its UTF-8 bytes.
	djangoPBKDF2Small = "pbkdf2_sha256$1000$sälz$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA="
	// Argon2PasswordHasher (time_cost=1, memory_cost=64, parallelism=2)
	// .encode("grâce"): matches; "grace" does not.
	djangoArgon2Small = "argon2$argon2id$v=19$m=64,t=1,p=2$Y3NuNXVXbDVmR0p2bEdJZzV4ZG10MQ$UwuiSHYa+07tqS3CB7cKeQ"
	// argon2.PasswordHasher(time_cost=1, memory_cost=256, parallelism=2)
	// .hash("phc-password"): argon2-cffi's own PHC string.
	phcArgon2Small = "$argon2id$v=19$m=256,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw"
	// bcrypt at cost 4 of "salty", and the same with its salt's last
	// character changed in the 4 bits bcrypt ignores: Django's
	// BCryptPasswordHasher said False for "bcrypt$" + the second.
	bcryptSalty             = "$2b$04$QPpKMfPj3qL/dfIPK2Rhl.rhStaM3osOJ.wfWoFOp.rl.rxEFm.ky"
	bcryptSaltyNonCanonical = "$2b$04$QPpKMfPj3qL/dfIPK2Rhl/rhStaM3osOJ.wfWoFOp.rl.rxEFm.ky"
)

// phTestPolicy hashes fast: argon2id at 64 KiB, bcrypt at cost 4.
func phTestPolicy(scheme string) HashPolicy {
	return HashPolicy{Scheme: scheme, BcryptCost: 4, ArgonMemoryKiB: 64, ArgonTime: 1, ArgonThreads: 2}
}

func mustParseHash(t testing.TB, s string) *Hash {
	t.Helper()
	h, err := ParseHash(s)
	if err != nil {
		t.Fatalf("ParseHash(%.20q…): %v", s, err)
	}
	return h
}

// TestPasswordHashDjangoFixture checks every user of the real Django 3.2
// dump: the right password matches, a wrong one does not, the unusable
// password matches nothing.
func TestPasswordHashDjangoFixture(t *testing.T) {
	dumpJSON, err := os.ReadFile(djangoDumpPath)
	if err != nil {
		t.Fatalf("the Django fixture is missing: %v", err)
	}
	specJSON, err := os.ReadFile(djangoSpecPath)
	if err != nil {
		t.Fatalf("the Django fixture's spec is missing: %v", err)
	}
	var dump []struct {
		Model  string
		Fields struct{ Username, Password string }
	}
	var spec struct {
		Users []struct {
			Username string
			Password *string
			Hasher   *string
		}
	}
	if err := json.Unmarshal(dumpJSON, &dump); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(specJSON, &spec); err != nil {
		t.Fatal(err)
	}
	hashOf := map[string]string{}
	for _, r := range dump {
		if r.Model == "auth.user" {
			hashOf[r.Fields.Username] = r.Fields.Password
		}
	}
	wantScheme := map[string]string{
		"pbkdf2_sha256": SchemePBKDF2, "argon2": SchemeDjangoArgon2,
		"bcrypt_sha256": SchemeBcryptSHA256, "bcrypt": SchemeDjangoBcrypt,
	}
	seen := map[string]bool{}
	for _, u := range spec.Users {
		encoded, ok := hashOf[u.Username]
		if !ok {
			t.Fatalf("%s: not in the dump", u.Username)
		}
		h := mustParseHash(t, encoded)
		seen[h.Scheme()] = true
		if u.Password == nil {
			if h.Usable() || h.Scheme() != SchemeUnusable {
				t.Errorf("%s: scheme %s, usable %v; want unusable", u.Username, h.Scheme(), h.Usable())
			}
			for _, pw := range []string{"", "!", encoded, encoded[1:]} {
				if h.Verify([]byte(pw)) {
					t.Errorf("%s: the unusable password matched %q", u.Username, pw)
				}
			}
			continue
		}
		t.Run(u.Username, func(t *testing.T) {
			t.Parallel()
			if got, want := h.Scheme(), wantScheme[*u.Hasher]; got != want {
				t.Errorf("scheme %s, want %s", got, want)
			}
			if !h.Usable() {
				t.Error("not usable")
			}
			pw := *u.Password
			if !h.Verify([]byte(pw)) {
				t.Errorf("%q does not match", pw)
			}
			// One wrong password each: a check at Django's costs takes up to
			// a third of a second, several times that under -race.
			for _, wrong := range []string{pw + "x"} {
				if h.Verify([]byte(wrong)) {
					t.Errorf("wrong password %q matches", wrong)
				}
			}
		})
	}
	for _, s := range []string{SchemePBKDF2, SchemeDjangoArgon2, SchemeBcryptSHA256, SchemeDjangoBcrypt, SchemeUnusable} {
		if !seen[s] {
			t.Errorf("the fixture has no %s hash", s)
		}
	}
}

// TestPasswordHashDjangoVectors checks hashes Django made at small
// parameters against what Django's verify said of them.
func TestPasswordHashDjangoVectors(t *testing.T) {
	p72 := strings.Repeat("p", 72)
	for _, tt := range []struct {
		hash, scheme string
		match, miss  []string
	}{
		{djangoBcrypt72, SchemeDjangoBcrypt, []string{p72, p72 + "x", p72 + strings.Repeat("y", 100)}, []string{p72[:71], p72[:71] + "\x00", "p\x00" + p72}},
		{djangoBcryptSHA256Long, SchemeBcryptSHA256, []string{strings.Repeat("ł", 50)}, []string{strings.Repeat("ł", 36), strings.Repeat("ł", 51)}},
		{djangoPBKDF2Small, SchemePBKDF2, []string{"contraseña"}, []string{"contrasena", "contraseña "}},
		{djangoArgon2Small, SchemeDjangoArgon2, []string{"grâce"}, []string{"grace"}},
		{phcArgon2Small, SchemeArgon2id, []string{"phc-password"}, []string{"phc-passwor"}},
		{bcryptSalty, SchemeBcrypt, []string{"salty"}, []string{"Salty"}},
		{strings.Replace(bcryptSalty, "$2b$", "$2y$", 1), SchemeBcrypt, []string{"salty"}, nil},
		{strings.Replace(bcryptSalty, "$2b$", "$2a$", 1), SchemeBcrypt, []string{"salty"}, nil},
		{"bcrypt$" + strings.Replace(bcryptSalty, "$2b$", "$2y$", 1), SchemeDjangoBcrypt, []string{"salty"}, nil},
	} {
		h := mustParseHash(t, tt.hash)
		if h.Scheme() != tt.scheme {
			t.Errorf("%.24s…: scheme %s, want %s", tt.hash, h.Scheme(), tt.scheme)
		}
		for _, pw := range tt.match {
			if !h.Verify([]byte(pw)) {
				t.Errorf("%.24s…: %.20q… does not match", tt.hash, pw)
			}
		}
		for _, pw := range tt.miss {
			if h.Verify([]byte(pw)) {
				t.Errorf("%.24s…: %.20q… matches", tt.hash, pw)
			}
		}
	}
}

// TestPasswordHashNonCanonicalBcrypt: x/crypto would match a salt spelled
// with stray low bits, Django never does; the parser refuses it.
func TestPasswordHashNonCanonicalBcrypt(t *testing.T) {
	if err := bcrypt.CompareHashAndPassword([]byte(bcryptSaltyNonCanonical), []byte("salty")); err != nil {
		t.Logf("x/crypto no longer accepts a non-canonical salt: %v", err)
	}
	for _, s := range []string{bcryptSaltyNonCanonical, "bcrypt$" + bcryptSaltyNonCanonical, "bcrypt_sha256$" + bcryptSaltyNonCanonical} {
		if _, err := ParseHash(s); err == nil || !strings.Contains(err.Error(), "malformed salt") {
			t.Errorf("%.20s…: error %v, want malformed salt", s, err)
		}
	}
}

func TestHashPolicyRoundTrip(t *testing.T) {
	for _, scheme := range []string{SchemeArgon2id, SchemeBcrypt} {
		p := phTestPolicy(scheme)
		for _, pw := range []string{"correct horse battery staple", "ünïcødé パスワード", strings.Repeat("z", 72), "a\x00b"} {
			s, err := p.Hash([]byte(pw))
			if err != nil {
				t.Fatalf("%s: hash: %v", scheme, err)
			}
			h := mustParseHash(t, s)
			if h.Scheme() != scheme || !h.Usable() {
				t.Errorf("%s: parsed as %s", scheme, h.Scheme())
			}
			if !h.Verify([]byte(pw)) {
				t.Errorf("%s: %q does not match its own hash", scheme, pw)
			}
			if h.Verify([]byte(pw+"!")) || h.Verify([]byte(strings.TrimSuffix(pw, pw[len(pw)-1:]))) {
				t.Errorf("%s: a wrong password matches %q's hash", scheme, pw)
			}
			if p.NeedsRehash(h) {
				t.Errorf("%s: a fresh hash needs a rehash under its own policy", scheme)
			}
		}
	}
	if _, err := phTestPolicy(SchemeArgon2id).Hash([]byte(strings.Repeat("z", 1024))); err != nil {
		t.Errorf("argon2id refused a 1024-byte password: %v", err)
	}
	if _, err := phTestPolicy(SchemeBcrypt).Hash([]byte(strings.Repeat("z", 73))); err == nil || !strings.Contains(err.Error(), "72") {
		t.Errorf("bcrypt hashed a 73-byte password: %v", err)
	}
	for _, p := range []HashPolicy{
		{Scheme: "sha1"},
		{Scheme: SchemeBcrypt, BcryptCost: 17},
		{Scheme: SchemeBcrypt, BcryptCost: 3},
		{Scheme: SchemeArgon2id, ArgonMemoryKiB: 15, ArgonTime: 1, ArgonThreads: 2},
		{Scheme: SchemeArgon2id, ArgonMemoryKiB: 64, ArgonTime: 0, ArgonThreads: 1},
		{Scheme: SchemeArgon2id, ArgonMemoryKiB: 64, ArgonTime: 1, ArgonThreads: 0},
	} {
		if s, err := p.Hash([]byte("pw")); err == nil {
			t.Errorf("%+v: made %q, want an error", p, s)
		}
	}
}

func TestDefaultHashPolicy(t *testing.T) {
	p := DefaultHashPolicy()
	if p.Scheme != SchemeArgon2id || p.BcryptCost != 12 {
		t.Errorf("default policy %+v", p)
	}
	s, err := p.Hash([]byte("a default password"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("default hash %q, want $argon2id$v=19$m=19456,t=2,p=1$…", s)
	}
	h := mustParseHash(t, s)
	if !h.Verify([]byte("a default password")) || h.Verify([]byte("a default password.")) || p.NeedsRehash(h) {
		t.Errorf("default hash %q does not round-trip", s)
	}
	if len(h.salt) != 16 || len(h.digest) != 32 {
		t.Errorf("salt %d bytes, digest %d; want 16 and 32", len(h.salt), len(h.digest))
	}
}

func TestHashPolicyNeedsRehash(t *testing.T) {
	bcryptPolicy := HashPolicy{Scheme: SchemeBcrypt, BcryptCost: 12}
	argonPolicy := HashPolicy{Scheme: SchemeArgon2id, ArgonMemoryKiB: 256, ArgonTime: 1, ArgonThreads: 2}
	argonHash := func(m, t, p uint32) string {
		return formatArgon2id(m, t, uint8(p), make([]byte, 16), make([]byte, 32))
	}
	bcrypt10 := strings.Replace(bcryptSalty, "$04$", "$10$", 1)
	bcrypt12 := strings.Replace(bcryptSalty, "$04$", "$12$", 1)
	for _, tt := range []struct {
		name   string
		policy HashPolicy
		hash   string
		want   bool
	}{
		{"bcrypt 10 under bcrypt 12", bcryptPolicy, bcrypt10, true},
		{"bcrypt 12 under bcrypt 12", bcryptPolicy, bcrypt12, false},
		{"bcrypt 12 $2y$ under bcrypt 12", bcryptPolicy, strings.Replace(bcrypt12, "$2b$", "$2y$", 1), false},
		{"bcrypt 13 under bcrypt 12 (stronger counts too)", bcryptPolicy, strings.Replace(bcryptSalty, "$04$", "$13$", 1), true},
		{"argon2id under bcrypt", bcryptPolicy, argonHash(256, 1, 2), true},
		{"bcrypt under argon2id", argonPolicy, bcrypt12, true},
		{"argon2id same", argonPolicy, argonHash(256, 1, 2), false},
		{"argon2id other m", argonPolicy, argonHash(512, 1, 2), true},
		{"argon2id other t", argonPolicy, argonHash(256, 2, 2), true},
		{"argon2id other p", argonPolicy, argonHash(256, 1, 1), true},
		{"argon2id 16-byte digest", argonPolicy, formatArgon2id(256, 1, 2, make([]byte, 16), make([]byte, 16)), true},
		{"argon2id 8-byte salt", argonPolicy, formatArgon2id(256, 1, 2, make([]byte, 8), make([]byte, 32)), true},
		{"Django argon2 with the policy's parameters", argonPolicy, "argon2" + argonHash(256, 1, 2), true},
		{"Django argon2 under argon2id", argonPolicy, djangoArgon2Small, true},
		{"Django pbkdf2 under argon2id", argonPolicy, djangoPBKDF2Small, true},
		{"Django bcrypt_sha256 under argon2id", argonPolicy, djangoBcryptSHA256Long, true},
		{"Django bcrypt under argon2id", argonPolicy, djangoBcrypt72, true},
		{"Django bcrypt_sha256 at the policy's cost", bcryptPolicy, "bcrypt_sha256$" + bcrypt12, true},
		{"Django bcrypt at the policy's cost", bcryptPolicy, "bcrypt$" + bcrypt12, true},
		{"Django pbkdf2 under bcrypt", bcryptPolicy, djangoPBKDF2Small, true},
		{"unusable", argonPolicy, "!x", true},
	} {
		if got := tt.policy.NeedsRehash(mustParseHash(t, tt.hash)); got != tt.want {
			t.Errorf("%s: NeedsRehash %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParsePasswordHashRefusals(t *testing.T) {
	b := bcryptSalty
	argonOK := "$m=256,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw"
	for _, tt := range []struct{ hash, want string }{
		{"garbage", "not a supported password hash"},
		{"hunter2$secret", "not a supported password hash"},
		{" " + b, "not a supported password hash"},
		{strings.Replace(b, "$04$", "$31$", 1), "bcrypt cost 31 is above the maximum 14"},
		{strings.Replace(b, "$04$", "$15$", 1), "bcrypt cost 15 is above the maximum 14"},
		{strings.Replace(b, "$04$", "$03$", 1), "bcrypt cost 3 is below the minimum 4"},
		{strings.Replace(b, "$04$", "$+4$", 1), "malformed"},
		{"bcrypt$" + strings.Replace(b, "$04$", "$31$", 1), "Django bcrypt hash: bcrypt cost 31"},
		{"bcrypt_sha256$" + strings.Replace(b, "$04$", "$20$", 1), "Django bcrypt_sha256 hash: bcrypt cost 20"},
		{b[:59], "bcrypt hash: malformed"},
		{b + "x", "bcrypt hash: malformed"},
		{b[:20] + "!" + b[21:], "malformed salt"},
		{b[:59] + "z", "malformed digest"},
		{strings.Replace(b, "$2b$", "$2x$", 1), "bcrypt $2x$"},
		{"bcrypt$", "Django bcrypt hash: malformed"},
		{"bcrypt_sha256$" + b[1:], "malformed"},
		{"$argon2id$v=19$m=4194304,t=1,p=1$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "argon2 memory m=4194304 KiB is above the maximum 262144"},
		{"argon2$argon2id$v=19$m=4194304,t=1,p=1$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "Django argon2 hash: argon2 memory m=4194304"},
		{"$argon2id$v=19$m=15,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "below the minimum 8×p = 16"},
		{"$argon2id$v=19$m=256,t=0,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "time t=0"},
		{"$argon2id$v=19$m=256,t=17,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "time t=17 is above the maximum 16"},
		{"$argon2id$v=19$m=256,t=1,p=0$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "parallelism p=0"},
		{"$argon2id$v=19$m=256,t=1,p=17$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "parallelism p=17 is above the maximum 16"},
		{"$argon2id$v=19$m=0256,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "malformed parameters"},
		{"$argon2id$v=19$t=1,m=256,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "malformed parameters"},
		{"$argon2id$v=19$m=99999999999,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "malformed parameters"},
		{"$argon2id$v=16" + argonOK, "want version v=19"},
		{"$argon2id" + argonOK, "malformed"},
		{"$argon2id$v=19$m=256,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6g==$apKshP5CI+8Af0DU/+Skpw", "salt is not unpadded base64"},
		{"$argon2id$v=19$m=256,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6h$apKshP5CI+8Af0DU/+Skpw", "salt is not unpadded base64"},
		{"$argon2id$v=19$m=256,t=1,p=2$c2FsdA$apKshP5CI+8Af0DU/+Skpw", "salt is 4 bytes, want 8 to 64"},
		{"$argon2id$v=19$m=256,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU", "digest is 12 bytes, want 16 to 64"},
		{"$argon2id$v=19$m=256,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw$", "malformed"},
		{"$argon2i$v=19" + argonOK, "unsupported password hash scheme: argon2i"},
		{"argon2$argon2i$v=19" + argonOK, "only argon2id is supported, not argon2i"},
		{"argon2$argon2d$v=19" + argonOK, "only argon2id is supported, not argon2d"},
		{"argon2$$argon2id$v=19" + argonOK, "only argon2id is supported, not this form"},
		{"pbkdf2_sha256$0$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", "0 iterations are below the minimum 1000"},
		{"pbkdf2_sha256$999$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", "999 iterations are below the minimum 1000"},
		{"pbkdf2_sha256$4500001$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", "above the maximum 4500000"},
		{"pbkdf2_sha256$10000000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", "above the maximum 4500000"},
		{"$argon2id$v=19$m=262144,t=6,p=1$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "m×t=1572864 KiB is above the maximum 1310720"},
		{"$argon2id$v=19$m=131072,t=11,p=4$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "m×t=1441792 KiB is above the maximum 1310720"},
		{"pbkdf2_sha256$01000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", "iterations are not a decimal number"},
		{"pbkdf2_sha256$1_000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", "iterations are not a decimal number"},
		{"pbkdf2_sha256$1000$$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", "salt is 0 bytes"},
		{"pbkdf2_sha256$1000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA", "digest is not the base64 of 32 bytes"},
		{"pbkdf2_sha256$1000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YB=", "digest is not the base64 of 32 bytes"},
		{"pbkdf2_sha256$1000$salt$c2FsdA==", "digest is not the base64 of 32 bytes"},
		{"pbkdf2_sha256$1000$salt$x$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", "malformed"},
		{"pbkdf2_sha256$1000$salt", "malformed"},
		{"pbkdf2_sha256$1000$salt$fO5nEjze04FaEq+zdzE9prZ5\nbNC5sTt4re4cRcuj+YA=", "digest is not the base64 of 32 bytes"},
		{"$argon2id$v=19$m=256,t=1,p=2$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw\n", "digest is not unpadded base64"},
		{"$argon2id$v=19$m=256,t=1,p=2$jodQ4PJLS5y\r\nUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "salt is not unpadded base64"},
		{b[:40] + "\n" + b[41:], "malformed digest"},
		{"sha1$salt$0123456789abcdef0123456789abcdef01234567", "Django sha1"},
		{"md5$salt$0123456789abcdef0123456789abcdef", "Django md5"},
		{"0123456789abcdef0123456789abcdef", "unsalted MD5"},
		{"pbkdf2_sha1$260000$salt$x", "Django pbkdf2_sha1"},
		{"scrypt$16384$salt$8$1$x", "Django scrypt"},
		{"$6$salt$x", "sha512-crypt"},
	} {
		_, err := ParseHash(tt.hash)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.hash, err, tt.want)
			continue
		}
		// An error names the scheme at most, never the salt or digest.
		for _, secret := range []string{"jodQ4PJLS5yUwgTvpFuD6g", "apKshP5CI", "fO5nEjze", "QPpKMfPj3", "hunter2", "garbage"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%q: error %q shows part of the hash", tt.hash, err)
			}
		}
	}
}

// TestPasswordHashUnusable: Django's "!…" and the empty string load and
// never match.
func TestPasswordHashUnusable(t *testing.T) {
	for _, s := range []string{"", "!", "!pPJvZJQDbV6DdaLlglhCaQuEkhrsojTNaKKYDn0l", "!" + bcryptSalty} {
		h := mustParseHash(t, s)
		if h.Usable() || h.Scheme() != SchemeUnusable || h.Work() != 0 {
			t.Errorf("%q: usable %v, scheme %s, work %v", s, h.Usable(), h.Scheme(), h.Work())
		}
		for _, pw := range []string{"", s, "salty", strings.TrimPrefix(s, "!")} {
			if h.Verify([]byte(pw)) {
				t.Errorf("%q matches %q", s, pw)
			}
		}
	}
}

// TestPasswordHashBcrypt72 pins the 72-byte rule: a plain bcrypt hash never
// matches a longer password (x/crypto would: FACTS.md), while
// bcrypt_sha256 has no limit.
func TestPasswordHashBcrypt72(t *testing.T) {
	p72 := strings.Repeat("p", 72)
	s, err := phTestPolicy(SchemeBcrypt).Hash([]byte(p72))
	if err != nil {
		t.Fatal(err)
	}
	if bcrypt.CompareHashAndPassword([]byte(s), []byte(p72+"x")) != nil {
		t.Log("x/crypto no longer matches a 73-byte password against its first 72 bytes")
	}
	h := mustParseHash(t, s)
	if !h.Verify([]byte(p72)) {
		t.Error("72 × p does not match its own hash")
	}
	if h.Verify([]byte(p72 + "x")) {
		t.Error("72 × p + x matches the hash of 72 × p")
	}
	long := strings.Repeat("ł", 50)
	h = mustParseHash(t, djangoBcryptSHA256Long)
	if !h.Verify([]byte(long)) || h.Verify([]byte(long[:72])) {
		t.Error("bcrypt_sha256 does not tell a 100-byte password from its first 72 bytes")
	}
	dummy, err := DummyLike(h)
	if err != nil {
		t.Fatal(err)
	}
	if dummy.Verify([]byte(long)) {
		t.Error("a dummy matches")
	}
}

func TestPasswordHashWork(t *testing.T) {
	work := func(s string) float64 { return mustParseHash(t, s).Work() }
	cost := func(c string) string { return strings.Replace(bcryptSalty, "$04$", "$"+c+"$", 1) }
	argon := func(m uint32) string { return formatArgon2id(m, 2, 1, make([]byte, 16), make([]byte, 32)) }
	for _, tt := range []struct{ slower, faster string }{
		{cost("12"), cost("04")},
		{cost("12"), cost("11")},
		{"bcrypt$" + cost("12"), cost("10")},
		{argon(100 << 10), argon(19 << 10)},
		{argon(19 << 10), argon(64)},
		{"pbkdf2_sha256$260000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", djangoPBKDF2Small},
		{djangoPBKDF2Small, "!"},
	} {
		if ws, wf := work(tt.slower), work(tt.faster); ws <= wf {
			t.Errorf("work(%.40s…) = %v, not above work(%.40s…) = %v", tt.slower, ws, tt.faster, wf)
		}
	}
	// Calibrated to FACTS.md: bcrypt 12 about 0.23 s, OWASP's argon2id
	// about 27 ms, Django's PBKDF2 of the same order as its other hashers.
	for _, tt := range []struct {
		hash     string
		min, max float64
	}{
		{cost("12"), 0.2, 0.26},
		{cost("10"), 0.05, 0.065},
		{argon(19 << 10), 0.02, 0.035},
		{"pbkdf2_sha256$260000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", 0.02, 0.3},
	} {
		if w := work(tt.hash); w < tt.min || w > tt.max {
			t.Errorf("work(%.40s…) = %v s, want %v to %v", tt.hash, w, tt.min, tt.max)
		}
	}
}

func TestDummyLike(t *testing.T) {
	for _, s := range []string{
		bcryptSalty,
		"bcrypt$" + bcryptSalty,
		"bcrypt_sha256$" + bcryptSalty,
		phcArgon2Small,
		djangoArgon2Small,
		djangoPBKDF2Small,
		"pbkdf2_sha256$1000$" + strings.Repeat("s", 100) + "$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=",
	} {
		h := mustParseHash(t, s)
		d, err := DummyLike(h)
		if err != nil {
			t.Fatalf("%.24s…: %v", s, err)
		}
		if d.Scheme() != h.Scheme() || d.Cost != h.Cost || d.MemoryKiB != h.MemoryKiB || d.Time != h.Time ||
			d.Threads != h.Threads || d.Iterations != h.Iterations || len(d.salt) != len(h.salt) ||
			len(d.digest) != len(h.digest) || d.Work() != h.Work() {
			t.Errorf("%.24s…: dummy %+v unlike %+v", s, d, h)
		}
		if slices.Equal(d.salt, h.salt) && (h.bcrypt == nil || string(d.bcrypt[7:29]) == string(h.bcrypt[7:29])) {
			t.Errorf("%.24s…: dummy reuses the salt", s)
		}
		for _, pw := range []string{"", "salty", "grâce", "contraseña", "phc-password"} {
			if d.Verify([]byte(pw)) {
				t.Errorf("%.24s…: dummy matches %q", s, pw)
			}
		}
	}
	d, err := DummyLike(mustParseHash(t, "!"))
	if err != nil {
		t.Fatal(err)
	}
	if DefaultHashPolicy().NeedsRehash(d) {
		t.Errorf("dummy for an unusable hash is %+v, not the default policy's", d)
	}
	d, err = phTestPolicy(SchemeBcrypt).Dummy()
	if err != nil || d.Scheme() != SchemeBcrypt || d.Cost != 4 {
		t.Errorf("bcrypt policy dummy %+v, %v", d, err)
	}
}

// FuzzParsePasswordHash: the parser never panics, and what it accepts has
// one of the listed schemes and a sane cost.
func FuzzParsePasswordHash(f *testing.F) {
	for _, s := range []string{
		"", "!", "garbage", bcryptSalty, bcryptSaltyNonCanonical, "bcrypt$" + bcryptSalty,
		djangoBcrypt72, djangoBcryptSHA256Long, djangoPBKDF2Small, djangoArgon2Small, phcArgon2Small,
		"pbkdf2_sha256$260000$ZYMKze1OE1xyVUup0UdM5i$b/CyQ6q4eehZ4mlkJ7RMgL18glwjstFt9j0KA0KcicQ=",
		"argon2$argon2id$v=19$m=102400,t=2,p=8$enFMdmMzU1dQWnJlcGFGbUJtY1VBZA$7Oksy3QIlZjR2gKm9ICt7w",
		"$argon2id$v=19$m=4294967295,t=1,p=255$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw",
		"sha1$a$b", "$2a$99$",
	} {
		f.Add(s)
	}
	schemes := []string{SchemeBcrypt, SchemeArgon2id, SchemePBKDF2, SchemeDjangoArgon2, SchemeBcryptSHA256, SchemeDjangoBcrypt, SchemeUnusable}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHash(s)
		if err != nil {
			if h != nil {
				t.Fatalf("%q: a hash and an error", s)
			}
			return
		}
		if !slices.Contains(schemes, h.Scheme()) {
			t.Fatalf("%q: scheme %q", s, h.Scheme())
		}
		if h.Usable() != (h.Scheme() != SchemeUnusable) {
			t.Fatalf("%q: usable %v for %s", s, h.Usable(), h.Scheme())
		}
		// What loads is written exactly as its origin writes it: Django
		// compares whole strings, and argon2's decoder is as strict.
		if e, ok := phEncode(h); ok && e != s {
			t.Fatalf("%q loads, but is written %q", s, e)
		}
		// About a second at most, whatever the scheme: bcrypt at
		// MaxBcryptCost 0.92 s, argon2 at maxArgon2Work on one lane 1.05 s,
		// PBKDF2 at its maximum 0.95 s.
		if w := h.Work(); !(w >= 0 && w <= 1.1) {
			t.Fatalf("%q: work %v", s, w)
		}
	})
}

// phEncode writes h as its origin would; false for an unusable hash, whose
// text is not kept.
func phEncode(h *Hash) (string, bool) {
	switch h.kind {
	case SchemeBcrypt:
		return string(h.bcrypt), true
	case SchemeDjangoBcrypt:
		return "bcrypt$" + string(h.bcrypt), true
	case SchemeBcryptSHA256:
		return "bcrypt_sha256$" + string(h.bcrypt), true
	case SchemeArgon2id:
		return formatArgon2id(h.MemoryKiB, h.Time, h.Threads, h.salt, h.digest), true
	case SchemeDjangoArgon2:
		return "argon2" + formatArgon2id(h.MemoryKiB, h.Time, h.Threads, h.salt, h.digest), true
	case SchemePBKDF2:
		return fmt.Sprintf("pbkdf2_sha256$%d$%s$%s", h.Iterations, h.salt, h.digest), true
	}
	return "", false
}

// BenchmarkVerify times one verify per scheme at the Django fixture's
// parameters, and at our policy's defaults.
func BenchmarkVerify(b *testing.B) {
	bcrypt12, err := HashPolicy{Scheme: SchemeBcrypt, BcryptCost: 12}.Hash([]byte("x"))
	if err != nil {
		b.Fatal(err)
	}
	owasp, err := DefaultHashPolicy().Hash([]byte("x"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bm := range []struct{ name, hash string }{
		{"bcrypt/cost=12", bcrypt12},
		{"argon2id/m=19MiB,t=2,p=1", owasp},
		{"pbkdf2_sha256/i=260000", "pbkdf2_sha256$260000$ZYMKze1OE1xyVUup0UdM5i$b/CyQ6q4eehZ4mlkJ7RMgL18glwjstFt9j0KA0KcicQ="},
		{"django_argon2/m=100MiB,t=2,p=8", "argon2$argon2id$v=19$m=102400,t=2,p=8$enFMdmMzU1dQWnJlcGFGbUJtY1VBZA$7Oksy3QIlZjR2gKm9ICt7w"},
		{"bcrypt_sha256/cost=12", "bcrypt_sha256$$2b$12$z6Fi4K9MKWbTrIw1hjoztugLJsxIlVUKPw3wdsPqe5yXAOjYt6Gs2"},
		{"django_bcrypt/cost=12", "bcrypt$$2b$12$L5sL1JMaWWP4lDNm9RmjourVTGCBYj2uJ3a/3Jy.UKWK6IC/N0q72"},
	} {
		h := mustParseHash(b, bm.hash)
		b.Run(bm.name, func(b *testing.B) {
			for b.Loop() {
				h.Verify([]byte("not the password"))
			}
			b.ReportMetric(h.Work()*1e3, "est-ms/op")
		})
	}
}
