package password

import (
	"errors"
	"strings"
	"testing"
)

func TestPasswordPolicy(t *testing.T) {
	p := Policy{MinLength: DefaultMinLength}
	tests := []struct {
		username, password string
		rule               string // a word the refusal must contain; "" means accepted
	}{
		{"alice", "k7#Vq2!mZp9w", ""},                 // 12 random-looking characters
		{"alice", "correct horse battery staple", ""}, // a passphrase: no composition rules
		{"alice", strings.Repeat("é", 12), ""},        // 12 code points, 24 bytes
		{"alice", strings.Repeat("x", MaxLen), ""},    // exactly the byte limit
		{"alice", "k7#Vq2!mZp9", "12"},                // 11 characters
		{"alice", strings.Repeat("é", 11), "12"},      // 22 bytes but 11 code points
		{"alice", "", "12"},
		{"alice", strings.Repeat("x", MaxLen+1), "1024"},
		{"alice", "valid prefix \xff\xfe then junk", "UTF-8"},
		{"administrator", "administrator", "username"},
		{"administrator", "AdMiNiStRaToR", "username"},
		{"Administrator", "administrator", "username"},
		{"administrator", "ａｄｍｉｎｉｓｔｒａｔｏｒ", "username"}, // fullwidth
		{"1234567890123", "1234567890123", "username"},
		{"alice", "1qaz2wsx3edc4rfv", "common"},
		{"alice", "1QAZ2WSX3EDC4RFV", "common"},
		{"alice", "qwerty123456", "common"},
		{"bob", "Administrator", "common"}, // listed, and not bob's name
	}
	for _, tt := range tests {
		err := p.Check(tt.username, tt.password)
		switch {
		case tt.rule == "" && err != nil:
			t.Errorf("check(%q, %q) = %v; want nil", tt.username, tt.password, err)
		case tt.rule != "" && err == nil:
			t.Errorf("check(%q, %q) = nil; want a refusal naming %q", tt.username, tt.password, tt.rule)
		case tt.rule != "" && !strings.Contains(err.Error(), tt.rule):
			t.Errorf("check(%q, %q) = %v; want a refusal naming %q", tt.username, tt.password, err, tt.rule)
		}
		var weak *WeakError
		if err != nil && !errors.As(err, &weak) {
			t.Errorf("check(%q, %q) = %T; want *WeakError", tt.username, tt.password, err)
		}
	}
}

// The list matters when an operator lowers the minimum, so test it there.
func TestPasswordPolicyCommon(t *testing.T) {
	p := Policy{MinLength: 6}
	for _, pw := range []string{"password", "123456", "Password", "PASSWORD", "qwerty123", "michael", "ｐａｓｓｗｏｒｄ"} {
		err := p.Check("alice", pw)
		if err == nil || !strings.Contains(err.Error(), "common") {
			t.Errorf("check(alice, %q) = %v; want a refusal as common", pw, err)
		}
	}
	for _, pw := range []string{"k7#Vq2!m", "zq9!Lw2@"} {
		if err := p.Check("alice", pw); err != nil {
			t.Errorf("check(alice, %q) = %v; want nil", pw, err)
		}
	}
}

func TestPasswordPolicyMinLength(t *testing.T) {
	for _, tt := range []struct {
		min, n int
		ok     bool
	}{
		{8, 7, false}, {8, 8, true}, {20, 19, false}, {20, 20, true}, {0, 0, false}, {0, 1, true}, {-3, 1, true},
	} {
		// Letters the list cannot hold: a long run of one rare letter.
		pw := strings.Repeat("ж", tt.n)
		err := Policy{MinLength: tt.min}.Check("alice", pw)
		if (err == nil) != tt.ok {
			t.Errorf("Policy{%d}.check(alice, %d characters) = %v; want ok %v", tt.min, tt.n, err, tt.ok)
		}
	}
}

func TestCommonPasswordsList(t *testing.T) {
	list := commonPasswords()
	if len(list) < 10000 {
		t.Fatalf("len(commonPasswords()) = %d; want at least 10000", len(list))
	}
	if got := strings.Count(commonPasswordsFile, "\n"); got != len(list) {
		t.Errorf("commonpasswords.txt has %d lines but %d distinct entries; want one entry a line, no duplicates", got, len(list))
	}
	for _, w := range list {
		if w != strings.ToLower(w) {
			t.Errorf("commonPasswords() holds %q; want lowercase only, or the lookup misses it", w)
		}
	}
	for _, w := range []string{"123456", "password", "qwerty123", "iloveyou"} {
		if !isCommonPassword(w) {
			t.Errorf("isCommonPassword(%q) = false; want true", w)
		}
	}
}

func TestPasswordPolicyNeverQuotesPassword(t *testing.T) {
	refusals := []struct {
		p                  Policy
		username, password string
	}{
		{Policy{MinLength: 12}, "alice", "short pw"},
		{Policy{MinLength: 12}, "alice", strings.Repeat("secret", 200)},
		{Policy{MinLength: 12}, "alice", "secret \xff secret"},
		{Policy{MinLength: 12}, "administrator", "Administrator"},
		// Not "password" itself: every message says "password", quoting nothing.
		{Policy{MinLength: 6}, "alice", "iloveyou"},
		{Policy{MinLength: 6}, "alice", "Dragon"},
		{Policy{MinLength: 6}, "alice", "qwerty123"},
	}
	for _, r := range refusals {
		err := r.p.Check(r.username, r.password)
		if err == nil {
			t.Errorf("check(%q, %q) = nil; want a refusal", r.username, r.password)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, r.password) || strings.Contains(strings.ToLower(msg), strings.ToLower(r.password)) {
			t.Errorf("check(%q, %q) = %q; want a message that does not quote the password", r.username, r.password, msg)
		}
		if strings.ContainsAny(msg, "\r\n") {
			t.Errorf("check(%q, %q) = %q; want one line", r.username, r.password, msg)
		}
	}
}

func BenchmarkPasswordPolicy(b *testing.B) {
	p := Policy{MinLength: DefaultMinLength}
	commonPasswords()
	for b.Loop() {
		_ = p.Check("alice", "k7#Vq2!mZp9w")
	}
}
