package tokens

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
)

const sampleToken = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"

func TestParseAuthorization(t *testing.T) {
	raw, _ := hex.DecodeString(sampleToken)
	want := Digest(sha256.Sum256(raw))
	tests := []struct {
		header []string // authorization header values
		err    error    // nil: want the sample token's digest
	}{
		{[]string{"Token " + sampleToken}, nil},
		{[]string{"TOKEN " + sampleToken}, nil},
		{[]string{"token " + sampleToken}, nil},
		{[]string{"ToKeN " + sampleToken}, nil},
		{[]string{"Bearer " + sampleToken}, nil},
		{[]string{"bearer " + sampleToken}, nil},
		{[]string{"Token   " + sampleToken}, nil},
		{[]string{"Token\t" + sampleToken}, nil},
		{[]string{"Token \t " + sampleToken}, nil},
		{nil, ErrNoCredentials},
		{[]string{""}, ErrNoCredentials},
		{[]string{"Basic " + sampleToken}, ErrNoCredentials},
		{[]string{"JWT " + sampleToken}, ErrNoCredentials},
		{[]string{"Tokens " + sampleToken}, ErrNoCredentials},
		{[]string{"Token" + sampleToken}, ErrNoCredentials},
		{[]string{"To\u212aen " + sampleToken}, ErrNoCredentials}, // Kelvin sign folds to k in Unicode
		{[]string{"Token"}, ErrBadToken},
		{[]string{"Token "}, ErrBadToken},
		{[]string{"Token " + sampleToken + " " + sampleToken}, ErrBadToken},
		{[]string{"Token " + sampleToken + " x"}, ErrBadToken},
		{[]string{"Token " + sampleToken[:39]}, ErrBadToken},
		{[]string{"Token " + sampleToken + "0"}, ErrBadToken},
		{[]string{"Token " + strings.ToUpper(sampleToken)}, ErrBadToken},
		{[]string{"Token " + sampleToken[:39] + "g"}, ErrBadToken},
		{[]string{"Token " + sampleToken[:39] + "\x00"}, ErrBadToken},
		{[]string{"Token " + sampleToken, "Token " + sampleToken}, ErrBadToken},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.header != nil {
			h["Authorization"] = tt.header
		}
		got, kind, err := ParseAuthorization(h)
		if !errors.Is(err, tt.err) {
			t.Errorf("ParseAuthorization(%q) error = %v; want %v", tt.header, err, tt.err)
			continue
		}
		if tt.err == nil && (got != want || kind != KindSession) {
			t.Errorf("ParseAuthorization(%q) = %x, %v; want %x, session", tt.header, got, kind, want)
		}
	}
}

func TestNewToken(t *testing.T) {
	seen := make(map[string]bool)
	for i := 0; i < 1000; i++ {
		tok, d := New()
		got, err := DigestOf(tok)
		if err != nil || got != d {
			t.Fatalf("DigestOf(New()) = %x, %v; want %x", got, err, d)
		}
		if seen[tok] {
			t.Fatalf("New() repeated %s", tok)
		}
		seen[tok] = true
	}
}

func FuzzParseCredentials(f *testing.F) {
	for _, s := range []string{"Token " + sampleToken, "bearer\t" + sampleToken, "Token", "Basic abc", "Token  a b", "", "\t", "Token " + sampleToken + " "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, kind, err := ParseCredentials(v)
		if err != nil {
			if !errors.Is(err, ErrNoCredentials) && !errors.Is(err, ErrBadToken) {
				t.Fatalf("ParseCredentials(%q) error = %v; want ErrNoCredentials or ErrBadToken", v, err)
			}
			return
		}
		// A success means: a Token/Bearer scheme, blanks, then 40 lowercase
		// hex or a personal access token whose checksum matches.
		scheme, rest, ok := strings.Cut(strings.ReplaceAll(v, "\t", " "), " ")
		rest = strings.TrimLeft(rest, " ")
		if ok && isTokenScheme(scheme) && kind == KindPAT {
			if !ValidPAT(rest) || sha256.Sum256([]byte(rest)) != d {
				t.Fatalf("ParseCredentials(%q) accepted a malformed personal access token", v)
			}
			return
		}
		if !ok || !isTokenScheme(scheme) || kind != KindSession || len(rest) != Length || strings.ToLower(rest) != rest {
			t.Fatalf("ParseCredentials(%q) accepted a malformed header", v)
		}
		raw, err := hex.DecodeString(rest)
		if err != nil || sha256.Sum256(raw) != d {
			t.Fatalf("ParseCredentials(%q) = %x; want digest of %s", v, d, rest)
		}
	})
}
