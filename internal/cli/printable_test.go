package cli

import "testing"

func TestPrintable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"Alice Liddell", "Alice Liddell"},
		{"Bøb Ünïcödé 日本 😀", "Bøb Ünïcödé 日本 😀"},
		{`back\slash`, `back\slash`},
		{"a\nb", `a\x0ab`},
		{"\x1b[2J", `\x1b[2J`},
		{"\x00\x7f", `\x00\x7f`},
		{"\u0085\u009b", `\u0085\u009b`},
		{"\u202eabc\u2028", `\u202eabc\u2028`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},
		{"\U000e0001", `\U000e0001`},
	} {
		if got := printable(tt.in); got != tt.want {
			t.Errorf("printable(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
