package password

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
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

// Vectors made by Django 4.2.28 itself, from testdata/djangohashes (where
// make_vectors.py says how, and Django's check_password matched each).
const (
	// PBKDF2SHA1PasswordHasher.encode("contraseña", "sälz", 1000).
	djangoPBKDF2SHA1Small = "pbkdf2_sha1$1000$sälz$26K/zg79EIJ5aK6rCGanfdsOX4o="
	// argon2i as Django's older hasher made it (argon2-cffi, type I, m=64, t=1,
	// p=1) of "grâce"; Django 4.2 matches it.
	djangoArgon2iSmall = "argon2$argon2i$v=19$m=64,t=1,p=1$NEZZZnR4eERwV3dranA0UQ$hsiqQoADkpQbgqtlCTxmQQ"
	// ScryptPasswordHasher.encode("zoë", "sälz", n=16, r=1, p=3).
	djangoScryptSmall = "scrypt$16$sälz$1$3$kduxxzgTRYg0xhIglfyxUWi1TStAu9eEgcJrwp8f/BeqTxqkHNVUZKe+LSBTtvHRtjEMejRvmSSISW1CGVRhxg=="
	// SHA1PasswordHasher and MD5PasswordHasher .encode("contraseña", "sälz").
	djangoSHA1 = "sha1$sälz$b3040c38d7e52d1b4ab0464faaae26e8531fb39b"
	djangoMD5  = "md5$sälz$d4a9f4345008517c85cc96f1f8f408fd"
	// UnsaltedSHA1PasswordHasher and UnsaltedMD5PasswordHasher .encode of
	// "c-with-classes-1979" and "benevolent-dictator-1991".
	djangoUnsaltedSHA1 = "sha1$$fddd962c355096c5793673c3404626d35e9456d7"
	djangoUnsaltedMD5  = "e54d28c10f6de781bcffcb2e8ad00e58"
	// The Django 4.2 fixture's pbkdf2_sha1 and scrypt hashes, at Django's
	// default parameters.
	djangoPBKDF2SHA1Default = "pbkdf2_sha1$600000$rD34jc2hj4L4TtdtSe91oF$/en4quLFodF1nQoTol8Kwr0FUF8="
	djangoScryptDefault     = "scrypt$16384$fRIoyEKkBDdR38GfF4jZHT$8$1$3sqqxx2T32A9O8f+fiQfFet8/M4L8Qw9b3h5I8oX9EvmsMc0OOLeGfsJt2Al9O7gFa3Qa2PfLkOUNP/O+LlbVg=="
)

// wrapLegacy returns the legacy Django hash s wrapped under policy p.
func wrapLegacy(t testing.TB, s string, p HashPolicy) string {
	t.Helper()
	l, ok, err := ParseDjangoLegacy(s)
	if !ok || err != nil {
		t.Fatalf("ParseDjangoLegacy(%q) = %v, %v; want a legacy form", s, ok, err)
	}
	w, err := l.Wrap(p)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

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
	checkDjangoFixture(t, djangoDumpPath, djangoSpecPath, false, nil)
}

// TestPasswordHashDjango42Fixture checks every user of the real Django 4.2
// dump, one per hash form Django has shipped: each form Django verifies
// with a slow hash loads and is checked as Django checks it; each legacy
// fast form is refused as it is and matches once wrapped, under either
// policy; crypt is refused, with its reason. Only the first user of each
// new form is checked against passwords; the others, and the forms of the
// 3.2 dump, are only loaded: they add nothing that the 3.2 dump's test does
// not check, at a fifth of a second a check (seconds under -race).
func TestPasswordHashDjango42Fixture(t *testing.T) {
	checkDjangoFixture(t, django42DumpPath, django42SpecPath, true, []string{
		SchemePBKDF2SHA1, SchemeDjangoArgon2i, SchemeScrypt,
		SchemeWrappedSHA1, SchemeWrappedMD5, SchemeWrappedUnsaltedSHA1, SchemeWrappedUnsaltedMD5,
	})
}

// The Django 4.2 fixture (testdata/django42, a verbatim copy of the shared
// one), and vectors made by Django 4.2's own hashers (testdata/djangohashes,
// with the script that made them).
const (
	django42DumpPath    = "../../testdata/django42/dumpdata.json"
	django42SpecPath    = "../../testdata/django42/spec.json"
	djangoVectorsPath   = "../../testdata/djangohashes/vectors.json"
	djangoCryptRefusal  = "DES crypt(3) reads only the first 8 characters"
	djangoLegacyRefusal = "authsvc user import --from django"
)

// djangoHasherScheme is the scheme each Django hasher's hashes load as
// (the legacy fast ones: once wrapped).
var djangoHasherScheme = map[string]string{
	"pbkdf2_sha256": SchemePBKDF2, "pbkdf2_sha1": SchemePBKDF2SHA1,
	"argon2": SchemeDjangoArgon2, "argon2i": SchemeDjangoArgon2i, "scrypt": SchemeScrypt,
	"bcrypt_sha256": SchemeBcryptSHA256, "bcrypt": SchemeDjangoBcrypt,
	"sha1": SchemeWrappedSHA1, "md5": SchemeWrappedMD5,
	"unsalted_sha1": SchemeWrappedUnsaltedSHA1, "unsalted_md5": SchemeWrappedUnsaltedMD5,
}

// loadDjangoHash returns what authsvc stores for a Django hash: the hash
// itself, or for a legacy fast form, its wrapping under policy (after
// checking that the bare form is refused at load, pointing to the
// importer).
func loadDjangoHash(t testing.TB, encoded string, policy HashPolicy) *Hash {
	t.Helper()
	legacy, ok, err := ParseDjangoLegacy(encoded)
	if err != nil {
		t.Fatalf("ParseDjangoLegacy(%.24q…) = %v", encoded, err)
	}
	if !ok {
		return mustParseHash(t, encoded)
	}
	if _, err := ParseHash(encoded); err == nil || !strings.Contains(err.Error(), djangoLegacyRefusal) {
		t.Errorf("ParseHash(%.24q…), a bare legacy form = %v; want refused, pointing to %q", encoded, err, djangoLegacyRefusal)
	}
	wrapped, err := legacy.Wrap(policy)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(wrapped, encoded[strings.LastIndexByte(encoded, '$')+1:]) {
		t.Errorf("the wrapped form %q holds the legacy digest", wrapped)
	}
	h := mustParseHash(t, wrapped)
	if h.Scheme() != legacy.Scheme() || h.inner != policy.Scheme {
		t.Errorf("wrapped %.24q… is %s in %s; want %s in %s", encoded, h.Scheme(), h.inner, legacy.Scheme(), policy.Scheme)
	}
	return h
}

// checkDjangoFixture checks every user of a real Django dump against its
// spec's passwords (onePerHasher: only the first user of each scheme in
// want; the others' hashes are only loaded), and that the dump holds a hash
// of each scheme in want.
func checkDjangoFixture(t *testing.T, dumpPath, specPath string, onePerHasher bool, want []string) {
	dumpJSON, err := os.ReadFile(dumpPath)
	if err != nil {
		t.Fatalf("the Django fixture is missing: %v", err)
	}
	specJSON, err := os.ReadFile(specPath)
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
	var seen sync.Map
	checked := map[string]bool{}
	t.Run("users", func(t *testing.T) {
		for _, u := range spec.Users {
			encoded, ok := hashOf[u.Username]
			if !ok {
				t.Fatalf("%s: not in the dump", u.Username)
			}
			if u.Password == nil {
				h := mustParseHash(t, encoded)
				seen.Store(h.Scheme(), true)
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
			if *u.Hasher == "crypt" {
				_, isLegacy, _ := ParseDjangoLegacy(encoded)
				if _, err := ParseHash(encoded); err == nil || isLegacy || !strings.Contains(err.Error(), djangoCryptRefusal) {
					t.Errorf("%s: crypt hash = %v, legacy %v; want refused with the reason %q", u.Username, err, isLegacy, djangoCryptRefusal)
				}
				continue
			}
			if onePerHasher && (checked[*u.Hasher] || !slices.Contains(want, djangoHasherScheme[*u.Hasher])) {
				h := loadDjangoHash(t, encoded, phTestPolicy(SchemeBcrypt))
				seen.Store(h.Scheme(), true)
				if h.Scheme() != djangoHasherScheme[*u.Hasher] {
					t.Errorf("%s: scheme %s, want %s", u.Username, h.Scheme(), djangoHasherScheme[*u.Hasher])
				}
				continue
			}
			checked[*u.Hasher] = true
			t.Run(u.Username, func(t *testing.T) {
				t.Parallel()
				policies := []HashPolicy{DefaultHashPolicy()}
				if _, legacy, _ := ParseDjangoLegacy(encoded); legacy {
					policies = append(policies, phTestPolicy(SchemeBcrypt))
				}
				for _, policy := range policies {
					h := loadDjangoHash(t, encoded, policy)
					seen.Store(h.Scheme(), true)
					if got, want := h.Scheme(), djangoHasherScheme[*u.Hasher]; got != want {
						t.Errorf("scheme %s, want %s", got, want)
					}
					if !h.Usable() || !policy.NeedsRehash(h) {
						t.Errorf("usable %v, needs a rehash %v; want both", h.Usable(), policy.NeedsRehash(h))
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
				}
			})
		}
	})
	for _, s := range append([]string{SchemePBKDF2, SchemeDjangoArgon2, SchemeBcryptSHA256, SchemeDjangoBcrypt, SchemeUnusable}, want...) {
		if _, ok := seen.Load(s); !ok {
			t.Errorf("the fixture has no %s hash", s)
		}
	}
}

// TestPasswordHashDjango42Vectors checks the hashes Django 4.2's own
// hashers made at small parameters (testdata/djangohashes) against what
// Django's check_password said of them, the legacy fast forms once wrapped
// under each policy; and that every hash Django never matches for its own
// password is refused, at load and by the importer.
func TestPasswordHashDjango42Vectors(t *testing.T) {
	data, err := os.ReadFile(djangoVectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Vectors []struct {
			Hasher, Hash string
			Match, Miss  []string
		}
		Never []struct{ Hasher, Hash, Password, Why, Django string }
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, v := range doc.Vectors {
		policies := []HashPolicy{phTestPolicy(SchemeArgon2id)}
		if _, legacy, _ := ParseDjangoLegacy(v.Hash); legacy {
			policies = append(policies, phTestPolicy(SchemeBcrypt))
		}
		for _, policy := range policies {
			h := loadDjangoHash(t, v.Hash, policy)
			seen[v.Hasher]++
			if want := djangoHasherScheme[v.Hasher]; h.Scheme() != want {
				t.Errorf("%.30s…: scheme %s, want %s", v.Hash, h.Scheme(), want)
			}
			for _, pw := range v.Match {
				if !h.Verify([]byte(pw)) {
					t.Errorf("%.30s… (%s): %.20q… does not match; Django matched it", v.Hash, h.Shape(), pw)
				}
			}
			for _, pw := range v.Miss {
				if h.Verify([]byte(pw)) {
					t.Errorf("%.30s… (%s): %.20q… matches; Django did not match it", v.Hash, h.Shape(), pw)
				}
			}
		}
	}
	for hasher := range djangoHasherScheme {
		if hasher != "pbkdf2_sha256" && hasher != "argon2" && seen[hasher] < 3 {
			t.Errorf("%d vectors of %s; want an edge case of each kind", seen[hasher], hasher)
		}
	}
	if len(doc.Never) < 10 {
		t.Fatalf("%d hashes Django never matches; want them all", len(doc.Never))
	}
	for _, n := range doc.Never {
		_, _, legacyErr := ParseDjangoLegacy(n.Hash)
		h, err := ParseHash(n.Hash)
		if err == nil {
			t.Errorf("%q (%s; Django %s) loads as %s; want refused", n.Hash, n.Why, n.Django, h.Scheme())
		}
		if l, ok, _ := ParseDjangoLegacy(n.Hash); ok && legacyErr == nil {
			t.Errorf("%q (%s; Django %s) would be imported as %s; want refused", n.Hash, n.Why, n.Django, l.Scheme())
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
		{"Django pbkdf2_sha1 under argon2id", argonPolicy, djangoPBKDF2SHA1Small, true},
		{"Django pbkdf2_sha1 under bcrypt", bcryptPolicy, djangoPBKDF2SHA1Small, true},
		{"Django argon2i under argon2id", argonPolicy, djangoArgon2iSmall, true},
		{"Django argon2i with the policy's parameters", argonPolicy, "argon2" + strings.Replace(argonHash(256, 1, 2), "$argon2id$", "$argon2i$", 1), true},
		{"Django scrypt under argon2id", argonPolicy, djangoScryptSmall, true},
		{"Django scrypt under bcrypt", bcryptPolicy, djangoScryptDefault, true},
		{"wrapped sha1 in the argon2id policy's own hash", argonPolicy, wrapLegacy(t, djangoSHA1, argonPolicy), true},
		{"wrapped md5 in the argon2id policy's own hash", argonPolicy, wrapLegacy(t, djangoMD5, argonPolicy), true},
		{"wrapped unsalted_sha1 in the bcrypt policy's own hash", bcryptPolicy, "wrapped_unsalted_sha1$$" + bcrypt12, true},
		{"wrapped unsalted_md5 in the bcrypt policy's own hash", bcryptPolicy, "wrapped_unsalted_md5$$" + bcrypt12, true},
		{"unusable", argonPolicy, "!x", true},
	} {
		if got := tt.policy.NeedsRehash(mustParseHash(t, tt.hash)); got != tt.want {
			t.Errorf("%s: NeedsRehash %v, want %v", tt.name, got, tt.want)
		}
	}
}

// scryptDigest is the digest of the fixture's scrypt hash: standard padded
// base64 of 64 bytes.
const scryptDigest = "3sqqxx2T32A9O8f+fiQfFet8/M4L8Qw9b3h5I8oX9EvmsMc0OOLeGfsJt2Al9O7gFa3Qa2PfLkOUNP/O+LlbVg=="

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
		{"argon2$argon2d$v=19" + argonOK, "only argon2id and argon2i are supported (Django never wrote another), not argon2d"},
		{"argon2$$argon2id$v=19" + argonOK, "only argon2id and argon2i are supported (Django never wrote another), not this form"},
		{"argon2$argon2i" + argonOK, "malformed: no version field, which is argon2 1.0 (v=16)"},
		{"argon2$argon2i$v=16" + argonOK, "Django argon2 (argon2i) hash: want version v=19"},
		{"argon2$argon2i$v=19$m=4194304,t=1,p=1$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "Django argon2 (argon2i) hash: argon2 memory m=4194304"},
		{"argon2$argon2i$v=19$m=262144,t=6,p=1$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "m×t=1572864 KiB is above the maximum 1310720"},
		{"argon2$argon2i$v=19$m=256,t=1,p=2$c2FsdA$apKshP5CI+8Af0DU/+Skpw", "salt is 4 bytes, want 8 to 64"},
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
		{"sha1$salt$0123456789abcdef0123456789abcdef01234567", "Django sha1 (SHA1PasswordHasher): a fast hash, never stored as it is; import the Django dump with `authsvc user import --from django`"},
		{"md5$salt$0123456789abcdef0123456789abcdef", "Django md5 (MD5PasswordHasher): a fast hash, never stored as it is; import the Django dump with `authsvc user import --from django`"},
		{"sha1$$0123456789abcdef0123456789abcdef01234567", "Django unsalted_sha1 (UnsaltedSHA1PasswordHasher): a fast hash, never stored as it is; import"},
		{"md5$$0123456789abcdef0123456789abcdef", "Django unsalted_md5 (UnsaltedMD5PasswordHasher): a fast hash, never stored as it is; import"},
		{"0123456789abcdef0123456789abcdef", "Django unsalted_md5 (ancient Django): a fast hash, never stored as it is; import"},
		{"0123456789ABCDEF0123456789ABCDEF", "not a supported password hash"},
		{"unsalted_sha1$$0123456789abcdef0123456789abcdef01234567", "Django unsalted_sha1 under its own name, which Django never matches"},
		{"crypt$$t2uO5z4/JT07.", "Django crypt (CryptPasswordHasher), refused: DES crypt(3) reads only the first 8 characters of a password; have the user set a new password in Django"},
		{"pbkdf2_sha1$260000$salt$x", "Django pbkdf2_sha1 hash: digest is not the base64 of 20 bytes"},
		{"pbkdf2_sha1$260000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", "Django pbkdf2_sha1 hash: digest is not the base64 of 20 bytes"},
		{"pbkdf2_sha1$4000001$salt$upWEiptc4R8bQ9fRZ9hBPape0is=", "Django pbkdf2_sha1 hash: 4000001 iterations are above the maximum 4000000"},
		{"pbkdf2_sha1$999$salt$upWEiptc4R8bQ9fRZ9hBPape0is=", "999 iterations are below the minimum 1000"},
		{"pbkdf2_sha1$1000$$upWEiptc4R8bQ9fRZ9hBPape0is=", "salt is 0 bytes"},
		{"pbkdf2_sha1$1000$salt$upWEiptc4R8bQ9fRZ9hBPape0is", "digest is not the base64 of 20 bytes"},
		{"scrypt$16384$salt$8$1$x", "Django scrypt hash: digest is not the base64 of 64 bytes"},
		{"scrypt$16384$salt$8$1", "Django scrypt hash: malformed"},
		{"scrypt$16384$salt$8$1$" + scryptDigest + "$", "Django scrypt hash: malformed"},
		{"scrypt$16384$salt$8$1$" + strings.TrimRight(scryptDigest, "="), "digest is not the base64 of 64 bytes"},
		{"scrypt$016384$salt$8$1$" + scryptDigest, "N, r and p must be decimal numbers"},
		{"scrypt$16384$salt$+8$1$" + scryptDigest, "N, r and p must be decimal numbers"},
		{"scrypt$1000$salt$8$1$" + scryptDigest, "scrypt N=1000 is not a power of 2"},
		{"scrypt$1$salt$8$1$" + scryptDigest, "scrypt N=1 is not a power of 2"},
		{"scrypt$0$salt$8$1$" + scryptDigest, "scrypt N=0 is not a power of 2"},
		{"scrypt$16384$salt$0$1$" + scryptDigest, "scrypt r=0 is below the minimum 1"},
		{"scrypt$16384$salt$8$0$" + scryptDigest, "scrypt p=0 is below the minimum 1"},
		{"scrypt$32768$salt$8$1$" + scryptDigest, "scrypt needs 33557504 bytes (128·r·(N+2) + 128·r·p), above OpenSSL's 33554432, where Django raises"},
		{"scrypt$16384$salt$8$16384$" + scryptDigest, "above OpenSSL's 33554432"},
		{"scrypt$2147483648$salt$8$1$" + scryptDigest, "more than OpenSSL's 32 MiB"},
		{"scrypt$65536$salt$1$1$" + scryptDigest, "scrypt N=65536 is not below 2^(16·r) = 2^16"},
		{"scrypt$16384$salt$8$27$" + scryptDigest, "scrypt N·r·p=3538944 is above the maximum 3500000"},
		{"scrypt$16384$$8$1$" + scryptDigest, "Django scrypt hash: salt is 0 bytes"},
		{"wrapped_sha1$salt$" + b, ""},
		{"wrapped_sha1$$" + b, "wrapped_sha1 hash: salt is 0 bytes, want 1 to 128"},
		{"wrapped_md5$" + strings.Repeat("s", 129) + "$" + b, "wrapped_md5 hash: salt is 129 bytes"},
		{"wrapped_unsalted_sha1$salt$" + b, "wrapped_unsalted_sha1 hash: malformed (an unsalted form has an empty salt"},
		{"wrapped_unsalted_md5$" + b, "wrapped_unsalted_md5 hash: the wrapped hash is not bcrypt or argon2id"},
		{"wrapped_sha1$salt", "wrapped_sha1 hash: malformed"},
		{"wrapped_sha1$salt$" + djangoPBKDF2Small, "the wrapped hash is not bcrypt or argon2id"},
		{"wrapped_sha1$salt$bcrypt$" + b, "the wrapped hash is not bcrypt or argon2id"},
		{"wrapped_sha1$salt$wrapped_sha1$salt$" + b, "the wrapped hash is not bcrypt or argon2id"},
		{"wrapped_sha1$salt$" + strings.Replace(b, "$04$", "$15$", 1), "wrapped_sha1 hash: bcrypt cost 15 is above the maximum 14"},
		{"wrapped_md5$salt$$argon2id$v=19$m=4194304,t=1,p=1$jodQ4PJLS5yUwgTvpFuD6g$apKshP5CI+8Af0DU/+Skpw", "wrapped_md5 hash: argon2 memory m=4194304"},
		{"wrapped_md5$salt$$argon2i$v=19" + argonOK, "the wrapped hash is not bcrypt or argon2id"},
		{"wrapped_sha256$salt$" + b, "unknown wrapped form"},
		{"$6$salt$x", "sha512-crypt"},
	} {
		_, err := ParseHash(tt.hash)
		if tt.want == "" { // the control: accepted as it is
			if err != nil {
				t.Errorf("%q: %v; want accepted", tt.hash, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.hash, err, tt.want)
			continue
		}
		// An error names the scheme at most, never the salt or digest.
		for _, secret := range []string{"jodQ4PJLS5yUwgTvpFuD6g", "apKshP5CI", "fO5nEjze", "QPpKMfPj3", "hunter2", "garbage", "0123456789", "t2uO5z4", "upWEipt", "3sqqxx2T"} {
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
// matches a longer password (x/crypto v0.58.0's CompareHashAndPassword would), while
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
		{djangoPBKDF2SHA1Default, djangoPBKDF2SHA1Small},
		{djangoPBKDF2SHA1Default, strings.Replace(djangoPBKDF2SHA1Default, "pbkdf2_sha1$600000$", "pbkdf2_sha1$599999$", 1)},
		{djangoScryptDefault, djangoScryptSmall},
		{djangoScryptDefault, strings.Replace(djangoScryptDefault, "$8$1$", "$4$1$", 1)},
		{strings.Replace(djangoScryptDefault, "$8$1$", "$8$2$", 1), djangoScryptDefault},
		{"argon2" + strings.Replace(argon(19<<10), "$argon2id$", "$argon2i$", 1), djangoArgon2iSmall},
		{"wrapped_sha1$s$" + cost("12"), "wrapped_sha1$s$" + cost("11")},
		{djangoScryptSmall, "!"},
	} {
		if ws, wf := work(tt.slower), work(tt.faster); ws <= wf {
			t.Errorf("work(%.40s…) = %v, not above work(%.40s…) = %v", tt.slower, ws, tt.faster, wf)
		}
	}
	// Calibrated to one-core timings on a 2-vCPU machine: bcrypt 12 about 0.23 s, OWASP's argon2id
	// about 27 ms, Django's PBKDF2 of the same order as its other hashers.
	for _, tt := range []struct {
		hash     string
		min, max float64
	}{
		{cost("12"), 0.2, 0.26},
		{cost("10"), 0.05, 0.065},
		{argon(19 << 10), 0.02, 0.035},
		{"pbkdf2_sha256$260000$salt$fO5nEjze04FaEq+zdzE9prZ5bNC5sTt4re4cRcuj+YA=", 0.02, 0.3},
		// Timed here (hash.go): PBKDF2-SHA1 at 600,000 iterations 147 ms,
		// scrypt at Django's default 36 ms.
		{djangoPBKDF2SHA1Default, 0.12, 0.18},
		{djangoScryptDefault, 0.03, 0.045},
		{"argon2" + strings.Replace(argon(19<<10), "$argon2id$", "$argon2i$", 1), 0.02, 0.035},
		// At the ceilings: about a second.
		{"pbkdf2_sha1$4000000$salt$upWEiptc4R8bQ9fRZ9hBPape0is=", 0.9, 1.05},
		{strings.Replace(djangoScryptDefault, "$8$1$", "$8$26$", 1), 0.9, 1.05},
	} {
		if w := work(tt.hash); w < tt.min || w > tt.max {
			t.Errorf("work(%.40s…) = %v s, want %v to %v", tt.hash, w, tt.min, tt.max)
		}
	}
	// A wrapped legacy form costs what the policy hash inside it does.
	argonInner := DefaultHashPolicy()
	for _, tt := range []struct{ wrapped, plain string }{
		{wrapLegacy(t, djangoSHA1, argonInner), policyHash(t, argonInner, "x")},
		{wrapLegacy(t, djangoUnsaltedMD5, argonInner), policyHash(t, argonInner, "x")},
		{"wrapped_md5$s$" + cost("12"), cost("12")},
		{"wrapped_unsalted_sha1$$" + cost("14"), cost("14")},
	} {
		if w, p := work(tt.wrapped), work(tt.plain); w != p {
			t.Errorf("work(%.40s…) = %v; want the policy hash's %v", tt.wrapped, w, p)
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
		djangoPBKDF2SHA1Small,
		djangoArgon2iSmall,
		djangoScryptSmall,
		strings.Replace(djangoScryptDefault, "scrypt$16384$", "scrypt$1024$", 1),
		wrapLegacy(t, djangoSHA1, phTestPolicy(SchemeArgon2id)),
		wrapLegacy(t, djangoMD5, phTestPolicy(SchemeBcrypt)),
		wrapLegacy(t, djangoUnsaltedSHA1, phTestPolicy(SchemeArgon2id)),
		wrapLegacy(t, djangoUnsaltedMD5, phTestPolicy(SchemeBcrypt)),
	} {
		h := mustParseHash(t, s)
		d, err := DummyLike(h)
		if err != nil {
			t.Fatalf("%.24s…: %v", s, err)
		}
		if d.Scheme() != h.Scheme() || d.Shape() != h.Shape() || d.Cost != h.Cost || d.MemoryKiB != h.MemoryKiB || d.Time != h.Time ||
			d.Threads != h.Threads || d.Iterations != h.Iterations || d.ScryptN != h.ScryptN || d.ScryptR != h.ScryptR ||
			d.ScryptP != h.ScryptP || d.inner != h.inner || len(d.legacySalt) != len(h.legacySalt) || len(d.salt) != len(h.salt) ||
			len(d.digest) != len(h.digest) || d.Work() != h.Work() {
			t.Errorf("%.24s…: dummy %+v unlike %+v", s, d, h)
		}
		if slices.Equal(d.salt, h.salt) && (h.bcrypt == nil || string(d.bcrypt[7:29]) == string(h.bcrypt[7:29])) {
			t.Errorf("%.24s…: dummy reuses the salt", s)
		}
		if len(h.legacySalt) > 0 && slices.Equal(d.legacySalt, h.legacySalt) {
			t.Errorf("%.24s…: dummy reuses the legacy salt", s)
		}
		for _, pw := range []string{"", "salty", "grâce", "contraseña", "phc-password", "zoë", "c-with-classes-1979", "benevolent-dictator-1991"} {
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
		djangoPBKDF2SHA1Small, djangoPBKDF2SHA1Default, djangoArgon2iSmall, djangoScryptSmall, djangoScryptDefault,
		"argon2$argon2i$v=19$m=512,t=2,p=2$MW1pc1MzV3p2VTFL$LLs+Zaz5py7po/vXvYCx9w",
		djangoSHA1, djangoMD5, djangoUnsaltedSHA1, djangoUnsaltedMD5, "md5$$" + djangoUnsaltedMD5, "crypt$$t2uO5z4/JT07.",
		"wrapped_sha1$sälz$" + bcryptSalty, "wrapped_unsalted_md5$$" + bcryptSalty,
		"wrapped_md5$s$" + phcArgon2Small, "wrapped_unsalted_sha1$$" + phcArgon2Small,
		"scrypt$16384$s$8$26$" + scryptDigest, "pbkdf2_sha1$4000000$salt$upWEiptc4R8bQ9fRZ9hBPape0is=",
	} {
		f.Add(s)
	}
	schemes := []string{SchemeBcrypt, SchemeArgon2id, SchemePBKDF2, SchemePBKDF2SHA1, SchemeDjangoArgon2, SchemeDjangoArgon2i,
		SchemeScrypt, SchemeBcryptSHA256, SchemeDjangoBcrypt, SchemeUnusable,
		SchemeWrappedSHA1, SchemeWrappedMD5, SchemeWrappedUnsaltedSHA1, SchemeWrappedUnsaltedMD5}
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
		// PBKDF2 at its maximum 0.95 s (SHA-1: 0.98 s), scrypt 0.98 s.
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
	case SchemeDjangoArgon2i:
		return "argon2" + formatArgon2("argon2i", h.MemoryKiB, h.Time, h.Threads, h.salt, h.digest), true
	case SchemePBKDF2, SchemePBKDF2SHA1:
		return fmt.Sprintf("%s$%d$%s$%s", h.kind, h.Iterations, h.salt, h.digest), true
	case SchemeScrypt:
		return fmt.Sprintf("scrypt$%d$%s$%d$%d$%s", h.ScryptN, h.salt, h.ScryptR, h.ScryptP, h.digest), true
	case SchemeWrappedSHA1, SchemeWrappedMD5, SchemeWrappedUnsaltedSHA1, SchemeWrappedUnsaltedMD5:
		inner := *h
		inner.kind, inner.inner, inner.legacySalt = h.inner, "", nil
		e, ok := phEncode(&inner)
		return h.kind + "$" + string(h.legacySalt) + "$" + e, ok
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
		{"pbkdf2_sha1/i=600000", djangoPBKDF2SHA1Default},
		{"django_argon2i/m=512KiB,t=2,p=2", "argon2$argon2i$v=19$m=512,t=2,p=2$MW1pc1MzV3p2VTFL$LLs+Zaz5py7po/vXvYCx9w"},
		{"scrypt/N=16384,r=8,p=1", djangoScryptDefault},
		{"wrapped_sha1/argon2id/m=19MiB,t=2,p=1", wrapLegacy(b, djangoSHA1, DefaultHashPolicy())},
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
