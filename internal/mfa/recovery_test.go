package mfa

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"

	"authsvc/internal/secret"
)

func testKey(t *testing.T) secret.Key {
	t.Helper()
	k, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestNewRecoveryCodes(t *testing.T) {
	form := regexp.MustCompile(`^[a-z2-7]{6}-[a-z2-7]{6}-[a-z2-7]{6}-[a-z2-7]{6}$`)
	codes, err := NewRecoveryCodes(RecoveryCodes)
	if err != nil || len(codes) != 10 {
		t.Fatalf("NewRecoveryCodes(10) = %d codes, %v; want 10, nil", len(codes), err)
	}
	seen := map[string]bool{}
	for _, c := range codes {
		if !form.MatchString(c) {
			t.Errorf("NewRecoveryCodes gave %q; want xxxxxx-xxxxxx-xxxxxx-xxxxxx of lower-case base32", c)
		}
		if norm, ok := NormalizeRecoveryCode(c); !ok || norm != strings.ReplaceAll(c, "-", "") {
			t.Errorf("NormalizeRecoveryCode(%q) = %q, %v; want it without the dashes", c, norm, ok)
		}
		if seen[c] {
			t.Errorf("NewRecoveryCodes repeated %q", c)
		}
		seen[c] = true
	}
	if codes, err := NewRecoveryCodes(0); len(codes) != 0 || err != nil {
		t.Errorf("NewRecoveryCodes(0) = %q, %v; want none", codes, err)
	}
}

// TestRecoveryCodesUniform: every position takes each of the 32 symbols
// about equally often, so each code holds 24 × 5 = 120 bits (ASVS 6.5.2's
// 112 for a plain hash).
func TestRecoveryCodesUniform(t *testing.T) {
	const n = 2000 // 62.5 of each symbol at each position expected, σ ≈ 7.8; bounds at 6σ
	codes, err := NewRecoveryCodes(n)
	if err != nil {
		t.Fatal(err)
	}
	var counts [recoveryLen][256]int
	for _, c := range codes {
		norm, _ := NormalizeRecoveryCode(c)
		for i := range recoveryLen {
			counts[i][norm[i]]++
		}
	}
	for i := range recoveryLen {
		for s := range 256 {
			got := counts[i][s]
			inAlphabet := strings.IndexByte("abcdefghijklmnopqrstuvwxyz234567", byte(s)) >= 0
			if inAlphabet && (got < 15 || got > 110) || !inAlphabet && got != 0 {
				t.Errorf("position %d: %q appears %d times in %d codes; want about %d, and only base32 symbols", i, byte(s), got, n, n/32)
			}
		}
	}
}

func TestNormalizeRecoveryCode(t *testing.T) {
	tests := []struct{ in, want string }{ // want "": no normal form
		{"abcde-fghij", "abcdefghij"},
		{"ABCDE-FGHIJ", "abcdefghij"},
		{"AbCdE fGhIj", "abcdefghij"},
		{" abcdefghij ", "abcdefghij"},
		{"ab-cd-ef-gh-ij", "abcdefghij"},
		{"--abcde--fghij--", "abcdefghij"},
		{"yueigqds", "yueigqds"}, // django-otp static tokens, as they are
		{"4lk63kos", "4lk63kos"},
		{"YUEI-GQDS", "yueigqds"},
		{"0123456789", "0123456789"},
		{"abcdefghijklmnop", "abcdefghijklmnop"},                    // 16: django-otp's longest
		{"abcdef-ghijkl-mnopqr-stuvwx", "abcdefghijklmnopqrstuvwx"}, // 24: authsvc's
		{"abcdefgh", "abcdefgh"},
		{"abcdefg", ""},
		{"abcdefghijklmnopqrstuvwxy", ""},
		{"", ""},
		{"--------", ""},
		{"abcde_fghij", ""},
		{"abcde.fghij", ""},
		{"abcde\tfghij", ""},
		{"abcde\nfghij", ""},
		{"abcde\x00fghij", ""},
		{"abcdéfghij", ""},
		{"ａｂｃｄｅｆｇｈｉｊ", ""}, // full-width letters: NFKC would fold them, this does not
		{"abcdeKfghij", "abcdekfghij"},
		{"abcde\u212afghij", ""}, // Kelvin sign: to lower case it is k in Unicode, not here
		{"ıbcdefghij", ""},
		{strings.Repeat("-", 100) + "abcdefghij", ""},
	}
	for _, tt := range tests {
		got, ok := NormalizeRecoveryCode(tt.in)
		if ok != (tt.want != "") || got != tt.want {
			t.Errorf("NormalizeRecoveryCode(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.want != "")
		}
	}
}

func TestHashRecoveryCode(t *testing.T) {
	k := testKey(t)
	h, err := HashRecoveryCode(k, "abcde-fghij")
	if err != nil || len(h) != 64 {
		t.Fatalf("HashRecoveryCode = %q, %v; want 64 hex characters", h, err)
	}
	if want := k.Fingerprint("recovery code", []byte("abcdefghij")); h != want {
		t.Errorf("HashRecoveryCode = %s; want the key's recovery code fingerprint %s", h, want)
	}
	for _, same := range []string{"ABCDEFGHIJ", "abcde fghij", "abcdefghij"} {
		if got, _ := HashRecoveryCode(k, same); got != h {
			t.Errorf("HashRecoveryCode(%q) = %s; want %s, as for abcde-fghij", same, got, h)
		}
	}
	if got, _ := HashRecoveryCode(testKey(t), "abcde-fghij"); got == h {
		t.Errorf("HashRecoveryCode gives the same hash under two keys")
	}
	if got, err := HashRecoveryCode(k, "short"); !errors.Is(err, ErrMalformedCode) || got != "" {
		t.Errorf("HashRecoveryCode(short) = %q, %v; want ErrMalformedCode", got, err)
	}
	if got, err := HashRecoveryCode(secret.Key{}, "abcde-fghij"); !errors.Is(err, secret.ErrNoKey) || got != "" {
		t.Errorf("HashRecoveryCode(zero key) = %q, %v; want secret.ErrNoKey", got, err)
	}
}

// hashAll hashes codes as an enrolment or an import stores them.
func hashAll(t *testing.T, k secret.Key, codes []string) []string {
	t.Helper()
	hashes := make([]string, len(codes))
	for i, c := range codes {
		h, err := HashRecoveryCode(k, c)
		if err != nil {
			t.Fatalf("HashRecoveryCode(%q) error = %v", c, err)
		}
		hashes[i] = h
	}
	return hashes
}

func TestMatchRecoveryCode(t *testing.T) {
	k := testKey(t)
	codes, _ := NewRecoveryCodes(RecoveryCodes)
	hashes := hashAll(t, k, codes)
	for i, c := range codes {
		for _, typed := range []string{c, strings.ToUpper(c), strings.ReplaceAll(c, "-", " ")} {
			if got, ok := MatchRecoveryCode(k, typed, hashes); !ok || got != i {
				t.Errorf("MatchRecoveryCode(code %d as %q) = %d, %v; want %d, true", i, typed, got, ok, i)
			}
		}
	}
	other, _ := NewRecoveryCodes(1)
	for _, c := range []string{other[0], "", "short", codes[0] + "x", codes[0][:10]} {
		if got, ok := MatchRecoveryCode(k, c, hashes); ok {
			t.Errorf("MatchRecoveryCode(%q) = %d, true; want false", c, got)
		}
	}
	if got, ok := MatchRecoveryCode(testKey(t), codes[0], hashes); ok {
		t.Errorf("MatchRecoveryCode under another key = %d, true; want false", got)
	}
	if got, ok := MatchRecoveryCode(secret.Key{}, codes[0], hashes); ok {
		t.Errorf("MatchRecoveryCode under the zero key = %d, true; want false", got)
	}
	if got, ok := MatchRecoveryCode(k, codes[0], nil); ok {
		t.Errorf("MatchRecoveryCode(no hashes) = %d, true; want false", got)
	}
	// The same code stored twice: the first.
	dup := append(hashAll(t, k, codes[:3]), hashes[1])
	if got, ok := MatchRecoveryCode(k, codes[1], dup); !ok || got != 1 {
		t.Errorf("MatchRecoveryCode(stored twice) = %d, %v; want 1, true", got, ok)
	}
}

// TestMatchComparesEveryHash counts the comparisons: one per stored hash,
// whether the code matches the first, the last or none. A comparison not
// made through the constant-time function, or an early exit, fails it.
func TestMatchComparesEveryHash(t *testing.T) {
	k := testKey(t)
	codes, _ := NewRecoveryCodes(RecoveryCodes)
	hashes := hashAll(t, k, codes)
	other, _ := NewRecoveryCodes(1)
	tests := []struct {
		code  string
		index int
		ok    bool
	}{{codes[0], 0, true}, {codes[4], 4, true}, {codes[9], 9, true}, {other[0], -1, false}}
	for _, tt := range tests {
		n := 0
		count := func(a, b []byte) int {
			n++
			if bytes.Equal(a, b) {
				return 1
			}
			return 0
		}
		got, ok := matchRecoveryCode(k, tt.code, hashes, count)
		if got != tt.index || ok != tt.ok || n != len(hashes) {
			t.Errorf("matchRecoveryCode(%q) = %d, %v after %d comparisons; want %d, %v after %d", tt.code, got, ok, n, tt.index, tt.ok, len(hashes))
		}
	}
}

// TestDjangoStaticTokens: the fixture's django-otp static tokens are
// recovery codes as they are, and match typed in upper case or spaced.
func TestDjangoStaticTokens(t *testing.T) {
	_, tokens := djangoDevices(t)
	if len(tokens) != 5 {
		t.Fatalf("testdata holds %d static tokens; want 5", len(tokens))
	}
	for _, tok := range tokens {
		if norm, ok := NormalizeRecoveryCode(tok); !ok || norm != tok {
			t.Errorf("NormalizeRecoveryCode(static token %q) = %q, %v; want it as it is", tok, norm, ok)
		}
	}
	k := testKey(t)
	hashes := hashAll(t, k, tokens)
	for i, tok := range tokens {
		for _, typed := range []string{tok, strings.ToUpper(tok), tok[:4] + " " + tok[4:], tok[:4] + "-" + tok[4:]} {
			if got, ok := MatchRecoveryCode(k, typed, hashes); !ok || got != i {
				t.Errorf("MatchRecoveryCode(static token %q as %q) = %d, %v; want %d, true", tok, typed, got, ok, i)
			}
		}
	}
}

func FuzzNormalizeRecoveryCode(f *testing.F) {
	for _, s := range []string{"abcde-fghij", "ABCDE FGHIJ", "yueigqds", "abcdefghijklmnopqrstuvwxy", "", "-", "abcdé-fghij", "ａｂｃｄｅｆｇｈｉｊ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		norm, ok := NormalizeRecoveryCode(code)
		if !ok {
			if norm != "" {
				t.Fatalf("NormalizeRecoveryCode(%q) = %q, false; want \"\"", code, norm)
			}
			return
		}
		if len(norm) < 8 || len(norm) > 24 || strings.Trim(norm, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			t.Fatalf("NormalizeRecoveryCode(%q) = %q; want 8 to 24 lower-case letters and digits", code, norm)
		}
		// The normal form is what remains of the input, lower-cased.
		if want := strings.ToLower(strings.NewReplacer(" ", "", "-", "").Replace(code)); norm != want {
			t.Fatalf("NormalizeRecoveryCode(%q) = %q; want %q", code, norm, want)
		}
		for _, again := range []string{norm, strings.ToUpper(norm)} {
			if got, ok := NormalizeRecoveryCode(again); !ok || got != norm {
				t.Fatalf("NormalizeRecoveryCode(%q) = %q, %v; want %q, true", again, got, ok, norm)
			}
		}
	})
}
