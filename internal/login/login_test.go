package login

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/mfa"
	"authsvc/internal/password"
	"authsvc/internal/password/passwordtest"
	"authsvc/internal/secret"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// testLogins is the login domain on real stores: a users file of alice
// (no second factor), bob (recovery codes) and carol (disabled), the
// memory token store and the memory throttle; codes are bob's recovery
// codes.
type testLogins struct {
	*Logins
	store *tokens.MemoryStore
	codes []string
}

// newTestLogins returns the login domain of a fresh users file, with the
// throttle's limits cfg (zero: the defaults) and the session policy.
func newTestLogins(t *testing.T, cfg throttle.Config, policy SessionPolicy) testLogins {
	t.Helper()
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	keys := secret.NewKeyring(key)
	codes, err := mfa.NewRecoveryCodes(3)
	if err != nil {
		t.Fatal(err)
	}
	f := new(users.Factors)
	if err := f.SetRecoveryCodes(key, codes); err != nil {
		t.Fatal(err)
	}
	hash := func(pw string) string { return passwordtest.MustHash(t, pw, passwordtest.Cost) }
	path := filepath.Join(t.TempDir(), "users.json")
	err = usersfile.Write(path, []users.User{
		{Username: "alice", PasswordHash: hash("alice-pw"), Groups: []string{}},
		{Username: "bob", PasswordHash: hash("bob-pw"), Groups: []string{}, MFA: f},
		{Username: "carol", PasswordHash: hash("carol-pw"), Groups: []string{}, Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	dir, err := usersfile.Open(path, discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg == (throttle.Config{}) {
		cfg = throttle.DefaultConfig()
	}
	store := tokens.NewMemoryStore()
	guard := &Guard{Throttle: throttle.NewMemory(cfg), Admission: NewAdmission(1, 4, time.Second), Log: discard,
		Now: time.Now, Policy: password.HashPolicy{Scheme: password.SchemeBcrypt, BcryptCost: passwordtest.Cost}}
	t.Cleanup(func() { guard.CloseRehashes(context.Background()) })
	return testLogins{
		Logins: &Logins{Guard: guard, Users: dir, Store: store, Policy: policy, Now: time.Now,
			Factors: SecondFactors{Users: dir, Store: store, Keys: keys, Now: time.Now, Log: discard}},
		store: store,
		codes: codes,
	}
}

// testClient returns the client of the tests' attempts.
func testClient() Client { return Client{Key: "192.0.2.1", RequestID: "req-1", UserAgent: "test/1"} }

// TestPassword: each way a password login ends, through the real users
// file and token store.
func TestPassword(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, username, password string
		code                     int // 1 + the index of bob's recovery code sent beside the password; -1 a wrong one; 0 none
		wantErr                  error
	}{
		{name: "right password", username: "alice", password: "alice-pw"},
		{name: "wrong password", username: "alice", password: "alice-pw2", wantErr: ErrInvalidCredentials},
		{name: "unknown user", username: "nobody", password: "alice-pw", wantErr: ErrInvalidCredentials},
		{name: "disabled user", username: "carol", password: "carol-pw", wantErr: ErrInvalidCredentials},
		{name: "second factor, no code", username: "bob", password: "bob-pw", wantErr: ErrSecondFactorRequired},
		{name: "second factor, right code", username: "bob", password: "bob-pw", code: 1},
		{name: "second factor, wrong code", username: "bob", password: "bob-pw", code: -1, wantErr: ErrInvalidCredentials},
		{name: "second factor, wrong password", username: "bob", password: "bob-pw2", code: 1, wantErr: ErrInvalidCredentials},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newTestLogins(t, throttle.Config{}, SessionPolicy{TTL: time.Hour})
			code := ""
			switch {
			case tt.code > 0:
				code = l.codes[tt.code-1]
			case tt.code < 0:
				code = "aaaa-bbbb-cccc-dddd"
			}
			g, err := l.Password(context.Background(), testClient(), tt.username, tt.password, code)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Password(%s) = _, %v; want %v", tt.username, err, tt.wantErr)
			}
			if err != nil {
				if g != (Grant{}) {
					t.Errorf("Password(%s) = %+v, %v; want no grant with an error", tt.username, g, err)
				}
				return
			}
			if g.Token == "" || g.Account.Username() != tt.username || g.ExpiresAt == nil || g.Enrolment {
				t.Fatalf("Password(%s) = %+v; want a session of %s expiring in an hour", tt.username, g, tt.username)
			}
			digest, err := tokens.DigestOf(g.Token)
			if err != nil {
				t.Fatal(err)
			}
			listed, err := l.store.List(context.Background(), tt.username, time.Now())
			if err != nil || len(listed) != 1 || listed[0].Digest != digest || listed[0].Client != testClient().Key || listed[0].UserAgent != testClient().UserAgent {
				t.Errorf("store.List(%s) = %+v, %v; want the grant's session from %s, %s", tt.username, listed, err, testClient().Key, testClient().UserAgent)
			}
		})
	}
}

// TestPasswordSecondStep: a right password of a user with a second factor
// is a SecondFactorError whose mfa_token, with a right code, is a session
// once; an mfa_token that names nothing names no user.
func TestPasswordSecondStep(t *testing.T) {
	ctx := context.Background()
	l := newTestLogins(t, throttle.Config{}, SessionPolicy{})
	_, err := l.Password(ctx, testClient(), "bob", "bob-pw", "")
	var sf *SecondFactorError
	if !errors.As(err, &sf) || sf.Token == "" || len(sf.Methods) != 1 || sf.Methods[0] != MethodCode {
		t.Fatalf("Password(bob, no code) = %v; want a SecondFactorError with an mfa_token and the method %q", err, MethodCode)
	}
	if strings.Contains(err.Error(), sf.Token) {
		t.Errorf("SecondFactorError.Error() = %q shows the mfa_token", err)
	}
	username, _, err := l.SecondStep(ctx, testClient(), sf.Token, "aaaa-bbbb-cccc-dddd")
	if username != "bob" || !errors.Is(err, ErrInvalidCredentials) {
		t.Errorf("SecondStep(wrong code) = %q, %v; want bob, %v", username, err, ErrInvalidCredentials)
	}
	username, g, err := l.SecondStep(ctx, testClient(), sf.Token, l.codes[0])
	if username != "bob" || err != nil || g.Token == "" || g.ExpiresAt != nil {
		t.Fatalf("SecondStep(right code) = %q, %+v, %v; want bob's session, never expiring", username, g, err)
	}
	username, _, err = l.SecondStep(ctx, testClient(), sf.Token, l.codes[1])
	if username != "" || !errors.Is(err, ErrInvalidToken) {
		t.Errorf("SecondStep(a spent mfa_token) = %q, %v; want \"\", %v", username, err, ErrInvalidToken)
	}
	if username, _, err := l.SecondStep(ctx, testClient(), "not-a-token", l.codes[1]); username != "" || !errors.Is(err, ErrInvalidToken) {
		t.Errorf("SecondStep(a malformed mfa_token) = %q, %v; want \"\", %v", username, err, ErrInvalidToken)
	}
}

// TestPasswordThrottled: wrong passwords, and wrong codes beside a right
// password, count, and once the pair's limit is reached the next attempt,
// right or wrong, is throttled with a Retry-After, before the password is
// checked; another client is not.
func TestPasswordThrottled(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ username, password, code string }{
		{"alice", "wrong-pw", ""},
		{"bob", "bob-pw", "aaaa-bbbb-cccc-dddd"},
	} {
		t.Run(tt.username, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cfg := throttle.DefaultConfig()
			cfg.PairFailures, cfg.AddrBurst = 2, 100
			l := newTestLogins(t, cfg, SessionPolicy{})
			for i := range cfg.PairFailures {
				if _, err := l.Password(ctx, testClient(), tt.username, tt.password, tt.code); !errors.Is(err, ErrInvalidCredentials) {
					t.Fatalf("Password(%s, wrong) #%d = %v; want %v", tt.username, i+1, err, ErrInvalidCredentials)
				}
			}
			right := tt.username + "-pw"
			_, err := l.Password(ctx, testClient(), tt.username, right, "")
			var te *ThrottledError
			if !errors.As(err, &te) || !errors.Is(err, ErrThrottled) || te.RetryAfter <= 0 {
				t.Fatalf("Password(%s, right) after %d wrong = %v; want a ThrottledError with a Retry-After", tt.username, cfg.PairFailures, err)
			}
			other := Client{Key: "192.0.2.2"}
			if _, err := l.Password(ctx, other, tt.username, right, ""); err != nil && !errors.Is(err, ErrSecondFactorRequired) {
				t.Errorf("Password(%s, right) from another client = %v; want no refusal: the pair is throttled, not the user", tt.username, err)
			}
		})
	}
}

// TestPasswordEnrolment: a user whom --require-mfa covers and who has no
// second factor gets an enrolment session.
func TestPasswordEnrolment(t *testing.T) {
	all, err := users.ParseMFAPolicy("all")
	if err != nil {
		t.Fatal(err)
	}
	l := newTestLogins(t, throttle.Config{}, SessionPolicy{RequireMFA: all})
	g, err := l.Password(context.Background(), testClient(), "alice", "alice-pw", "")
	if err != nil || !g.Enrolment {
		t.Errorf("Password(alice) under --require-mfa all = %+v, %v; want an enrolment session", g, err)
	}
	a := l.Guard.Attempt(context.Background(), testClient(), l.Users, "alice")
	if err := l.Prove(a, "alice-pw", ""); !errors.Is(err, ErrEnrolmentRequired) {
		t.Errorf("Prove(alice) under --require-mfa all = %v; want %v", err, ErrEnrolmentRequired)
	}
}

// TestErrorsMatch: the errors that carry data are found by errors.Is and
// errors.As through a wrap, and their text shows no secret.
func TestErrorsMatch(t *testing.T) {
	throttled := fmt.Errorf("wrapped: %w", &ThrottledError{RetryAfter: 3 * time.Second, Limits: "pair"})
	var te *ThrottledError
	if !errors.Is(throttled, ErrThrottled) || !errors.As(throttled, &te) || te.RetryAfter != 3*time.Second {
		t.Errorf("errors.Is/As(%v) = false; want the ThrottledError of 3s", throttled)
	}
	if errors.Is(throttled, ErrCodeLocked) || errors.Is(throttled, ErrSecondFactorRequired) {
		t.Errorf("errors.Is(%v) matches another sentinel", throttled)
	}
	required := fmt.Errorf("wrapped: %w", &SecondFactorError{Token: "the-secret-mfa-token", Methods: []string{MethodCode}})
	var sf *SecondFactorError
	if !errors.Is(required, ErrSecondFactorRequired) || !errors.As(required, &sf) || sf.Token != "the-secret-mfa-token" {
		t.Errorf("errors.Is/As(%v) = false; want the SecondFactorError", required)
	}
	if strings.Contains(required.Error(), "the-secret-mfa-token") {
		t.Errorf("SecondFactorError's text = %q; want no mfa_token in it", required)
	}
}

// recordedMetrics records the second-factor steps counted, as "step err".
type recordedMetrics struct {
	mu    sync.Mutex // guards steps
	steps []string
}

func (m *recordedMetrics) SecondFactorStep(step string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = append(m.steps, fmt.Sprintf("%s %v", step, err))
}
func (m *recordedMetrics) MFALocked()          {}
func (m *recordedMetrics) Rehashed(string)     {}
func (m *recordedMetrics) Revoked(string, int) {}

// TestPasswordCountsSteps: a right password that needs a second factor
// counts a "required" step, a code beside it a "code" step with its
// verdict; a login without a second factor counts none.
func TestPasswordCountsSteps(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		username, code string
		want           string
	}{
		{"alice", "", ""},
		{"bob", "", "required <nil>"},
		{"bob", "aaaa-bbbb-cccc-dddd", "code " + ErrInvalidCredentials.Error()},
		{"bob", "right", "code <nil>"},
	} {
		l := newTestLogins(t, throttle.Config{}, SessionPolicy{})
		m := new(recordedMetrics)
		l.Guard.Metrics = m
		code := tt.code
		if code == "right" {
			code = l.codes[0]
		}
		l.Password(context.Background(), testClient(), tt.username, tt.username+"-pw", code)
		if got := strings.Join(m.steps, ", "); got != tt.want {
			t.Errorf("Password(%s, code %q) counted %q; want %q", tt.username, tt.code, got, tt.want)
		}
	}
}
