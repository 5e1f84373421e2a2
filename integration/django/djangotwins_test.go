package django

import (
	"authsvc/integration/harness"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"

	"authsvc/internal/secret"
	"authsvc/internal/testservers"
)

// The Django users of testdata/djangotwins (its README): mallory and a
// fullwidth ｍallory, which NFKC folds into one name.
type djangoTwin struct {
	drf, totpKey string
	codes        []string
}

var (
	twinMallory = djangoTwin{"6f1d2c0b9a8e7f6d5c4b3a291807f6e5d4c3b2a1", "4a2291bf0f094f38a9972b8b325af3da6af6f5d2", []string{"yueigqds", "4lk63kos"}}
	twinFull    = djangoTwin{"a1b2c3d4e5f60718293a4b5c6d7e8f9012345678", "f1279cb945aeb214a7cdef23c00d92c23750a1b82884d2425ee8641f1d795b21", []string{"iovo2hcf", "vpkwagmk"}}
)

// TestImportDjangoTwins (issue 28, point 5): a dump holds mallory and a
// fullwidth ｍallory, each with a DRF key and django-otp devices. The
// import keeps the first record as mallory and skips the other; the
// skipped user's key answers 401 on /info after the import into Redis, and
// its devices are not on the kept user, however the dump names them
// (natural or primary keys) and whichever comes first.
func TestImportDjangoTwins(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	for _, tt := range []struct {
		dump          string
		kept, skipped djangoTwin
	}{
		{"mallory-first.json", twinMallory, twinFull},
		{"twin-first.json", twinFull, twinMallory},
		{"twin-first-pks.json", twinFull, twinMallory},
	} {
		t.Run(tt.dump, func(t *testing.T) {
			prefix := testservers.UniquePrefix()
			dir := t.TempDir()
			usersPath := filepath.Join(dir, "users.json")
			code, stdout, stderr := harness.RunCLI(t, "", nil, "user", "import", "--users", usersPath, "--from", "django",
				"--store", redisURL, "--store-prefix", prefix, harness.FromRoot(filepath.Join("testdata/djangotwins", tt.dump)))
			if code != 1 || !strings.Contains(stdout, "users 1 imported, 0 updated, 0 unchanged, 1 skipped; tokens 1 imported, 0 updated, 0 left dead, 1 skipped; factors 2 imported, 0 updated, 0 unchanged, 2 skipped") {
				t.Errorf("user import = exit %d, stdout %q, stderr:\n%s\nwant exit 1; one user, its key and its two devices imported, the other's skipped", code, stdout, stderr)
			}
			for _, s := range []string{twinMallory.drf, twinFull.drf, twinMallory.totpKey, twinFull.totpKey} {
				if strings.Contains(stdout+stderr, s) {
					t.Errorf("user import quoted a key or a secret (%.8s…)", s)
				}
			}

			base, _, stop := harness.StartServer(t, nil, "--cost", "4", "--users", usersPath, "--store", redisURL, "--store-prefix", prefix)
			defer stop()
			if r := harness.Do(t, "GET", base+"/api/auth/info", tt.kept.drf, ""); r.Status != 200 || !strings.Contains(r.Body, `"username":"mallory"`) {
				t.Errorf("info with the kept user's DRF key = %v; want 200 as mallory", r)
			}
			if r := harness.Do(t, "GET", base+"/api/auth/info", tt.skipped.drf, ""); r.Status != 401 {
				t.Errorf("info with the skipped user's DRF key = %v; want 401: it is no key of mallory's", r)
			}

			u, ok := harness.MustReadUsers(t, usersPath)["mallory"]
			if !ok || u.MFA == nil || u.MFA.TOTP == nil {
				t.Fatalf("mallory = %+v; want imported with an authenticator", u)
			}
			key, err := secret.Load(filepath.Join(dir, "authsvc.key"))
			if err != nil {
				t.Fatal(err)
			}
			ring := secret.NewKeyring(key)
			totp, _, err := u.MFA.TOTP.Open(ring, "mallory")
			if err != nil || hex.EncodeToString(totp.Secret) != tt.kept.totpKey {
				t.Errorf("mallory's authenticator is the kept user's = %v (%v); want true", err == nil && hex.EncodeToString(totp.Secret) == tt.kept.totpKey, err)
			}
			if n := len(u.MFA.RecoveryCodes); n != len(tt.kept.codes) {
				t.Errorf("mallory has %d recovery codes; want the kept user's %d", n, len(tt.kept.codes))
			}
			for _, c := range tt.kept.codes {
				if _, ok, err := u.MFA.MatchRecoveryCode(ring, c); !ok || err != nil {
					t.Errorf("the kept user's static token %s is no recovery code of mallory (%v); want one", c, err)
				}
			}
			for _, c := range tt.skipped.codes {
				if _, ok, _ := u.MFA.MatchRecoveryCode(ring, c); ok {
					t.Errorf("the skipped user's static token %s is a recovery code of mallory; want none", c)
				}
			}
		})
	}
}
