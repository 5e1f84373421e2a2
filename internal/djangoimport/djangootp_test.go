package djangoimport

import (
	"authsvc/internal/mfa/mfatest"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"authsvc/internal/mfa"
	"authsvc/internal/password"
	"authsvc/internal/secret"
	"authsvc/internal/users"
)

// django42Devices are the fixture's confirmed TOTP devices (its README).
var django42Devices = map[string]struct {
	key                    string
	step, t0, drift, lastT int64
	digits                 int
}{
	"whitfield": {key: "4a2291bf0f094f38a9972b8b325af3da6af6f5d2", step: 30, digits: 6, drift: 0, lastT: 59851953},
	"martin":    {key: "f1279cb945aeb214a7cdef23c00d92c23750a1b82884d2425ee8641f1d795b21", step: 30, digits: 6, drift: 1, lastT: 59851954},
	"ralph":     {key: "dbfddd91635aa1ef46ddeb97512e3bfb3b7ab605", step: 60, digits: 8, drift: 0, lastT: -1},
}

// adi's unconfirmed device, and whitfield's static tokens.
const django42AdiKey = "47443e0cc0687b9636621653900bd8091ff0068c"

var django42StaticTokens = []string{"yueigqds", "4lk63kos", "iovo2hcf", "vpkwagmk", "uvrcp62v"}

// readDjango42 parses the fixture.
func readDjango42(t *testing.T) *Dump {
	t.Helper()
	data, err := os.ReadFile(django42Dump)
	if err != nil {
		t.Fatal(err)
	}
	dump, err := Read(data, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return dump
}

// TestParseDjangoDumpFactors: the fixture's confirmed TOTP devices come out
// field for field, whitfield's static tokens as his recovery codes, and
// adi's unconfirmed device is skipped, reported without its key.
func TestParseDjangoDumpFactors(t *testing.T) {
	dump := readDjango42(t)
	if len(dump.Factors) != 3 {
		t.Errorf("factors of %d users; want whitfield, martin and ralph", len(dump.Factors))
	}
	for name, want := range django42Devices {
		f := dump.Factors[name]
		if f == nil || f.TOTP == nil {
			t.Errorf("%s: no TOTP; want his device's", name)
			continue
		}
		got := *f.TOTP
		if hex.EncodeToString(got.Secret) != want.key || got.Step != want.step || got.T0 != want.t0 || got.Digits != want.digits ||
			got.Drift != want.drift || got.LastT != want.lastT {
			t.Errorf("%s: TOTP step %d, t0 %d, digits %d, drift %d, last_t %d, key matches %v; want %+v", name,
				got.Step, got.T0, got.Digits, got.Drift, got.LastT, hex.EncodeToString(got.Secret) == want.key, want)
		}
		wantStatic := 0
		if name == "whitfield" {
			wantStatic = 1
		}
		if f.Devices() != 1+wantStatic || f.StaticDevices != wantStatic {
			t.Errorf("%s: %d devices, %d static; want %d, %d", name, f.Devices(), f.StaticDevices, 1+wantStatic, wantStatic)
		}
	}
	if codes := dump.Factors["whitfield"].RecoveryCodes; !slices.Equal(codes, django42StaticTokens) {
		t.Errorf("whitfield's recovery codes = %q; want his static tokens %q", codes, django42StaticTokens)
	}
	if dump.Factors["adi"] != nil {
		t.Errorf("adi has factors %+v; want none: her device is unconfirmed", dump.Factors["adi"])
	}
	var devices []string
	for _, s := range dump.Skipped {
		if s.Model() == "second factor" {
			devices = append(devices, s.String())
		}
		if strings.Contains(s.String(), django42AdiKey) {
			t.Errorf("skipped %q quotes a TOTP key", s)
		}
	}
	if want := []string{`record 47 (otp_totp.totpdevice of "adi"): an unconfirmed device`}; !slices.Equal(devices, want) {
		t.Errorf("second factors skipped = %q; want %q", devices, want)
	}
}

// TestSealDjangoFactors: each fixture user's TOTP, sealed under the
// import's key, opens as the device and takes the codes an independent
// implementation (oathtool, pyotp) computes from the Django key: drift is
// kept (martin's code two steps ahead), so is last_t (whitfield's code of
// his last step and earlier ones are refused). whitfield's static tokens
// match as recovery codes, stored only as keyed hashes.
func TestSealDjangoFactors(t *testing.T) {
	data, err := os.ReadFile(django42Dump)
	if err != nil {
		t.Fatal(err)
	}
	cheap := password.HashPolicy{Scheme: password.SchemeBcrypt, BcryptCost: 4}
	dump, err := ParsePolicy(data, time.Now(), cheap)
	if err != nil {
		t.Fatal(err)
	}
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := dump.SealFactors(key); err != nil {
		t.Fatal(err)
	}
	ring := secret.NewKeyring(key)
	byName := map[string]users.User{}
	for _, u := range dump.Users {
		byName[u.Username] = u
	}
	if err := users.Validate(dump.Users); err != nil {
		t.Errorf("the users with their factors do not load: %v", err)
	}
	// A time well after every device's last use.
	now := time.Unix(1795558590+86400, 0)
	for name, dev := range django42Devices {
		u := byName[name]
		if u.MFA == nil || u.MFA.TOTP == nil {
			t.Errorf("%s: MFA %+v; want his TOTP", name, u.MFA)
			continue
		}
		if !u.MFA.TOTP.FromDjango {
			t.Errorf("%s: TOTP not marked as from Django", name)
		}
		totp, _, err := u.MFA.TOTP.Open(ring, name)
		if err != nil {
			t.Errorf("%s: Open = %v", name, err)
			continue
		}
		// The code Django would accept now: its counter plus the drift.
		at := now.Unix() + dev.drift*dev.step
		code := mfatest.Code(t, dev.key, dev.digits, time.Duration(dev.step)*time.Second, time.Unix(at, 0))
		c, ok := totp.Check(code, now)
		if want := (now.Unix()-dev.t0)/dev.step + dev.drift; !ok || c != want {
			t.Errorf("%s: Check(oathtool's code of counter %d) = %d, %v; want %d, true", name, want, c, ok, want)
		}
		if dev.drift != 0 {
			// Two steps ahead: inside the window only with the drift kept.
			two := mfatest.Code(t, dev.key, dev.digits, time.Duration(dev.step)*time.Second, time.Unix(now.Unix()+2*dev.step, 0))
			if _, ok := totp.Check(two, now); !ok {
				t.Errorf("%s: the code two steps ahead is refused; want it accepted, drift %d kept", name, dev.drift)
			}
		}
		if other, _, err := u.MFA.TOTP.Open(ring, "ada"); err == nil {
			t.Errorf("%s's sealed secret opened as ada's: %v", name, other.Step)
		}
	}
	pyotpAgrees(t, byName["ralph"], ring, now)

	// whitfield's last_t: the code of that step, and of the one before,
	// are refused at that time; the next step's is accepted.
	w := django42Devices["whitfield"]
	totp, _, err := byName["whitfield"].MFA.TOTP.Open(ring, "whitfield")
	if err != nil {
		t.Fatal(err)
	}
	atLast := time.Unix(w.lastT*w.step, 0)
	for _, c := range []int64{w.lastT - 1, w.lastT} {
		code := mfatest.Code(t, w.key, w.digits, time.Duration(w.step)*time.Second, time.Unix(c*w.step, 0))
		if got, ok := totp.Check(code, atLast); ok {
			t.Errorf("whitfield: Check(code of counter %d) = %d, true; want refused, at or before last_t %d", c, got, w.lastT)
		}
	}
	next := mfatest.Code(t, w.key, w.digits, time.Duration(w.step)*time.Second, time.Unix((w.lastT+1)*w.step, 0))
	if c, ok := totp.Check(next, atLast); !ok || c != w.lastT+1 {
		t.Errorf("whitfield: Check(code of counter %d) = %d, %v; want accepted", w.lastT+1, c, ok)
	}

	f := byName["whitfield"].MFA
	if len(f.RecoveryCodes) != len(django42StaticTokens) || !f.RecoveryFromDjango || f.RecoveryKeyID != key.ID() {
		t.Errorf("whitfield: %d recovery codes, from Django %v, key %q; want 5, true, %q", len(f.RecoveryCodes), f.RecoveryFromDjango, f.RecoveryKeyID, key.ID())
	}
	for i, token := range django42StaticTokens {
		if slices.Contains(f.RecoveryCodes, token) {
			t.Errorf("whitfield's recovery codes hold the token %q itself", token)
		}
		if got, ok, err := f.MatchRecoveryCode(ring, token); !ok || got != i || err != nil {
			t.Errorf("whitfield: MatchRecoveryCode(%q) = %d, %v, %v; want %d, true", token, got, ok, err, i)
		}
	}
	if _, ok, _ := f.MatchRecoveryCode(ring, "aaaaaaaa"); ok {
		t.Error("whitfield: MatchRecoveryCode(aaaaaaaa) matched")
	}
	if byName["martin"].MFA.RecoveryCodes != nil || byName["adi"].MFA != nil || byName["ada"].MFA != nil {
		t.Errorf("martin's recovery codes %v, adi's MFA %v, ada's %v; want none", byName["martin"].MFA.RecoveryCodes, byName["adi"].MFA, byName["ada"].MFA)
	}
}

// pyotpAgrees checks u's TOTP against pyotp's code of the base32 secret
// an authenticator app would be given.
func pyotpAgrees(t *testing.T, u users.User, ring secret.Keyring, now time.Time) {
	t.Helper()
	mfatest.NeedPyotp(t)
	totp, _, err := u.MFA.TOTP.Open(ring, u.Username)
	if err != nil {
		t.Fatal(err)
	}
	script := "import sys, pyotp; print(pyotp.TOTP(sys.argv[1], digits=int(sys.argv[2]), interval=int(sys.argv[3])).at(int(sys.argv[4])))"
	code := mfatest.Python(t, script, mfa.Base32(totp.Secret), strconv.Itoa(totp.Digits), strconv.FormatInt(totp.Step, 10), strconv.FormatInt(now.Unix(), 10))[0]
	if _, ok := totp.Check(code, now); !ok {
		t.Errorf("%s: Check(pyotp's code %s) refused; want accepted", u.Username, code)
	}
}

// TestParseDjangoDumpDevices: the django-otp cases the fixture lacks.
// Static tokens are found before or after their device; of two confirmed
// TOTP devices the lowest pk is kept and the other reported; devices of a
// user left out, unusable devices, an unconfirmed static device, a token
// with no normal form and a token of no device are each reported, never
// quoting a key or a token.
func TestParseDjangoDumpDevices(t *testing.T) {
	const pbkdf2 = "pbkdf2_sha256$1000$salt$kOXRpcmI0ZiIpeGvu8jJ+43wCfh/s3C+6G/DnfA8RK0="
	const crypt = "crypt$$ab01FAX.bQRSU"
	key1, key2, key3 := strings.Repeat("11", 20), strings.Repeat("22", 20), strings.Repeat("33", 20)
	totp := func(pk int, user, key string, confirmed bool, extra string) string {
		return fmt.Sprintf(`{"model": "otp_totp.totpdevice", "pk": %d, "fields": {"user": %s, "name": "x", "confirmed": %v, "key": "%s", "step": 30, "t0": 0, "digits": 6, "tolerance": 1, "drift": 0, "last_t": -1%s}}`, pk, user, confirmed, key, extra)
	}
	token := func(pk, device int, tok string) string {
		return fmt.Sprintf(`{"model": "otp_static.statictoken", "pk": %d, "fields": {"device": %d, "token": "%s"}}`, pk, device, tok)
	}
	static := func(pk int, user string, confirmed bool) string {
		return fmt.Sprintf(`{"model": "otp_static.staticdevice", "pk": %d, "fields": {"user": %s, "name": "backup", "confirmed": %v}}`, pk, user, confirmed)
	}
	records := []string{
		token(1, 1, "aaaabbbb"), // 0: before its device
		`{"model": "auth.user", "pk": 1, "fields": {"username": "ann", "password": "` + pbkdf2 + `"}}`, // 1
		`{"model": "auth.user", "pk": 2, "fields": {"username": "bea", "password": "` + pbkdf2 + `"}}`, // 2
		`{"model": "auth.user", "pk": 3, "fields": {"username": "cid", "password": "` + crypt + `"}}`,  // 3: skipped
		totp(7, `["ann"]`, key2, true, ""),              // 4: a later device of ann's
		totp(3, "1", key1, true, ""),                    // 5: ann's by primary key, kept
		totp(4, `["cid"]`, key3, true, ""),              // 6: of a user left out
		totp(5, `["bea"]`, key3, true, `, "digits": 9`), // 7: unusable
		totp(6, `["bea"]`, "xyz"+key3, true, ""),        // 8: not hex
		static(1, `["ann"]`, true),                      // 9
		token(2, 1, "CCCC-DDDD"),                        // 10: after its device, normalised
		token(3, 1, "bad!token"),                        // 11
		token(4, 9, "eeeeffff"),                         // 12: of no device
		static(2, `["bea"]`, false),                     // 13: unconfirmed
		token(5, 2, "gggghhhh"),                         // 14: its device's skip covers it
		static(3, `["bea"]`, true),                      // 15: confirmed, no tokens
	}
	dump, err := Read([]byte("["+strings.Join(records, ",\n")+"]"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ann := dump.Factors["ann"]
	if ann == nil || ann.TOTP == nil || hex.EncodeToString(ann.TOTP.Secret) != key1 || !slices.Equal(ann.RecoveryCodes, []string{"aaaabbbb", "ccccdddd"}) || ann.Devices() != 2 {
		t.Errorf("ann's factors = %+v; want the TOTP of pk 3 and the two good tokens", ann)
	}
	if bea := dump.Factors["bea"]; bea == nil || bea.TOTP != nil || len(bea.RecoveryCodes) != 0 || bea.Devices() != 1 {
		t.Errorf("bea's factors = %+v; want her empty static device alone", bea)
	}
	if dump.Factors["cid"] != nil {
		t.Errorf("cid has factors; want none, he is not imported")
	}
	var got []string
	for _, s := range dump.Skipped {
		if s.Model() == "second factor" {
			got = append(got, s.String())
		}
		for _, secret := range []string{key1, key2, key3, "bad!token", "eeeeffff", "gggghhhh", "xyz"} {
			if strings.Contains(s.String(), secret) {
				t.Errorf("skipped %q quotes %q", s, secret)
			}
		}
	}
	want := []string{
		`record 4 (otp_totp.totpdevice of "ann"): another confirmed TOTP device of the user: authsvc keeps one authenticator, the one of the lowest pk (record 5)`,
		`record 6 (otp_totp.totpdevice of "cid"): its user is not imported`,
		`record 7 (otp_totp.totpdevice of "bea"): unusable TOTP parameters: 9 digits; want 6 to 8`,
		`record 8 (otp_totp.totpdevice of "bea"): key: not hex`,
		`record 11 (otp_static.statictoken of "ann"): token: not 8 to 16 letters and digits, which a recovery code is`,
		`record 12 (otp_static.statictoken): its device is not in the dump`,
		`record 13 (otp_static.staticdevice of "bea"): an unconfirmed device`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("second factors skipped:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
