package tokens

import (
	"crypto/sha256"
	"errors"
	"hash/crc32"
	"math/big"
	"net/http"
	"strings"
	"testing"
)

// samplePAT is a personal access token made by hand from API.md's rule:
// the CRC-32 of the 30 random characters, in base62, left-padded.
func samplePAT(t *testing.T, random string) string {
	t.Helper()
	sum := new(big.Int).SetUint64(uint64(crc32.ChecksumIEEE([]byte(random))))
	digits := ""
	for range 6 {
		m := new(big.Int)
		sum.DivMod(sum, big.NewInt(62), m)
		digits = string(base62[m.Int64()]) + digits
	}
	return "authsvc_pat_" + random + digits
}

func TestNewPAT(t *testing.T) {
	seen := make(map[string]bool)
	counts := make(map[byte]int)
	for range 2000 {
		tok, d := NewPAT()
		if len(tok) != PATLength || !strings.HasPrefix(tok, "authsvc_pat_") {
			t.Fatalf("NewPAT() = %q; want authsvc_pat_ and 36 characters", tok)
		}
		if want := samplePAT(t, tok[12:42]); tok != want {
			t.Fatalf("NewPAT() = %q; its checksum by API.md's rule gives %q", tok, want)
		}
		got, kind, err := ParseToken(tok)
		if err != nil || got != d || d != sha256.Sum256([]byte(tok)) || kind != KindPAT {
			t.Fatalf("ParseToken(NewPAT()) = %x, %v, %v; want %x, pat", got, kind, err, d)
		}
		if seen[tok] {
			t.Fatalf("NewPAT() repeated %s", tok)
		}
		seen[tok] = true
		for i := 12; i < 42; i++ {
			counts[tok[i]]++
		}
	}
	// 60,000 characters over 62: each about 968 times. A biased draw
	// (say byte % 62 without rejection) gives the first 8 about 1,000 and
	// the rest about 955; this only catches a grossly broken alphabet.
	if len(counts) != 62 {
		t.Errorf("NewPAT() used %d distinct characters; want all 62", len(counts))
	}
	for c, n := range counts {
		if n < 800 || n > 1150 {
			t.Errorf("NewPAT() drew %q %d times in 60,000; want about 968", c, n)
		}
	}
}

func TestParsePAT(t *testing.T) {
	good := samplePAT(t, "0123456789ABCDEFGHIJabcdefghij")
	wrongSum := good[:len(good)-1] + string(base62[(strings.IndexByte(base62, good[len(good)-1])+1)%62])
	tests := []struct {
		header string
		err    error
	}{
		{"Token " + good, nil},
		{"bearer\t" + good, nil},
		{"Token " + wrongSum, ErrBadToken},
		{"Token " + good[:len(good)-1], ErrBadToken},
		{"Token " + good + "0", ErrBadToken},
		{"Token " + strings.Replace(good, "authsvc_pat_", "authsvc_pas_", 1), ErrBadToken},
		{"Token " + strings.Replace(good, "0123", "0-23", 1), ErrBadToken},
		{"Token " + strings.ToUpper(good), ErrBadToken},
	}
	for _, tt := range tests {
		d, kind, err := ParseAuthorization(http.Header{"Authorization": {tt.header}})
		if !errors.Is(err, tt.err) {
			t.Errorf("ParseAuthorization(%q) error = %v; want %v", tt.header, err, tt.err)
			continue
		}
		if tt.err == nil && (d != sha256.Sum256([]byte(good)) || kind != KindPAT) {
			t.Errorf("ParseAuthorization(%q) = %x, %v; want the token's SHA-256, pat", tt.header, d, kind)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindSession: "session", KindPAT: "pat", 0: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q; want %q", k, got, want)
		}
	}
}

// TestPATCheckAllocations: checking a personal access token's form and
// taking its digest allocate nothing: they run on every request.
func TestPATCheckAllocations(t *testing.T) {
	tok, want := NewPAT()
	if got := crcIEEE(tok[12:42]); got != crc32.ChecksumIEEE([]byte(tok[12:42])) {
		t.Fatalf("crcIEEE(%q) = %08x; want crc32.ChecksumIEEE's %08x", tok[12:42], got, crc32.ChecksumIEEE([]byte(tok[12:42])))
	}
	allocs := testing.AllocsPerRun(100, func() {
		if d, err := PATDigestOf(tok); err != nil || d != want {
			t.Fatalf("PATDigestOf = %x, %v; want %x", d, err, want)
		}
	})
	if allocs != 0 {
		t.Errorf("PATDigestOf allocates %v times per call; want 0", allocs)
	}
}
