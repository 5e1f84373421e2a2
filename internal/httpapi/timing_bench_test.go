package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/password"
	"authsvc/internal/resetmail"
	"authsvc/internal/secret"
	"authsvc/internal/servertest"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// The benchmarks here measure that answers which must not tell one case
// from another (an unknown user from a wrong password, a dead token from
// a live one) take the same time. A median asserted inside go test fails
// on a loaded machine, so these are benchmarks: each reports its spread
// as "max-dev-%", and `make bench` (bench/driver/timing.go) holds it to
// the 10 % target in its table. Run one by hand with, e.g.,
//
//	go test -run '^$' -bench '^BenchmarkLoginFailureTiming$' -benchtime 1x ./internal/httpapi
//
// What no timing can show is asserted in go test all the same: that an
// unknown user's password is checked against a dummy of the policy's cost
// and held to the slowest check's time (internal/users' authenticate
// tests, TestLoginPaddingHoldsNoSlot), and that every kind here answers
// what it must (each benchmark fails on a wrong status).

// median returns the median of ds, sorting it.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// reportDeviation reports, as "max-dev-%", how far the median of each
// kind of took strays from the first kind's, at most, and logs every
// median.
func reportDeviation(b *testing.B, names []string, took [][]time.Duration) {
	ref := median(took[0])
	worst := 0.0
	for i, ds := range took {
		m := median(ds)
		dev := float64(m-ref) / float64(ref)
		worst = max(worst, dev, -dev)
		b.Logf("%-28s median %v", names[i], m)
	}
	b.ReportMetric(100*worst, "max-dev-%")
}

// BenchmarkLoginFailureTiming: on a users file of one scheme, as most
// are, a wrong password, an unknown user, a disabled user, a user whose
// hash is unusable, and the right password with a wrong code fail in the
// same time, through the real login handler and hasher workers (issue 19,
// point 3: unknown users failed in a median of 29 ms, wrong passwords in
// 38 ms). The kinds take turns, so that the machine's changing load
// weighs on them alike. Target: the slowest median within 10 % of the
// fastest ("max-dev-%" is slowest ÷ fastest − 1 here).
func BenchmarkLoginFailureTiming(b *testing.B) {
	key, err := secret.Generate()
	if err != nil {
		b.Fatal(err)
	}
	// argon2id at a fifth of the default memory, for all: a few ms a check.
	policy := password.HashPolicy{Scheme: password.SchemeArgon2id, BcryptCost: servertest.TestCost, ArgonMemoryKiB: 4 << 10, ArgonTime: 2, ArgonThreads: 1}
	var list []users.User
	for _, u := range []users.User{
		{Username: "alice", Groups: []string{}},
		{Username: "carol", Groups: []string{}, Disabled: true},
		{Username: "erin", Groups: []string{}},
		{Username: "frank", Groups: []string{}, MFA: &users.Factors{}},
	} {
		hash, err := policy.Hash([]byte(u.Username + "-pw"))
		if err != nil {
			b.Fatal(err)
		}
		u.PasswordHash = hash
		if u.Username == "erin" {
			u.PasswordHash = "!" + hash // Django's unusable password: never matches
		}
		if u.MFA != nil {
			// A second factor: the right password with a wrong code.
			if err := u.MFA.SetRecoveryCodes(key, []string{"abcde-fghij"}); err != nil {
				b.Fatal(err)
			}
		}
		list = append(list, u)
	}
	handler := newTestEnvConfig(b, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.hashPolicy = policy
		c.throttle = throttle.Config{PairFailures: 1 << 30, UserFailures: 1 << 30, AddrRate: 1e9, AddrBurst: 1 << 30}
		c.users, c.keys, c.realTime = list, secret.NewKeyring(key), true
	}).handler
	login := func(body string) time.Duration {
		req := httptest.NewRequest("POST", "/api/auth/login/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		start := time.Now()
		handler.ServeHTTP(w, req)
		took := time.Since(start)
		if w.Code != http.StatusUnauthorized {
			b.Fatalf("login(%s) = %d %s; want 401", body, w.Code, w.Body)
		}
		return took
	}
	kinds := []struct{ name, body string }{
		{"wrong password", `{"username":"alice","password":"wrong-pw"}`},
		{"unknown user", `{"username":"nobody","password":"alice-pw"}`},
		{"disabled user", `{"username":"carol","password":"carol-pw"}`},
		{"unusable hash", `{"username":"erin","password":"erin-pw"}`},
		{"right password, wrong code", `{"username":"frank","password":"frank-pw","otp":"abcde-aaaaa"}`},
	}
	// Start the hasher's workers, and let the slowest check's time, first
	// measured in this process when the users were loaded, settle to what
	// the workers take.
	for i := range 24 {
		login(kinds[i%len(kinds)].body)
	}
	b.ResetTimer()
	took := make([][]time.Duration, len(kinds))
	for range b.N {
		for j := range 40 { // each kind first in its turn
			for i := range kinds {
				k := (i + j) % len(kinds)
				took[k] = append(took[k], login(kinds[k].body))
			}
		}
	}
	names := make([]string, len(kinds))
	medians := make([]time.Duration, len(kinds))
	for i, k := range kinds {
		names[i], medians[i] = k.name, median(took[i])
		b.Logf("%-28s median %v", k.name, medians[i])
	}
	lo, hi := slices.Min(medians), slices.Max(medians)
	b.ReportMetric(100*(float64(hi)/float64(lo)-1), "max-dev-%")
}

// BenchmarkIntrospectTiming: a live token, an unknown one, a revoked one,
// an expired one and a malformed one are introspected in the same time,
// so that the time tells nothing the answer does not. Target: every
// median within 10 % of a live session's.
func BenchmarkIntrospectTiming(b *testing.B) {
	e := newTestEnvConfig(b, nil, func(c *envConfig) { c.tokenTTL = time.Hour; c.realTime = true })
	bob := e.login("bob")
	caller := e.mintPAT("bob", bob, `"name":"gateway","scopes":["introspect"]`).Token
	live := e.mintPAT("bob", bob, `"name":"live"`).Token
	revoked := e.mintPAT("bob", bob, `"name":"revoked"`)
	if w := e.mfaDo("DELETE", "/api/auth/tokens/"+revoked.ID, bob, ""); w.Code != 204 {
		b.Fatal(w.Code)
	}
	expiring := e.mintPAT("bob", bob, `"name":"expiring","expires_at":"`+time.Now().Add(2*time.Second).UTC().Format(time.RFC3339)+`"`).Token
	time.Sleep(3 * time.Second)
	unknown, _ := tokens.NewPAT()
	kinds := []struct{ name, token string }{
		{"live session", bob}, {"live token", live}, {"unknown token", unknown}, {"revoked token", revoked.Token},
		{"expired token", expiring}, {"malformed", "not-a-token"}, {"unknown session", strings.Repeat("ab", 20)},
	}
	b.ResetTimer()
	took := make([][]time.Duration, len(kinds))
	for range b.N {
		for round := range 40 {
			for i := range kinds {
				k := kinds[(i+round)%len(kinds)]
				start := time.Now()
				w := e.do("POST", "/api/auth/introspect/", "token="+k.token, "Authorization: Bearer "+caller, "Content-Type: application/x-www-form-urlencoded")
				d := time.Since(start)
				if active := strings.Contains(w.Body.String(), `"active":true`); w.Code != 200 || active != strings.HasPrefix(k.name, "live") {
					b.Fatalf("introspect %s = %d %s", k.name, w.Code, w.Body)
				}
				took[(i+round)%len(kinds)] = append(took[(i+round)%len(kinds)], d)
			}
		}
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	reportDeviation(b, names, took)
}

// BenchmarkResetConfirmTiming: a good link and wrong ones are answered in
// the same time: every confirm that gets past the policy hashes the new
// password, and is held to the floor. Target: every median within 10 % of
// a good link's.
func BenchmarkResetConfirmTiming(b *testing.B) {
	e := newTestEnvConfig(b, nil, func(c *envConfig) {
		c.tokenTTL, c.resetFloor = time.Hour, 60*time.Millisecond
		c.throttle.PairFailures, c.throttle.UserFailures = 1000, 1000 // wrong links are the point here
	})
	timeConfirm := func(uid, token string, want int) time.Duration {
		start := time.Now()
		w := e.confirm(uid, token, newPassphrase)
		took := time.Since(start)
		if w.Code != want {
			b.Fatalf("confirm = %d %s; want %d", w.Code, w.Body, want)
		}
		return took
	}
	b.ResetTimer()
	took := make([][]time.Duration, 3)
	for range b.N {
		for round := range 20 {
			uid, token := e.resetLink("alice", time.Hour)
			kinds := []func(){
				func() { took[0] = append(took[0], timeConfirm(uid, token, 204)) },
				func() { took[1] = append(took[1], timeConfirm(uid, strings.Repeat("A", 43), 400)) },
				func() { took[2] = append(took[2], timeConfirm(users.ResetUID("nobody"), token, 400)) },
			}
			for i := range kinds {
				kinds[(i+round)%len(kinds)]()
			}
		}
	}
	reportDeviation(b, []string{"a good link", "a wrong token", "a user that does not exist"}, took)
}

// BenchmarkResetRequestTiming: a request for a user who exists, is
// disabled, has no address, or does not exist is answered in the same
// time, the links being made outside it. Target: every median within
// 10 % of an enabled user's.
func BenchmarkResetRequestTiming(b *testing.B) {
	var mu sync.Mutex
	sent := 0
	e := newMailEnv(b, func(c *envConfig) {
		c.tokenTTL, c.resetFloor = time.Hour, 30*time.Millisecond
		c.throttle.PairFailures, c.throttle.AddrRate, c.throttle.AddrBurst = 1<<30, 1e9, 1<<30
	}, func(resetmail.Message) bool { mu.Lock(); sent++; mu.Unlock(); return true })
	bodies := []string{`{"email":"alice@example.com"}`, `{"username":"carol"}`, `{"username":"bob"}`, `{"email":"nobody@example.com"}`}
	names := []string{"an enabled user", "a disabled user", "a user without an address", "no one"}
	b.ResetTimer()
	took := make([][]time.Duration, len(bodies))
	for range b.N {
		for round := range 20 {
			for i := range bodies {
				k := (i + round) % len(bodies)
				start := time.Now()
				if w := e.do("POST", "/api/auth/password/reset/", bodies[k], jsonCT); w.Code != 204 {
					b.Fatalf("request for %s = %d %s; want 204", names[k], w.Code, w.Body)
				}
				took[k] = append(took[k], time.Since(start))
			}
		}
	}
	reportDeviation(b, names, took)
}
