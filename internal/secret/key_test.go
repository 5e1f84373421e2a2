package secret

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func sampleKey(t *testing.T) Key {
	t.Helper()
	raw, err := hex.DecodeString(sampleHex)
	if err != nil {
		t.Fatal(err)
	}
	return newKey(raw)
}

func newTestKey(t *testing.T) Key {
	t.Helper()
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyID(t *testing.T) {
	k := sampleKey(t)
	raw, _ := hex.DecodeString(sampleHex)
	sum := sha256.Sum256(append([]byte("authsvc key id"), raw...))
	if got, want := k.ID(), hex.EncodeToString(sum[:4]); got != want {
		t.Errorf("ID() = %s; want %s", got, want)
	}
	if got, want := k.String(), "secret.Key("+k.ID()+")"; got != want {
		t.Errorf("String() = %s; want %s", got, want)
	}
	if id := (Key{}).ID(); id != "" {
		t.Errorf("Key{}.ID() = %q; want \"\"", id)
	}
	if !k.Equal(sampleKey(t)) || k.Equal(newTestKey(t)) || k.Equal(Key{}) || !(Key{}).Equal(Key{}) {
		t.Errorf("Equal does not tell keys apart by their bytes")
	}
}

// TestKeyNeverPrinted prints a key every way fmt can reach it: no output
// holds its hex (either case) or its bytes as numbers.
func TestKeyNeverPrinted(t *testing.T) {
	k := sampleKey(t)
	type config struct {
		Path string
		Key  Key
	}
	type hidden struct {
		name string
		key  Key // fmt cannot call the methods of an unexported field
	}
	values := []any{k, &k, config{"a", k}, &config{"a", k}, hidden{"a", k}, &hidden{"a", k}, []Key{k}, map[string]Key{"k": k}, [1]Key{k}}
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T", "%p"}
	raw := k.b().raw
	forbidden := []string{sampleHex, strings.ToUpper(sampleHex), sampleHex[:16], strings.ToUpper(sampleHex[:16]), fmt.Sprint(raw[:8]), strings.Trim(fmt.Sprint(raw[:4]), "[]")}
	for _, v := range values {
		for _, verb := range verbs {
			out := fmt.Sprintf(verb, v)
			for _, f := range forbidden {
				if strings.Contains(out, f) {
					t.Errorf("fmt.Sprintf(%q, %T) = %q; holds the key (%q)", verb, v, out, f)
				}
			}
		}
		for _, out := range []string{fmt.Sprint(v), fmt.Sprintln(v)} {
			if strings.Contains(out, sampleHex[:16]) {
				t.Errorf("fmt.Sprint(%T) = %q; holds the key", v, out)
			}
		}
	}
	if got := fmt.Sprintf("%v %+v %#v %s", k, k, k, k); got != strings.Repeat(k.String()+" ", 3)+k.String() {
		t.Errorf("fmt.Sprintf(%%v %%+v %%#v %%s, k) = %q; want the ID form four times", got)
	}
}

func TestSealOpen(t *testing.T) {
	k := newTestKey(t)
	for _, pt := range [][]byte{nil, {}, []byte("x"), []byte("12345678901234567890"), bytes.Repeat([]byte{0xff}, 1000)} {
		for _, ad := range [][]byte{nil, []byte("totp\x00alice")} {
			sealed, err := k.Seal(pt, ad)
			if err != nil {
				t.Fatalf("Seal(%d bytes) error = %v", len(pt), err)
			}
			if want := 1 + 4 + 12 + len(pt) + 16; len(sealed) != want {
				t.Errorf("len(Seal(%d bytes)) = %d; want %d", len(pt), len(sealed), want)
			}
			if id, err := SealedKeyID(sealed); err != nil || id != k.ID() {
				t.Errorf("SealedKeyID(Seal) = %q, %v; want %s", id, err, k.ID())
			}
			if len(pt) >= 8 && bytes.Contains(sealed, pt[:8]) {
				t.Errorf("Seal(%q) holds the plaintext", pt)
			}
			got, err := k.Open(sealed, ad)
			if err != nil || !bytes.Equal(got, pt) {
				t.Errorf("Open(Seal(%q, %q)) = %q, %v; want the plaintext", pt, ad, got, err)
			}
		}
	}
	a, _ := k.Seal([]byte("same"), nil)
	b, _ := k.Seal([]byte("same"), nil)
	if bytes.Equal(a, b) {
		t.Errorf("Seal twice gave the same value: the nonce is not random")
	}
}

func TestOpenRefuses(t *testing.T) {
	k := newTestKey(t)
	ad := []byte("totp\x00alice")
	sealed, err := k.Seal([]byte("JBSWY3DPEHPK3PXP"), ad)
	if err != nil {
		t.Fatal(err)
	}

	// Every byte, every bit: the key ID bytes name another key, the rest
	// no longer authenticate.
	for i := range sealed {
		for bit := 0; bit < 8; bit++ {
			tampered := bytes.Clone(sealed)
			tampered[i] ^= 1 << bit
			want := ErrCorrupt
			if 1 <= i && i < 5 {
				want = ErrWrongKey
			}
			if got, err := k.Open(tampered, ad); !errors.Is(err, want) {
				t.Errorf("Open(sealed with byte %d bit %d flipped) = %q, %v; want %v", i, bit, got, err, want)
			}
		}
	}
	for n := 0; n < len(sealed); n++ {
		if got, err := k.Open(sealed[:n], ad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open(first %d bytes) = %q, %v; want ErrCorrupt", n, got, err)
		}
	}
	if got, err := k.Open(append(bytes.Clone(sealed), 0), ad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open(one byte more) = %q, %v; want ErrCorrupt", got, err)
	}

	// Copied to another user's row: the additional data differs.
	for _, other := range [][]byte{[]byte("totp\x00bob"), []byte("totp\x00alice\x00"), []byte("totp\x00Alice"), nil} {
		if got, err := k.Open(sealed, other); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open(additional data %q, sealed with %q) = %q, %v; want ErrCorrupt", other, ad, got, err)
		}
	}

	other := newTestKey(t)
	if got, err := other.Open(sealed, ad); !errors.Is(err, ErrWrongKey) {
		t.Errorf("Open with another key = %q, %v; want ErrWrongKey", got, err)
	}
	// Another key that claims this key's ID still fails to authenticate.
	forged := newTestKey(t)
	forged.b().id = k.b().id
	if got, err := forged.Open(sealed, ad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open with another key of the same ID = %q, %v; want ErrCorrupt", got, err)
	}

	var zero Key
	if _, err := zero.Seal([]byte("x"), nil); !errors.Is(err, ErrNoKey) {
		t.Errorf("Key{}.Seal error = %v; want ErrNoKey", err)
	}
	if _, err := zero.Open(sealed, ad); !errors.Is(err, ErrNoKey) {
		t.Errorf("Key{}.Open error = %v; want ErrNoKey", err)
	}
}

func TestFingerprint(t *testing.T) {
	k := sampleKey(t)
	data := []byte("pbkdf2_sha256$600000$salt$hash")
	// The construction, spelled out: HMAC-SHA-256 under HMAC-SHA-256(key,
	// "authsvc fingerprint " + purpose).
	sub := hmac.New(sha256.New, k.b().raw[:])
	sub.Write([]byte("authsvc fingerprint django hash"))
	m := hmac.New(sha256.New, sub.Sum(nil))
	m.Write(data)
	want := hex.EncodeToString(m.Sum(nil))
	if got := k.Fingerprint("django hash", data); got != want {
		t.Errorf("Fingerprint(django hash) = %s; want %s", got, want)
	}
	if k.Fingerprint("recovery code", data) == want {
		t.Errorf("Fingerprint gives the same value for two purposes")
	}
	if newTestKey(t).Fingerprint("django hash", data) == want {
		t.Errorf("Fingerprint gives the same value under two keys")
	}
	plain := sha256.Sum256(data)
	if want == hex.EncodeToString(plain[:]) {
		t.Errorf("Fingerprint is a bare SHA-256")
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Key{}.Fingerprint did not panic")
		}
	}()
	Key{}.Fingerprint("x", data)
}

func TestKeyring(t *testing.T) {
	old1, old2, cur := newTestKey(t), newTestKey(t), newTestKey(t)
	ad := []byte("totp\x00alice")
	ring := NewKeyring(cur, old1, Key{}, old2)
	if !ring.Current().Equal(cur) {
		t.Errorf("Current() = %v; want %v", ring.Current(), cur)
	}
	for _, tt := range []struct {
		k     Key
		stale bool
	}{{cur, false}, {old1, true}, {old2, true}} {
		sealed, _ := tt.k.Seal([]byte("secret"), ad)
		got, stale, err := ring.Open(sealed, ad)
		if err != nil || string(got) != "secret" || stale != tt.stale {
			t.Errorf("Keyring.Open(sealed under %v) = %q, %v, %v; want secret, %v, nil", tt.k, got, stale, err, tt.stale)
		}
		if _, _, err := ring.Open(sealed, []byte("totp\x00bob")); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Keyring.Open(sealed under %v, other additional data) error = %v; want ErrCorrupt", tt.k, err)
		}
	}
	sealed, err := ring.Seal([]byte("new"), ad)
	if got, err2 := cur.Open(sealed, ad); err != nil || err2 != nil || string(got) != "new" {
		t.Errorf("Keyring.Seal does not seal under the current key: %v, %v", err, err2)
	}
	stranger, _ := newTestKey(t).Seal([]byte("x"), ad)
	if _, _, err := ring.Open(stranger, ad); !errors.Is(err, ErrWrongKey) {
		t.Errorf("Keyring.Open(sealed under a key not in the ring) error = %v; want ErrWrongKey", err)
	}
	if _, _, err := ring.Open([]byte("short"), ad); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Keyring.Open(short) error = %v; want ErrCorrupt", err)
	}
	if _, _, err := (Keyring{}).Open(sealed, ad); !errors.Is(err, ErrNoKey) {
		t.Errorf("Keyring{}.Open error = %v; want ErrNoKey", err)
	}
	if _, err := (Keyring{}).Seal(nil, nil); !errors.Is(err, ErrNoKey) {
		t.Errorf("Keyring{}.Seal error = %v; want ErrNoKey", err)
	}
}
