package users

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The expectations below were checked against Python 3.11 running Django's
// rule: unicodedata.normalize("NFKC", s), then re.match(r'^[\w.@+-]+\Z').
func TestUsernames(t *testing.T) {
	tests := []struct {
		name  string // what the case is about
		in    string
		norm  string
		valid bool
	}{
		{"ascii", "alice", "alice", true},
		{"all symbols", "a.b@c+d-e_f", "a.b@c+d-e_f", true},
		{"precomposed", "zo\u00eb", "zo\u00eb", true},
		{"decomposed", "zoe\u0308", "zo\u00eb", true},
		{"fullwidth", "ｚｏｅ", "zoe", true},
		{"ligature", "\ufb01", "fi", true},
		{"A ring", "\u00c5sa", "\u00c5sa", true},
		{"angstrom sign", "\u212bsa", "\u00c5sa", true},
		{"han", "李雷", "李雷", true},
		{"superscript two", "x²", "x2", true},
		{"roman numeral", "Ⅻ", "XII", true},
		{"arabic-indic digit", "٣", "٣", true},
		{"case kept", "Alice", "Alice", true},
		{"space", "user name", "user name", false},
		{"slash", "a/b", "a/b", false},
		{"emoji", "😀", "😀", false},
		{"emoji in name", "bob😀", "bob😀", false},
		{"combining mark kept by NFKC", "हिन्दी", "हिन्दी", false},
		{"zero-width joiner", "a\u200db", "a\u200db", false},
		{"trailing newline", "alice\n", "alice\n", false},
		{"nul", "a\x00b", "a\x00b", false},
		{"empty", "", "", false},
		{"150 two-byte", strings.Repeat("\u00eb", 150), strings.Repeat("\u00eb", 150), true},
		{"151 two-byte", strings.Repeat("\u00eb", 151), strings.Repeat("\u00eb", 151), false},
		{"150 three-byte", strings.Repeat("李", 150), strings.Repeat("李", 150), true},
		{"151 three-byte", strings.Repeat("李", 151), strings.Repeat("李", 151), false},
		// 300 code points in, 150 after NFKC: the limit is on the stored form.
		{"300 decomposed to 150", strings.Repeat("e\u0308", 150), strings.Repeat("\u00eb", 150), true},
		// One code point in, three out: the limit is on the stored form.
		{"expands past 150", strings.Repeat("a", 148) + "Ⅻ", strings.Repeat("a", 148) + "XII", false},
	}
	for _, tt := range tests {
		got := NormalizeUsername(tt.in)
		if got != tt.norm {
			t.Errorf("%s: NormalizeUsername(%+q) = %+q; want %+q", tt.name, tt.in, got, tt.norm)
		}
		if v := validUnicodeUsername(got); v != tt.valid {
			t.Errorf("%s: validUnicodeUsername(%+q) = %v; want %v", tt.name, got, v, tt.valid)
		}
		if !isNFKC(got) {
			t.Errorf("%s: isNFKC(%+q) = false; want true", tt.name, got)
		}
		if n := isNFKC(tt.in); n != (tt.in == tt.norm) {
			t.Errorf("%s: isNFKC(%+q) = %v; want %v", tt.name, tt.in, n, tt.in == tt.norm)
		}
	}
}

func TestUsernameInvalidUTF8(t *testing.T) {
	for _, s := range []string{"\xff", "ab\xc3", "a\xed\xa0\x80b"} {
		if validUnicodeUsername(s) {
			t.Errorf("validUnicodeUsername(%+q) = true; want false", s)
		}
	}
}

// usernameOracle is the rule written a second way, by the regexp package's
// own Unicode tables, which also read invalid UTF-8 as U+FFFD.
var usernameOracle = regexp.MustCompile(`^[\p{L}\p{N}@.+_-]{1,150}$`)

func FuzzNormalizeUsername(f *testing.F) {
	for _, s := range []string{"alice", "zoe\u0308", "ｚｏｅ", "\ufb01", "\u212bsa", "李雷", "user name", "😀", "हिन्दी", "Ⅻ", "\xff", strings.Repeat("e\u0308", 150)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := NormalizeUsername(s)
		if again := NormalizeUsername(n); again != n {
			t.Fatalf("NormalizeUsername(%+q) = %+q; want it unchanged", n, again)
		}
		if !isNFKC(n) {
			t.Fatalf("isNFKC(NormalizeUsername(%+q)) = false; want true", s)
		}
		// Canonically equivalent spellings are one username, so one verdict.
		if utf8.ValidString(s) {
			for _, form := range []norm.Form{norm.NFC, norm.NFD} {
				if m := NormalizeUsername(form.String(s)); m != n {
					t.Fatalf("NormalizeUsername(%v(%+q)) = %+q; want %+q", form, s, m, n)
				}
			}
		}
		if got, want := validUnicodeUsername(n), usernameOracle.MatchString(n); got != want {
			t.Fatalf("validUnicodeUsername(%+q) = %v; want %v", n, got, want)
		}
	})
}
