package mfa

import (
	"authsvc/internal/mfa/mfatest"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rfcSecret is RFC 6238 appendix B's SHA-1 secret.
const rfcSecret = "12345678901234567890"

// fixedSecret is a 20-byte secret for tests that need one that stays put.
func fixedSecret(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString("8c2f0e1b6d4a93f7e05c1d2b3a4f5e6d7c8b9a01")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRFC6238 checks RFC 6238 appendix B's SHA-1 vectors: 8 digits,
// 30-second steps from t0 0.
func TestRFC6238(t *testing.T) {
	tests := []struct {
		unix int64
		code string
	}{
		{59, "94287082"},
		{1111111109, "07081804"},
		{1111111111, "14050471"},
		{1234567890, "89005924"},
		{2000000000, "69279037"},
		{20000000000, "65353130"},
	}
	for _, tt := range tests {
		d := TOTP{Secret: []byte(rfcSecret), Step: 30, Digits: 8, LastT: -1}
		now := time.Unix(tt.unix, 0)
		c := d.Counter(now)
		if want := tt.unix / 30; c != want {
			t.Errorf("Counter(%d) = %d; want %d", tt.unix, c, want)
		}
		if got := d.Code(c); got != tt.code {
			t.Errorf("Code(%d) = %s; want %s", c, got, tt.code)
		}
		if got, ok := d.Check(tt.code, now); !ok || got != c {
			t.Errorf("Check(%s, %d) = %d, %v; want %d, true", tt.code, tt.unix, got, ok, c)
		}
	}
}

// TestCheckWindow: with drift δ, the codes of counters current+δ−1 to
// current+δ+1 are accepted and no others, at the first and the last
// second of a step.
func TestCheckWindow(t *testing.T) {
	secret := fixedSecret(t)
	for _, drift := range []int64{-2, -1, 0, 1, 2} {
		for _, unix := range []int64{1795558590, 1795558619} {
			d := TOTP{Secret: secret, Step: 30, Digits: 6, Drift: drift, LastT: -1}
			now := time.Unix(unix, 0)
			cur := d.Counter(now)
			for off := int64(-4); off <= 4; off++ {
				code := d.Code(cur + off)
				got, ok := d.Check(code, now)
				want := off-drift >= -1 && off-drift <= 1
				if ok != want || (ok && got != cur+off) {
					t.Errorf("drift %d, at %d: Check(code of current%+d) = %d, %v; want %d, %v", drift, unix, off, got, ok, cur+off, want)
				}
			}
		}
	}
}

// TestCheckReplay: no code of a counter at or before LastT is accepted.
func TestCheckReplay(t *testing.T) {
	secret := fixedSecret(t)
	now := time.Unix(1795558600, 0)
	cur := TOTP{Step: 30}.Counter(now)
	for _, lastOff := range []int64{-5, -2, -1, 0, 1, 2} {
		d := TOTP{Secret: secret, Step: 30, Digits: 6, LastT: cur + lastOff}
		for off := int64(-1); off <= 1; off++ {
			got, ok := d.Check(d.Code(cur+off), now)
			want := off > lastOff
			if ok != want || (ok && got != cur+off) {
				t.Errorf("LastT current%+d: Check(code of current%+d) = %d, %v; want %d, %v", lastOff, off, got, ok, cur+off, want)
			}
		}
	}
	// The counter Check returns, recorded as LastT, refuses the code next time.
	d := TOTP{Secret: secret, Step: 30, Digits: 6, LastT: -1}
	code := d.Code(cur)
	c, ok := d.Check(code, now)
	if !ok {
		t.Fatalf("Check(current code) = %d, false; want true", c)
	}
	d.LastT = c
	for _, later := range []time.Duration{0, 10 * time.Second, 29 * time.Second} {
		if got, ok := d.Check(code, now.Add(later)); ok {
			t.Errorf("Check(used code, %v later) = %d, true; want false", later, got)
		}
	}
}

func TestCheckMalformed(t *testing.T) {
	now := time.Unix(1795558600, 0)
	d := TOTP{Secret: fixedSecret(t), Step: 30, Digits: 6, LastT: -1}
	code := d.Code(d.Counter(now))
	d8 := TOTP{Secret: fixedSecret(t), Step: 30, Digits: 8, LastT: -1}
	code8 := d8.Code(d8.Counter(now))
	accepted := []string{code, " " + code, code + " ", code[:3] + " " + code[3:], " " + strings.Join(strings.Split(code, ""), " ") + " "}
	for _, s := range accepted {
		if _, ok := d.Check(s, now); !ok {
			t.Errorf("Check(%q) = false; want true (spaces are ignored)", s)
		}
	}
	fullwidth := strings.Map(func(r rune) rune { return r - '0' + '０' }, code)
	arabic := strings.Map(func(r rune) rune { return r - '0' + '٠' }, code)
	refused := []string{
		"", " ", code[:5], code + "0", "0" + code, code8, code8[:6] + "x",
		code[:5] + "a", "a" + code[1:], code[:3] + "-" + code[3:], code[:3] + "\t" + code[3:],
		code + "\n", "\x00" + code, code + "\x00", "+" + code[1:], "-" + code[1:],
		fullwidth, arabic, code[:5] + "\xff", strings.Repeat(code, 100),
	}
	for _, s := range refused {
		if got, ok := d.Check(s, now); ok {
			t.Errorf("Check(%q) = %d, true; want false", s, got)
		}
	}
	// 8 digits: the 6-digit code (which is the 8-digit code's last six
	// digits, both being the same number mod 10⁶) fails.
	if _, ok := d8.Check(code8, now); !ok {
		t.Errorf("8 digits: Check(%q) = false; want true", code8)
	}
	for _, s := range []string{code, code8[2:], code8[:6], code8 + "0"} {
		if _, ok := d8.Check(s, now); ok {
			t.Errorf("8 digits: Check(%q) = true; want false", s)
		}
	}
}

// TestCheckComparesEveryCandidate counts the comparisons: always three,
// whether the code is right (the first candidate matching), wrong,
// malformed, replayed, or the TOTP unusable, so the time Check takes does
// not depend on the code. A comparison not made through the constant-time
// function, or an early exit, fails it.
func TestCheckComparesEveryCandidate(t *testing.T) {
	now := time.Unix(1795558600, 0)
	d := TOTP{Secret: fixedSecret(t), Step: 30, Digits: 6, LastT: -1}
	cur := d.Counter(now)
	wrong := "000000"
	if d.Code(cur-1) == wrong || d.Code(cur) == wrong || d.Code(cur+1) == wrong {
		wrong = "111111"
	}
	used := d
	used.LastT = cur + 1
	tests := []struct {
		name string
		d    TOTP
		code string
		ok   bool
	}{
		{"previous step", d, d.Code(cur - 1), true},
		{"current step", d, d.Code(cur), true},
		{"next step", d, d.Code(cur + 1), true},
		{"wrong", d, wrong, false},
		{"malformed", d, "12ab", false},
		{"empty", d, "", false},
		{"replayed", used, d.Code(cur), false},
		{"unusable TOTP", TOTP{Secret: []byte("short"), Step: 30, Digits: 6}, d.Code(cur), false},
	}
	for _, tt := range tests {
		n := 0
		count := func(a, b []byte) int {
			n++
			if bytes.Equal(a, b) {
				return 1
			}
			return 0
		}
		_, ok := tt.d.check(tt.code, now, count)
		if ok != tt.ok || n != 3 {
			t.Errorf("%s: check made %d comparisons and returned %v; want 3 and %v", tt.name, n, ok, tt.ok)
		}
	}

	// The comparison decides: one that says "equal" to everything lets a
	// well-formed code through at the lowest usable counter, and never a
	// malformed one or a used counter.
	yes := func(a, b []byte) int { return 1 }
	if got, ok := d.check(wrong, now, yes); !ok || got != cur-1 {
		t.Errorf("check(wrong, equal always) = %d, %v; want %d, true", got, ok, cur-1)
	}
	used.LastT = cur
	if got, ok := used.check(wrong, now, yes); !ok || got != cur+1 {
		t.Errorf("check(wrong, equal always, LastT current) = %d, %v; want %d, true", got, ok, cur+1)
	}
	if got, ok := d.check("12345", now, yes); ok {
		t.Errorf("check(5 digits, equal always) = %d, true; want false", got)
	}
}

func TestValidate(t *testing.T) {
	good := TOTP{Secret: fixedSecret(t), Step: 30, Digits: 6, LastT: -1}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate() = %v; want nil", err)
	}
	bad := map[string]func(*TOTP){
		"no secret":       func(d *TOTP) { d.Secret = nil },
		"9-byte secret":   func(d *TOTP) { d.Secret = d.Secret[:9] },
		"step 0":          func(d *TOTP) { d.Step = 0 },
		"step -30":        func(d *TOTP) { d.Step = -30 },
		"5 digits":        func(d *TOTP) { d.Digits = 5 },
		"9 digits":        func(d *TOTP) { d.Digits = 9 },
		"0 digits":        func(d *TOTP) { d.Digits = 0 },
		"huge t0":         func(d *TOTP) { d.T0 = 1 << 62 },
		"huge drift":      func(d *TOTP) { d.Drift = -1 << 62 },
		"last counter -2": func(d *TOTP) { d.LastT = -2 },
	}
	now := time.Unix(1795558600, 0)
	code := good.Code(good.Counter(now))
	for name, f := range bad {
		d := good
		d.Secret = bytes.Clone(good.Secret)
		f(&d)
		if err := d.Validate(); !errors.Is(err, ErrBadTOTP) {
			t.Errorf("%s: Validate() = %v; want ErrBadTOTP", name, err)
		}
		if got, ok := d.Check(code, now); ok {
			t.Errorf("%s: Check = %d, true; want false", name, got)
		}
		if got := d.Code(5); got != "" {
			t.Errorf("%s: Code(5) = %q; want \"\"", name, got)
		}
	}
	for _, digits := range []int{6, 7, 8} {
		d := good
		d.Digits = digits
		if got := d.Code(1); len(got) != digits {
			t.Errorf("%d digits: Code(1) = %q; want %d digits", digits, got, digits)
		}
	}
}

func TestCounter(t *testing.T) {
	tests := []struct {
		t0, step, unix, want int64
	}{
		{0, 30, 0, 0}, {0, 30, 29, 0}, {0, 30, 30, 1}, {0, 30, 1795558590, 59851953},
		{0, 60, 1795558590, 29925976}, {100, 30, 129, 0}, {100, 30, 130, 1},
		{100, 30, 99, -1}, {100, 30, 70, -1}, {100, 30, 69, -2}, {0, 30, -1, -1},
	}
	for _, tt := range tests {
		d := TOTP{Step: tt.step, T0: tt.t0}
		if got := d.Counter(time.Unix(tt.unix, 0)); got != tt.want {
			t.Errorf("TOTP{T0: %d, Step: %d}.Counter(%d) = %d; want %d", tt.t0, tt.step, tt.unix, got, tt.want)
		}
	}
	// Before T0 nothing is accepted below counter 0, and nothing panics.
	d := TOTP{Secret: fixedSecret(t), Step: 30, T0: 1000, Digits: 6, LastT: -1}
	if got, ok := d.Check(d.Code(0), time.Unix(995, 0)); !ok || got != 0 {
		t.Errorf("Check(code of counter 0, 5 s before t0) = %d, %v; want 0, true", got, ok)
	}
	if got, ok := d.Check("123456", time.Unix(0, 0)); ok {
		t.Errorf("Check(long before t0) = %d, true; want false", got)
	}
	if got := d.Code(-1); got != "" {
		t.Errorf("Code(-1) = %q; want \"\"", got)
	}
}

func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	if err != nil || len(a) != 20 {
		t.Fatalf("NewSecret() = %d bytes, %v; want 20, nil", len(a), err)
	}
	b, _ := NewSecret()
	if bytes.Equal(a, b) {
		t.Errorf("NewSecret() twice gave the same secret")
	}
	d := NewTOTP(a)
	if d.Step != 30 || d.T0 != 0 || d.Digits != 6 || d.Drift != 0 || d.LastT != -1 || !bytes.Equal(d.Secret, a) || d.Validate() != nil {
		t.Errorf("NewTOTP = %+v; want 30-second steps, t0 0, 6 digits, drift 0, LastT -1", d)
	}
}

func TestBase32(t *testing.T) {
	// The fixture README's table: the base32 of whitfield's and martin's keys.
	tests := []struct{ hex, b32 string }{
		{"4a2291bf0f094f38a9972b8b325af3da6af6f5d2", "JIRJDPYPBFHTRKMXFOFTEWXT3JVPN5OS"},
		{"f1279cb945aeb214a7cdef23c00d92c23750a1b82884d2425ee8641f1d795b21", "6ETZZOKFV2ZBJJ6N54R4ADMSYI3VBINYFCCNEQS65BSB6HLZLMQQ"},
		{"", ""},
		{"3132333435", "GEZDGNBV"},
		{"31323334", "GEZDGNA"},
	}
	for _, tt := range tests {
		raw, _ := hex.DecodeString(tt.hex)
		if got := Base32(raw); got != tt.b32 {
			t.Errorf("Base32(%s) = %s; want %s", tt.hex, got, tt.b32)
		}
	}
}

func TestOTPAuthURL(t *testing.T) {
	secret := fixedSecret(t)
	b32 := Base32(secret)
	tests := []struct{ issuer, username, want string }{
		{"authsvc", "alice", "otpauth://totp/authsvc:alice?secret=" + b32 + "&issuer=authsvc&algorithm=SHA1&digits=6&period=30"},
		{"Acme Corp", "alice@example.com", "otpauth://totp/Acme%20Corp:alice@example.com?secret=" + b32 + "&issuer=Acme%20Corp&algorithm=SHA1&digits=6&period=30"},
		{"a:b&c=d+e/f?g#h%i", "josé.o+k_-", "otpauth://totp/a%3Ab&c=d+e%2Ff%3Fg%23h%25i:jos%C3%A9.o+k_-?secret=" + b32 + "&issuer=a%3Ab%26c%3Dd%2Be%2Ff%3Fg%23h%25i&algorithm=SHA1&digits=6&period=30"},
	}
	for _, tt := range tests {
		if got := OTPAuthURL(tt.issuer, tt.username, secret); got != tt.want {
			t.Errorf("OTPAuthURL(%q, %q) =\n%s\nwant\n%s", tt.issuer, tt.username, got, tt.want)
		}
	}
}

// independentCases are the parameters checked against oathtool and pyotp.
func independentCases(t *testing.T) []TOTP {
	t.Helper()
	key32, _ := hex.DecodeString("f1279cb945aeb214a7cdef23c00d92c23750a1b82884d2425ee8641f1d795b21")
	var cases []TOTP
	for _, secret := range [][]byte{fixedSecret(t), key32, []byte(rfcSecret[:10]), bytes.Repeat([]byte{0}, 20)} {
		for _, step := range []int64{30, 60} {
			for _, digits := range []int{6, 8} {
				cases = append(cases, TOTP{Secret: secret, Step: step, Digits: digits, LastT: -1})
			}
		}
	}
	return cases
}

// independentTimes are the times checked against oathtool and pyotp.
func independentTimes() []int64 {
	return []int64{59, 1111111109, 1795558590, 1795558619, 2000000000, 20000000000}
}

// TestAgainstOathtool checks codes that oathtool makes from the base32
// secret: each is accepted at its time, as the counter oathtool used.
func TestAgainstOathtool(t *testing.T) {
	times := append(independentTimes(), time.Now().Unix())
	for _, d := range independentCases(t) {
		for _, unix := range times {
			now := time.Unix(unix, 0)
			args := []string{"--totp", "-b", "-d", strconv.Itoa(d.Digits), "-s", strconv.FormatInt(d.Step, 10) + "s", "-N", "@" + strconv.FormatInt(unix, 10), Base32(d.Secret)}
			code := mfatest.Oathtool(t, args...)
			c := d.Counter(now)
			if got := d.Code(c); got != code {
				t.Errorf("%d-byte secret, step %d, %d digits, at %d: Code = %s; oathtool says %s", len(d.Secret), d.Step, d.Digits, unix, got, code)
			}
			if got, ok := d.Check(code, now); !ok || got != c {
				t.Errorf("%d-byte secret, step %d, %d digits, at %d: Check(oathtool's %s) = %d, %v; want %d, true", len(d.Secret), d.Step, d.Digits, unix, code, got, ok, c)
			}
		}
	}
	// A t0 other than 0 (oathtool's start time).
	d := TOTP{Secret: fixedSecret(t), Step: 30, T0: 1000, Digits: 6, LastT: -1}
	now := time.Unix(1795558600, 0)
	code := mfatest.Oathtool(t, "--totp", "-S", "@1000", "-N", "@1795558600", hex.EncodeToString(d.Secret))
	if got, ok := d.Check(code, now); !ok || got != d.Counter(now) {
		t.Errorf("t0 1000: Check(oathtool's %s) = %d, %v; want %d, true", code, got, ok, d.Counter(now))
	}
}

// TestAgainstPyotp checks codes pyotp makes, and that Python's own URL
// parsing reads OTPAuthURL's issuer, username and parameters back.
func TestAgainstPyotp(t *testing.T) {
	mfatest.NeedPyotp(t)
	type pyCase struct {
		Secret   string `json:"secret"`
		Step     int64  `json:"step"`
		Digits   int    `json:"digits"`
		Unix     int64  `json:"unix"`
		Issuer   string `json:"issuer"`
		Username string `json:"username"`
		URL      string `json:"url"`
	}
	var cases []pyCase
	var totps []TOTP
	names := [][2]string{{"authsvc", "alice"}, {"Acme Corp: Ops", "josé@example.com"}, {"a&b=c+d?e#f%g/h", "o+k_-.@"}}
	for i, d := range independentCases(t) {
		for _, unix := range independentTimes() {
			n := names[(i+int(unix))%len(names)]
			cases = append(cases, pyCase{Base32(d.Secret), d.Step, d.Digits, unix, n[0], n[1], OTPAuthURL(n[0], n[1], d.Secret)})
			totps = append(totps, d)
		}
	}
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	const script = `
import json, sys, pyotp
from urllib.parse import urlsplit, unquote, parse_qsl
for c in json.loads(sys.argv[1]):
    code = pyotp.TOTP(c["secret"], digits=c["digits"], interval=c["step"]).at(c["unix"])
    u = urlsplit(c["url"])
    # The label splits at its one literal colon, then each part is unquoted.
    issuer, _, name = u.path.lstrip("/").partition(":")
    params = parse_qsl(u.query, strict_parsing=True)
    ok = (u.scheme == "otpauth" and u.netloc == "totp"
          and unquote(issuer) == c["issuer"] and unquote(name) == c["username"]
          and [k for k, _ in params] == ["secret", "issuer", "algorithm", "digits", "period"]
          and dict(params) == {"secret": c["secret"], "issuer": c["issuer"], "algorithm": "SHA1", "digits": "6", "period": "30"})
    # pyotp reads the URL back to the same secret and code.
    url_code = pyotp.parse_uri(c["url"]).at(c["unix"]) if ":" not in c["issuer"] and "&" not in c["issuer"] else "-"
    print(code, ok, url_code)
`
	lines := mfatest.Python(t, script, string(in))
	if len(lines) != len(cases) {
		t.Fatalf("pyotp printed %d lines; want %d", len(lines), len(cases))
	}
	for i, line := range lines {
		c, d := cases[i], totps[i]
		var code, urlOK, urlCode string
		if _, err := fmt.Sscan(line, &code, &urlOK, &urlCode); err != nil {
			t.Fatalf("pyotp printed %q: %v", line, err)
		}
		now := time.Unix(c.Unix, 0)
		if got, ok := d.Check(code, now); !ok || got != d.Counter(now) {
			t.Errorf("%d-byte secret, step %d, %d digits, at %d: Check(pyotp's %s) = %d, %v; want %d, true", len(d.Secret), d.Step, d.Digits, c.Unix, code, got, ok, d.Counter(now))
		}
		if urlOK != "True" {
			t.Errorf("Python does not read OTPAuthURL(%q, %q) = %s back", c.Issuer, c.Username, c.URL)
		}
		// pyotp.parse_uri takes the URL's digits and period (6, 30).
		if want := (TOTP{Secret: d.Secret, Step: 30, Digits: 6}).Code(c.Unix / 30); urlCode != "-" && urlCode != want {
			t.Errorf("pyotp.parse_uri(%s).at(%d) = %s; want %s", c.URL, c.Unix, urlCode, want)
		}
	}
}

// device is an otp_totp.totpdevice record of testdata/django_otp.json.
type device struct {
	User      string
	Confirmed bool
	Key       string
	Step      int64
	T0        int64
	Digits    int
	Tolerance int
	Drift     int64
	LastT     int64
}

// djangoDevices reads testdata/django_otp.json: the otp_totp and otp_static
// records of the Django fixture (shared/fixtures/django/dumpdata.json),
// copied as they are.
func djangoDevices(t *testing.T) (devices map[string]device, staticTokens []string) {
	t.Helper()
	data, err := os.ReadFile("testdata/django_otp.json")
	if err != nil {
		t.Fatal(err)
	}
	var records []struct {
		Model  string
		Fields struct {
			User      []string
			Confirmed bool
			Key       string
			Step      int64
			T0        int64
			Digits    int
			Tolerance int
			Drift     int64
			LastT     int64 `json:"last_t"`
			Token     string
		}
	}
	if err := json.Unmarshal(data, &records); err != nil {
		t.Fatal(err)
	}
	devices = map[string]device{}
	for _, r := range records {
		f := r.Fields
		switch r.Model {
		case "otp_totp.totpdevice":
			devices[f.User[0]] = device{f.User[0], f.Confirmed, f.Key, f.Step, f.T0, f.Digits, f.Tolerance, f.Drift, f.LastT}
		case "otp_static.statictoken":
			staticTokens = append(staticTokens, f.Token)
		}
	}
	return devices, staticTokens
}

// totp maps a django-otp device onto a TOTP, field for field.
func (d device) totp(t *testing.T) TOTP {
	t.Helper()
	key, err := hex.DecodeString(d.Key)
	if err != nil {
		t.Fatalf("%s: key: %v", d.User, err)
	}
	return TOTP{Secret: key, Step: d.Step, T0: d.T0, Digits: d.Digits, Drift: d.Drift, LastT: d.LastT}
}

// TestDjangoDevices checks the fixture's django-otp devices with codes
// oathtool makes from their keys, at the moment each device was last used
// (its last_t step, where Django accepted a code) and later.
func TestDjangoDevices(t *testing.T) {
	devices, _ := djangoDevices(t)
	if len(devices) != 4 {
		t.Fatalf("testdata holds %d TOTP devices; want 4", len(devices))
	}
	// codeAt is oathtool's code of device d for counter c.
	codeAt := func(d device, c int64) string {
		return mfatest.Oathtool(t, "--totp", "-d", strconv.Itoa(d.Digits), "-s", strconv.FormatInt(d.Step, 10)+"s",
			"-S", "@"+strconv.FormatInt(d.T0, 10), "-N", "@"+strconv.FormatInt(d.T0+c*d.Step, 10), d.Key)
	}
	check := func(d device, code string, unix int64, wantCounter int64, want bool) {
		t.Helper()
		got, ok := d.totp(t).Check(code, time.Unix(unix, 0))
		if ok != want || (ok && got != wantCounter) {
			t.Errorf("%s at %d: Check(%s, the code of counter %d) = %d, %v; want %v", d.User, unix, code, wantCounter, got, ok, want)
		}
	}
	for _, d := range devices {
		if err := d.totp(t).Validate(); err != nil {
			t.Errorf("%s: Validate() = %v; want nil", d.User, err)
		}
		if d.Tolerance != window {
			t.Errorf("%s: tolerance %d; this package accepts %d step either way", d.User, d.Tolerance, window)
		}
	}

	// whitfield used the code of his current step: it is refused from then
	// on; the next step's code is accepted in the same step, and later.
	w := devices["whitfield"]
	used := w.T0 + w.LastT*w.Step + 1
	check(w, codeAt(w, w.LastT), used, w.LastT, false)
	check(w, codeAt(w, w.LastT), used+w.Step, w.LastT, false)
	check(w, codeAt(w, w.LastT+1), used, w.LastT+1, true)
	check(w, codeAt(w, w.LastT+2), used+w.Step, w.LastT+2, true)
	check(w, codeAt(w, w.LastT+2), used, w.LastT+2, false)

	// martin, drift 1, used the code of the step after his current one: in
	// that current step only the code of the step after next is accepted;
	// an importer that dropped drift would take the previous step's.
	m := devices["martin"]
	if m.Drift != 1 {
		t.Fatalf("martin's drift is %d in testdata; want 1", m.Drift)
	}
	then := m.T0 + (m.LastT-1)*m.Step + 3
	check(m, codeAt(m, m.LastT+1), then, m.LastT+1, true)
	check(m, codeAt(m, m.LastT), then, m.LastT, false)
	check(m, codeAt(m, m.LastT-1), then, m.LastT-1, false)
	check(m, codeAt(m, m.LastT-2), then, m.LastT-2, false)

	// ralph: 60-second steps, 8 digits, never used (last_t -1).
	r := devices["ralph"]
	if r.LastT != -1 || r.Digits != 8 || r.Step != 60 {
		t.Fatalf("ralph in testdata: last_t %d, %d digits, step %d; want -1, 8, 60", r.LastT, r.Digits, r.Step)
	}
	now := time.Now().Unix()
	cur := r.totp(t).Counter(time.Unix(now, 0))
	for off := int64(-2); off <= 2; off++ {
		code := codeAt(r, cur+off)
		if len(code) != 8 {
			t.Fatalf("oathtool gave ralph %q; want 8 digits", code)
		}
		check(r, code, now, cur+off, off >= -1 && off <= 1)
	}
	check(r, codeAt(r, 0), 30, 0, true) // counter 0 is above last_t -1
}

func FuzzCheck(f *testing.F) {
	d := TOTP{Secret: []byte(rfcSecret), Step: 30, Digits: 8, LastT: 37037036}
	for _, s := range []string{"94287082", "07081804", "14050471", " 1405 0471 ", "1405047", "140504711", "1405047a", "", "\x00", "１４０５０４７１"} {
		f.Add(s, int64(1111111111))
	}
	f.Fuzz(func(t *testing.T, code string, unix int64) {
		unix %= 1 << 40 // far past and future, never a counter overflow
		now := time.Unix(unix, 0)
		c, ok := d.Check(code, now)
		in, wellFormed := digitsOf(code, d.Digits)
		if len(in) != d.Digits {
			t.Fatalf("digitsOf(%q) = %q; want %d bytes", code, in, d.Digits)
		}
		if !ok {
			return
		}
		cur := d.Counter(now)
		if !wellFormed || strings.ReplaceAll(code, " ", "") != d.Code(c) || c < cur-1 || c > cur+1 || c <= d.LastT {
			t.Fatalf("Check(%q, %d) = %d, true; want false (current counter %d)", code, unix, c, cur)
		}
	})
}
