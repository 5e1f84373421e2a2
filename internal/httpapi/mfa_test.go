package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/mfa"
	"authsvc/internal/mfa/mfatest"
	"authsvc/internal/secret"
	"authsvc/internal/servertest"
	"authsvc/internal/throttle"
	"authsvc/internal/users"
)

// totpCode is oathtool's code of the base32 secret at time at: the codes
// in these tests come from an implementation that shares no code with the
// server's pquerna/otp.
func totpCode(t testing.TB, secret32 string, at time.Time) string {
	t.Helper()
	return mfatest.Code32(t, secret32, at)
}

// reply decodes w's JSON body into a map, failing the test otherwise.
func reply(t testing.TB, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q is not JSON: %v", w.Body, err)
	}
	return body
}

// mfaDo sends a JSON request with token (none when "") through e's handler.
func (e *testEnv) mfaDo(method, path, token, body string) *httptest.ResponseRecorder {
	e.t.Helper()
	header := []string{jsonCT}
	if token != "" {
		header = append(header, "Authorization: Token "+token)
	}
	return e.do(method, path, body, header...)
}

// enrol gives username (password username+"-pw") an active authenticator
// through the API, with token, and returns its base32 secret and the
// recovery codes; the clock moves on a step so that the next code is new.
func (e *testEnv) enrol(username, token string) (string, []string) {
	e.t.Helper()
	w := e.mfaDo("POST", "/api/auth/mfa/totp/", token, `{"password":"`+username+`-pw"}`)
	if w.Code != http.StatusOK {
		e.t.Fatalf("POST /api/auth/mfa/totp/ = %d %s; want 200", w.Code, w.Body)
	}
	secret32, _ := reply(e.t, w)["secret"].(string)
	w = e.mfaDo("POST", "/api/auth/mfa/totp/confirm/", token, `{"code":"`+totpCode(e.t, secret32, e.clock.Now())+`"}`)
	if w.Code != http.StatusOK {
		e.t.Fatalf("POST /api/auth/mfa/totp/confirm/ = %d %s; want 200", w.Code, w.Body)
	}
	var r struct {
		RecoveryCodes []string `json:"recovery_codes"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		e.t.Fatal(err)
	}
	e.clock.Advance(30 * time.Second)
	return secret32, r.RecoveryCodes
}

// mfaToken logs username in with the password alone and returns the
// mfa_token of the mfa_required reply, failing the test otherwise.
func (e *testEnv) mfaToken(username string) string {
	e.t.Helper()
	w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"`+username+`","password":"`+username+`-pw"}`)
	body := reply(e.t, w)
	tok, _ := body["mfa_token"].(string)
	if w.Code != http.StatusUnauthorized || body["code"] != "mfa_required" || tok == "" {
		e.t.Fatalf("login(%s) = %d %s; want 401 mfa_required with an mfa_token", username, w.Code, w.Body)
	}
	return tok
}

// status returns /api/auth/info's status for token.
func (e *testEnv) infoStatus(token string) int {
	e.t.Helper()
	return e.do("GET", "/api/auth/info", "", "Authorization: Token "+token).Code
}

// recoveryFactors returns second factors of n recovery codes alone,
// sealed under key, as an imported django-otp static device leaves them,
// and the codes.
func recoveryFactors(t *testing.T, key secret.Key, n int) (*users.Factors, []string) {
	t.Helper()
	codes, err := mfa.NewRecoveryCodes(n)
	if err != nil {
		t.Fatal(err)
	}
	f := new(users.Factors)
	if err := f.SetRecoveryCodes(key, codes); err != nil {
		t.Fatal(err)
	}
	return f, codes
}

// TestTwoFactorJourney walks API.md's two-factor section through the real
// handler, store and users file: enrolment, confirmation, both kinds of
// login, one-use codes, replacing the codes and removal.
func TestTwoFactorJourney(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT, "User-Agent: journey/1")
	token, _ := reply(t, w)["token"].(string)
	other := e.login("alice")
	check := func(what string, w *httptest.ResponseRecorder, status int, code string) map[string]any {
		t.Helper()
		if w.Code != status {
			t.Fatalf("%s = %d %s; want %d %s", what, w.Code, w.Body, status, code)
		}
		if code == "" {
			if w.Code == http.StatusNoContent {
				return nil
			}
			return reply(t, w)
		}
		body := reply(t, w)
		if body["code"] != code {
			t.Fatalf("%s = %d %s; want code %s", what, w.Code, w.Body, code)
		}
		if status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", what)
		}
		return body
	}

	body := check("GET /api/auth/mfa/ before", e.mfaDo("GET", "/api/auth/mfa/", token, ""), 200, "")
	if body["totp"] != false || body["recovery_codes_left"] != 0.0 {
		t.Errorf("GET /api/auth/mfa/ before = %v; want totp false, 0 codes", body)
	}
	check("confirm with nothing pending", e.mfaDo("POST", "/api/auth/mfa/totp/confirm/", token, `{"code":"123456"}`), 400, "invalid_request")
	check("enrol, wrong password", e.mfaDo("POST", "/api/auth/mfa/totp/", token, `{"password":"nope"}`), 401, "invalid_credentials")
	w = e.mfaDo("POST", "/api/auth/mfa/totp/", token, `{"password":"alice-pw"}`)
	if !strings.Contains(w.Body.String(), "&issuer=authsvc&") {
		t.Errorf("enrol body = %s; want the otpauth:// URL's & as they are, not \\u0026", w.Body)
	}
	body = check("enrol", w, 200, "")
	secret32, _ := body["secret"].(string)
	if !regexp.MustCompile(`^[A-Z2-7]{32}$`).MatchString(secret32) {
		t.Fatalf("enrol secret = %q; want 32 base32 characters (160 bits)", secret32)
	}
	wantURL := "otpauth://totp/authsvc:alice?secret=" + secret32 + "&issuer=authsvc&algorithm=SHA1&digits=6&period=30"
	if body["otpauth_url"] != wantURL {
		t.Errorf("otpauth_url = %v; want %s", body["otpauth_url"], wantURL)
	}
	if w := e.mfaDo("GET", "/api/auth/mfa/", token, ""); reply(t, w)["totp"] != false {
		t.Errorf("GET /api/auth/mfa/ while pending = %s; want totp false: a pending secret does nothing", w.Body)
	}
	e.mfaDo("POST", "/api/auth/logout/", other, "") // alive until confirm; see below
	other = e.login("alice")                        // a pending enrolment is no second factor yet
	check("confirm, wrong code", e.mfaDo("POST", "/api/auth/mfa/totp/confirm/", token, `{"code":"000000"}`), 401, "invalid_credentials")
	now := e.clock.Now()
	confirmCode := totpCode(t, secret32, now)
	body = check("confirm", e.mfaDo("POST", "/api/auth/mfa/totp/confirm/", token, `{"code":"`+confirmCode+`"}`), 200, "")
	raw, _ := body["recovery_codes"].([]any)
	var codes []string
	seen := map[string]bool{}
	for _, c := range raw {
		s, _ := c.(string)
		if !regexp.MustCompile(`^[a-z2-7]{6}-[a-z2-7]{6}-[a-z2-7]{6}-[a-z2-7]{6}$`).MatchString(s) || seen[s] {
			t.Errorf("recovery code %q: want xxxxxx-xxxxxx-xxxxxx-xxxxxx (120 bits), each new", s)
		}
		seen[s] = true
		codes = append(codes, s)
	}
	if len(codes) != 10 {
		t.Fatalf("confirm gave %d recovery codes; want 10", len(codes))
	}
	if got := e.infoStatus(token); got != 200 {
		t.Errorf("/info with the confirming token = %d; want 200 (re-bound, lives on)", got)
	}
	if got := e.infoStatus(other); got != 401 {
		t.Errorf("/info with another token of alice after confirm = %d; want 401", got)
	}
	sessions := e.mfaDo("GET", "/api/auth/sessions/", token, "").Body.String()
	if !strings.Contains(sessions, `"user_agent":"journey/1"`) || !strings.Contains(sessions, `"client":"192.0.2.1"`) || strings.Count(sessions, `"id"`) != 1 {
		t.Errorf("sessions after confirm = %s; want the presenting one alone, its client and user agent kept", sessions)
	}
	file, err := os.ReadFile(e.usersPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append([]string{secret32, strings.ToLower(secret32)}, codes...) {
		if strings.Contains(string(file), s) || strings.Contains(string(file), strings.ReplaceAll(s, "-", "")) {
			t.Errorf("users file holds %q in clear", s)
		}
	}
	body = check("GET /api/auth/mfa/ after", e.mfaDo("GET", "/api/auth/mfa/", token, ""), 200, "")
	if body["totp"] != true || body["recovery_codes_left"] != 10.0 {
		t.Errorf("GET /api/auth/mfa/ after = %v; want totp true, 10 codes", body)
	}
	check("enrol again", e.mfaDo("POST", "/api/auth/mfa/totp/", token, `{"password":"alice-pw"}`), 409, "mfa_enrolled")

	// Login: the password alone is not enough; a wrong one is as always.
	body = check("login, wrong password", e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"nope"}`), 401, "invalid_credentials")
	if _, ok := body["mfa_token"]; ok {
		t.Errorf("wrong password got an mfa_token: %v", body)
	}
	mfaTok := e.mfaToken("alice")
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(mfaTok) {
		t.Errorf("mfa_token = %q; want 40 hex characters", mfaTok)
	}
	check("second step, the confirming code again", e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+confirmCode+`"}`), 401, "invalid_credentials")
	e.clock.Advance(30 * time.Second)
	code := totpCode(t, secret32, e.clock.Now())
	body = check("second step", e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+code+`"}`), 200, "")
	if tok, _ := body["token"].(string); e.infoStatus(tok) != 200 {
		t.Errorf("/info with the second step's token = %d; want 200", e.infoStatus(tok))
	}
	check("second step, spent mfa_token", e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+code+`"}`), 401, "invalid_token")
	check("second step, the same code with a new mfa_token", e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+e.mfaToken("alice")+`","code":"`+code+`"}`), 401, "invalid_credentials")

	// One step: otp beside the password.
	check("one step, a used code", e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+code+`"}`), 401, "invalid_credentials")
	check("one step, wrong password, right code", e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"nope","otp":"`+totpCode(t, secret32, e.clock.Now().Add(30*time.Second))+`"}`), 401, "invalid_credentials")
	e.clock.Advance(30 * time.Second)
	check("one step", e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+totpCode(t, secret32, e.clock.Now())+`"}`), 200, "")
	check("one step for a user without a second factor ignores otp", e.mfaDo("POST", "/api/auth/login/", "", `{"username":"bob","password":"bob-pw","otp":"000000"}`), 200, "")

	// A recovery code, once, in any of its typed forms.
	check("second step, a recovery code", e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+e.mfaToken("alice")+`","code":"`+strings.ToUpper(codes[0])+`"}`), 200, "")
	check("second step, the recovery code again", e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+e.mfaToken("alice")+`","code":"`+codes[0]+`"}`), 401, "invalid_credentials")
	if body := reply(t, e.mfaDo("GET", "/api/auth/mfa/", token, "")); body["recovery_codes_left"] != 9.0 {
		t.Errorf("GET /api/auth/mfa/ after one recovery code = %v; want 9 left", body)
	}

	// Replace the codes: password and a code.
	check("replace codes, wrong password", e.mfaDo("POST", "/api/auth/mfa/recovery-codes/", token, `{"password":"nope","code":"`+codes[1]+`"}`), 401, "invalid_credentials")
	check("replace codes, wrong code", e.mfaDo("POST", "/api/auth/mfa/recovery-codes/", token, `{"password":"alice-pw","code":"aaaaaa-aaaaaa-aaaaaa-aaaaaa"}`), 401, "invalid_credentials")
	body = check("replace codes", e.mfaDo("POST", "/api/auth/mfa/recovery-codes/", token, `{"password":"alice-pw","code":"`+codes[1]+`"}`), 200, "")
	if fresh, _ := body["recovery_codes"].([]any); len(fresh) != 10 {
		t.Errorf("replace gave %v; want 10 codes", body)
	}
	check("an old recovery code after the replacement", e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+e.mfaToken("alice")+`","code":"`+codes[2]+`"}`), 401, "invalid_credentials")

	// Removal: password and a code; every other token dies.
	other = e.login("bob") // another user's token is not touched
	aliceOther := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+codes[3]+`"}`)
	if aliceOther.Code == 200 {
		t.Errorf("an old recovery code logged in after the replacement")
	}
	e.clock.Advance(30 * time.Second)
	check("remove, wrong code", e.mfaDo("DELETE", "/api/auth/mfa/totp/", token, `{"password":"alice-pw","code":"000000"}`), 401, "invalid_credentials")
	e.clock.Advance(30 * time.Second)
	w = e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
	aliceToken, _ := reply(t, w)["token"].(string)
	e.clock.Advance(30 * time.Second)
	check("remove", e.mfaDo("DELETE", "/api/auth/mfa/totp/", token, `{"password":"alice-pw","code":"`+totpCode(t, secret32, e.clock.Now())+`"}`), 204, "")
	if got := e.infoStatus(aliceToken); got != 401 {
		t.Errorf("/info with another token of alice after removal = %d; want 401", got)
	}
	if got := e.infoStatus(token); got != 200 {
		t.Errorf("/info with the removing token = %d; want 200", got)
	}
	if got := e.infoStatus(other); got != 200 {
		t.Errorf("/info with bob's token after alice's removal = %d; want 200", got)
	}
	check("login after removal", e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw"}`), 200, "")
	check("remove again", e.mfaDo("DELETE", "/api/auth/mfa/totp/", token, `{"password":"alice-pw","code":"123456"}`), 400, "invalid_request")
}

// TestMFATokenAttempts: 30 codes sent at once for one mfa_token are
// checked at most 5 times; the rest are refused unchecked.
func TestMFATokenAttempts(t *testing.T) {
	t.Parallel()
	e := newTestEnvConfig(t, nil, func(c *envConfig) { c.throttle.PairFailures, c.throttle.UserFailures = 100, 100 })
	e.enrol("alice", e.login("alice"))
	mfaTok := e.mfaToken("alice")
	var wg sync.WaitGroup
	codes := make(chan string, 30)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+strconv.Itoa(100000+i)+`"}`)
			codes <- strconv.Itoa(w.Code) + " " + reply(t, w)["code"].(string)
		}()
	}
	wg.Wait()
	close(codes)
	counts := map[string]int{}
	for c := range codes {
		counts[c]++
	}
	if counts["401 invalid_credentials"] > 5 || counts["401 invalid_token"] < 25 || counts["401 invalid_credentials"]+counts["401 invalid_token"] != 30 {
		t.Errorf("30 parallel codes for one mfa_token = %v; want at most 5 checked (invalid_credentials), the rest invalid_token", counts)
	}
}

// TestMFATokenEnds: an mfa_token dies with its 5 minutes, and with the
// user's password change and logoutall, on this instance.
func TestMFATokenEnds(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	secret32, _ := e.enrol("alice", e.login("alice"))
	second := func(what, tok string, want int) {
		t.Helper()
		e.clock.Advance(30 * time.Second)
		w := e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+tok+`","code":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
		if w.Code != want {
			t.Errorf("%s: second step = %d %s; want %d", what, w.Code, w.Body, want)
		}
	}
	tok := e.mfaToken("alice")
	e.clock.Advance(5 * time.Minute)
	second("after 5 minutes", tok, 401)

	tok = e.mfaToken("alice")
	e.clock.Advance(30 * time.Second)
	w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
	session, _ := reply(t, w)["token"].(string)
	e.mfaDo("POST", "/api/auth/logoutall/", session, "")
	second("after logoutall", tok, 401)

	tok = e.mfaToken("alice")
	e.clock.Advance(30 * time.Second)
	w = e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
	session, _ = reply(t, w)["token"].(string)
	if w := e.mfaDo("POST", "/api/auth/password/", session, `{"current_password":"alice-pw","new_password":"a much longer secret 42"}`); w.Code != 200 {
		t.Fatalf("password change = %d %s", w.Code, w.Body)
	}
	second("after a password change", tok, 401)

	// user disable (the CLI's change: disabled, a cut-off), then enable:
	// the mfa_token stays dead; user del kills the next one.
	newPW := "a much longer secret 42"
	pwToken := func() string {
		t.Helper()
		w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"`+newPW+`"}`)
		tok, _ := reply(t, w)["mfa_token"].(string)
		if tok == "" {
			t.Fatalf("login = %d %s; want mfa_required", w.Code, w.Body)
		}
		return tok
	}
	tok = pwToken()
	change := func(f func(u *users.User)) {
		t.Helper()
		if err := e.users.Update(context.Background(), "alice", func(u *users.User) error { f(u); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Millisecond)
	change(func(u *users.User) { u.Disabled, u.TokensAfter = true, e.clock.Now() })
	second("after user disable", tok, 401)
	change(func(u *users.User) { u.Disabled = false })
	second("after user disable and enable", tok, 401)
	tok = pwToken()
	if err := e.users.Delete(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	second("after user del", tok, 401)
}

// TestMFACodesThrottled: wrong codes count as failed logins, per pair:
// after the limit the right code is refused too (429).
func TestMFACodesThrottled(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	secret32, _ := e.enrol("alice", e.login("alice"))
	for i := range 5 {
		w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"00000`+strconv.Itoa(i)+`"}`)
		if w.Code != 401 {
			t.Fatalf("wrong code %d = %d %s; want 401", i, w.Code, w.Body)
		}
	}
	w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("the right code after 5 wrong ones = %d %s; want 429", w.Code, w.Body)
	}
	w = e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw"}`)
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("the password alone after 5 wrong codes = %d %s; want 429", w.Code, w.Body)
	}
}

// TestMFARequestErrors: the second-factor endpoints' refusals, in the
// order API.md gives, read like its Errors table.
func TestMFARequestErrors(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	token := e.login("alice")
	big := `{"password":"` + strings.Repeat("x", 17<<10) + `"}`
	for _, tt := range []struct {
		method, path, token, body, ct string
		status                        int
		code                          string
	}{
		{"POST", "/api/auth/mfa/totp/", "", `{"password":"alice-pw"}`, jsonCT, 401, "not_authenticated"},
		{"POST", "/api/auth/mfa/totp/", "0000000000000000000000000000000000000000", `{"password":"alice-pw"}`, jsonCT, 401, "invalid_token"},
		{"POST", "/api/auth/mfa/totp/", token, `{"password":"alice-pw"}`, "Content-Type: text/plain", 415, "unsupported_media_type"},
		{"POST", "/api/auth/mfa/totp/", token, big, jsonCT, 413, "request_too_large"},
		{"POST", "/api/auth/mfa/totp/", token, `{}`, jsonCT, 400, "invalid_request"},
		{"POST", "/api/auth/mfa/totp/", token, `{"password":7}`, jsonCT, 400, "invalid_request"},
		{"POST", "/api/auth/mfa/totp/confirm/", token, `{"code":""}`, jsonCT, 400, "invalid_request"},
		{"DELETE", "/api/auth/mfa/totp/", token, `{"password":"alice-pw"}`, jsonCT, 400, "invalid_request"},
		{"POST", "/api/auth/mfa/recovery-codes/", token, `{"code":"123456"}`, jsonCT, 400, "invalid_request"},
		{"GET", "/api/auth/mfa/", "", "", jsonCT, 401, "not_authenticated"},
		{"PUT", "/api/auth/mfa/totp/", token, "", jsonCT, 405, "method_not_allowed"},
		{"POST", "/api/auth/login/mfa/", "", `{"mfa_token":"x","code":"123456"}`, jsonCT, 401, "invalid_token"},
		{"POST", "/api/auth/login/mfa/", "", `{"mfa_token":"` + strings.Repeat("ab", 20) + `","code":"123456"}`, jsonCT, 401, "invalid_token"},
		{"POST", "/api/auth/login/mfa/", "", `{"mfa_token":"` + strings.Repeat("ab", 20) + `"}`, jsonCT, 400, "invalid_request"},
		{"POST", "/api/auth/login/mfa/", "", `{"mfa_token":"` + strings.Repeat("ab", 20) + `","code":"1"}`, "", 415, "unsupported_media_type"},
		{"POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"` + strings.Repeat("1", 65) + `"}`, jsonCT, 400, "invalid_request"},
	} {
		header := []string{}
		if tt.ct != "" {
			header = append(header, tt.ct)
		}
		if tt.token != "" {
			header = append(header, "Authorization: Token "+tt.token)
		}
		w := e.do(tt.method, tt.path, tt.body, header...)
		if w.Code != tt.status || errorCode(t, w) != tt.code {
			t.Errorf("%s %s %.40s = %d %s; want %d %s", tt.method, tt.path, tt.body, w.Code, w.Body, tt.status, tt.code)
		}
	}
	if w := e.do("PUT", "/api/auth/mfa/totp/", "", "Authorization: Token "+token); w.Header().Get("Allow") != "DELETE, POST" {
		t.Errorf("PUT /api/auth/mfa/totp/ Allow = %q; want \"DELETE, POST\"", w.Header().Get("Allow"))
	}
}

// TestEnrolWithoutKey: with no secret key (PostgreSQL and no
// --secret-key-file), enrolment answers 503 and stores nothing.
func TestEnrolWithoutKey(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	d := e.deps
	d.MFA.Keys = secret.Keyring{}
	h := httpapi.NewServer(d)
	req := httptest.NewRequest("POST", "/api/auth/mfa/totp/", strings.NewReader(`{"password":"alice-pw"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Token "+e.login("alice"))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusServiceUnavailable || errorCode(t, w) != "unavailable" {
		t.Errorf("enrol without a key = %d %s; want 503 unavailable", w.Code, w.Body)
	}
	file, _ := os.ReadFile(e.usersPath)
	if strings.Contains(string(file), "mfa") {
		t.Errorf("users file after a refused enrolment holds mfa: %s", file)
	}
}

// TestMFAAuditAndMetrics: every request to a second-factor endpoint, and
// every login of a user with one, has one audit line naming its outcome,
// refusals before any check included; authsvc_mfa_total counts the steps;
// and no line holds a secret, a code or an mfa_token.
func TestMFAAuditAndMetrics(t *testing.T) {
	t.Parallel()
	logged := new(servertest.SyncBuffer)
	e := newTestEnvConfig(t, slog.New(slog.NewTextHandler(logged, nil)), nil)
	token := e.login("alice")
	lines := func() int { return strings.Count(logged.String(), "username=") }
	before := lines()
	type step struct {
		method, path, body string
		line               string // the audit line's message and outcome
	}
	secret32 := ""
	var steps []step
	run := func(s step) *httptest.ResponseRecorder {
		t.Helper()
		n := lines()
		w := e.mfaDo(s.method, s.path, token, s.body)
		if got := lines() - n; got != 1 {
			t.Errorf("%s %s %s: %d audit lines; want 1", s.method, s.path, s.body, got)
		}
		if !strings.Contains(logged.String(), s.line) {
			t.Errorf("%s %s %s: no audit line %q in\n%s", s.method, s.path, s.body, s.line, logged)
		}
		steps = append(steps, s)
		return w
	}
	run(step{"GET", "/api/auth/mfa/", "", `msg="mfa status" outcome=success username=alice`})
	run(step{"POST", "/api/auth/mfa/totp/", `{}`, `msg="mfa enrol" outcome=invalid_request username=alice`})
	run(step{"POST", "/api/auth/mfa/totp/", `{"password":"x"}`, `msg="mfa enrol" outcome=invalid_credentials username=alice`})
	w := run(step{"POST", "/api/auth/mfa/totp/", `{"password":"alice-pw"}`, `msg="mfa enrol" outcome=success username=alice`})
	secret32, _ = reply(t, w)["secret"].(string)
	run(step{"POST", "/api/auth/mfa/totp/confirm/", `{"code":"000000"}`, `msg="mfa confirm" outcome=invalid_credentials username=alice`})
	code := totpCode(t, secret32, e.clock.Now())
	w = run(step{"POST", "/api/auth/mfa/totp/confirm/", `{"code":"` + code + `"}`, `msg="mfa confirm" outcome=success username=alice`})
	var recovery struct {
		RecoveryCodes []string `json:"recovery_codes"`
	}
	json.Unmarshal(w.Body.Bytes(), &recovery)
	run(step{"POST", "/api/auth/mfa/totp/", `{"password":"alice-pw"}`, `msg="mfa enrol" outcome=mfa_enrolled username=alice`})
	run(step{"POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, `msg=login outcome=mfa_required username=alice`})
	run(step{"POST", "/api/auth/login/mfa/", `{"mfa_token":"` + strings.Repeat("0", 40) + `","code":"1"}`, `msg="login mfa" outcome=invalid_token username=(unknown)`})
	mfaTok := e.mfaToken("alice")
	run(step{"POST", "/api/auth/login/mfa/", `{"mfa_token":"` + mfaTok + `","code":"123"}`, `msg="login mfa" outcome=invalid_credentials username=alice`})
	run(step{"POST", "/api/auth/login/mfa/", `{"mfa_token":"` + mfaTok + `","code":"` + recovery.RecoveryCodes[0] + `"}`, `msg="login mfa" outcome=success username=alice`})
	run(step{"POST", "/api/auth/mfa/recovery-codes/", `{"password":"alice-pw","code":"` + recovery.RecoveryCodes[1] + `"}`, `msg="mfa recovery codes" outcome=success username=alice`})
	e.clock.Advance(30 * time.Second)
	run(step{"DELETE", "/api/auth/mfa/totp/", `{"password":"alice-pw","code":"` + totpCode(t, secret32, e.clock.Now()) + `"}`, `msg="mfa remove" outcome=success username=alice`})
	if lines()-before != len(steps)+1 { // +1: mfaToken's login
		t.Errorf("%d audit lines for %d requests", lines()-before, len(steps)+1)
	}
	for _, s := range append([]string{secret32, mfaTok, code}, recovery.RecoveryCodes...) {
		if strings.Contains(logged.String(), s) {
			t.Errorf("the log holds a secret, code or mfa_token (%.6s…)", s)
		}
	}

	m := e.do("GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`authsvc_mfa_total{outcome="success",step="confirm"} 1`,
		`authsvc_mfa_total{outcome="invalid_credentials",step="confirm"} 1`,
		`authsvc_mfa_total{outcome="mfa_enrolled",step="enrol"} 1`,
		`authsvc_mfa_total{outcome="success",step="required"} 2`,
		`authsvc_mfa_total{outcome="invalid_token",step="code"} 1`,
		`authsvc_mfa_total{outcome="invalid_credentials",step="code"} 1`,
		`authsvc_mfa_total{outcome="success",step="code"} 1`,
		`authsvc_mfa_total{outcome="success",step="remove"} 1`,
		`authsvc_mfa_total{outcome="success",step="recovery_codes"} 1`,
		`authsvc_login_total{outcome="mfa_required"} 2`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, s := range []string{secret32, mfaTok} {
		if strings.Contains(m, s) {
			t.Errorf("/metrics holds a secret or mfa_token")
		}
	}
}

// TestEnrolNeedsCode: a user who has a second factor (here recovery codes
// alone, as an imported django-otp static device leaves) must send a code
// of it to enrol an authenticator: the password alone replaces no factor
// (issue 28, point 6). A wrong code is a failure on the throttle like a
// wrong password.
func TestEnrolNeedsCode(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	token := e.login("alice")
	f, codes := recoveryFactors(t, e.keys.Current(), 3)
	if err := e.users.Update(context.Background(), "alice", func(u *users.User) error { u.MFA = f; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"password alone", `{"password":"alice-pw"}`, 400, "invalid_request"},
		{"empty code", `{"password":"alice-pw","code":""}`, 400, "invalid_request"},
		{"code too long", `{"password":"alice-pw","code":"` + strings.Repeat("1", 65) + `"}`, 400, "invalid_request"},
		{"code not a string", `{"password":"alice-pw","code":123456}`, 400, "invalid_request"},
		{"wrong code", `{"password":"alice-pw","code":"aaaaaa-aaaaaa-aaaaaa-aaaaaa"}`, 401, "invalid_credentials"},
		{"wrong password, right code", `{"password":"nope","code":"` + codes[0] + `"}`, 401, "invalid_credentials"},
	} {
		w := e.mfaDo("POST", "/api/auth/mfa/totp/", token, tt.body)
		if w.Code != tt.status || errorCode(t, w) != tt.code {
			t.Errorf("enrol with recovery codes, %s = %d %s; want %d %s", tt.name, w.Code, w.Body, tt.status, tt.code)
		}
	}
	if body := reply(t, e.mfaDo("GET", "/api/auth/mfa/", token, "")); body["recovery_codes_left"] != 3.0 {
		t.Errorf("GET /api/auth/mfa/ after refused enrolments = %v; want 3 codes left", body)
	}
	w := e.mfaDo("POST", "/api/auth/mfa/totp/", token, `{"password":"alice-pw","code":"`+codes[0]+`"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("enrol with the password and a recovery code = %d %s; want 200", w.Code, w.Body)
	}
	secret32, _ := reply(t, w)["secret"].(string)
	if body := reply(t, e.mfaDo("GET", "/api/auth/mfa/", token, "")); body["recovery_codes_left"] != 2.0 {
		t.Errorf("GET /api/auth/mfa/ after enrolling with a recovery code = %v; want 2 left: the code is spent", body)
	}
	w = e.mfaDo("POST", "/api/auth/mfa/totp/confirm/", token, `{"code":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
	if w.Code != http.StatusOK {
		t.Fatalf("confirm = %d %s; want 200", w.Code, w.Body)
	}
	e.clock.Advance(30 * time.Second)
	w = e.mfaDo("POST", "/api/auth/mfa/totp/", token, `{"password":"alice-pw","code":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
	if w.Code != http.StatusConflict || errorCode(t, w) != "mfa_enrolled" {
		t.Errorf("enrol with an active authenticator, password and code = %d %s; want 409 mfa_enrolled", w.Code, w.Body)
	}

	// Wrong codes count as wrong passwords do: after the pair's limit (5
	// failures, two above) the right code is refused too.
	e = newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	token = e.login("alice")
	f, codes = recoveryFactors(t, e.keys.Current(), 3)
	if err := e.users.Update(context.Background(), "alice", func(u *users.User) error { u.MFA = f; return nil }); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		w := e.mfaDo("POST", "/api/auth/mfa/totp/", token, `{"password":"alice-pw","code":"00000`+strconv.Itoa(i)+`"}`)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("enrol, wrong code %d = %d %s; want 401", i, w.Code, w.Body)
		}
	}
	w = e.mfaDo("POST", "/api/auth/mfa/totp/", token, `{"password":"alice-pw","code":"`+codes[1]+`"}`)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("enrol with the right code after 5 wrong ones = %d %s (Retry-After %q); want 429 with Retry-After", w.Code, w.Body, w.Header().Get("Retry-After"))
	}
}

// TestMFATokenSpentOnce: right codes sent at once with one mfa_token to
// one process give one token; the others are 401 invalid_token and their
// recovery codes stay unused (issue 28, point 8).
func TestMFATokenSpentOnce(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour, MaxPerUser: 100})
	token := e.login("alice")
	secret32, codes := e.enrol("alice", token)
	const parallel = 5 // an mfa_token's attempts
	for round := range 2 {
		mfaTok := e.mfaToken("alice")
		start := make(chan struct{})
		results := make(chan string, parallel)
		var wg sync.WaitGroup
		for i := range parallel {
			wg.Go(func() {
				<-start
				w := e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+codes[round*parallel+i]+`"}`)
				body := reply(t, w)
				if tok, _ := body["token"].(string); w.Code == 200 && tok != "" {
					results <- "200"
					return
				}
				results <- strconv.Itoa(w.Code) + " " + fmt.Sprint(body["code"])
			})
		}
		close(start)
		wg.Wait()
		close(results)
		counts := map[string]int{}
		for r := range results {
			counts[r]++
		}
		if counts["200"] != 1 || counts["401 invalid_token"] != parallel-1 {
			t.Errorf("round %d: %d right recovery codes at once with one mfa_token = %v; want one 200, %d 401 invalid_token", round, parallel, counts, parallel-1)
		}
	}
	if body := reply(t, e.mfaDo("GET", "/api/auth/mfa/", token, "")); body["recovery_codes_left"] != 8.0 {
		t.Errorf("GET /api/auth/mfa/ after two rounds = %v; want 8 recovery codes left: only the winners' are spent", body)
	}
	// The last attempt's right code still spends the mfa_token.
	mfaTok := e.mfaToken("alice")
	for i := range parallel - 1 {
		if w := e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"00000`+strconv.Itoa(i)+`"}`); w.Code != 401 {
			t.Fatalf("wrong code %d = %d %s; want 401", i, w.Code, w.Body)
		}
	}
	if w := e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaTok+`","code":"`+totpCode(t, secret32, e.clock.Now())+`"}`); w.Code != 200 {
		t.Errorf("the right code as the mfa_token's last attempt = %d %s; want 200", w.Code, w.Body)
	}
}

// TestMFACodeLock: wrong codes at login (second step and one-step otp)
// are counted per user until the user's next successful second step;
// after 100 (whatever the other limits say), every second step answers
// 429, with earlier mfa_tokens and the right code alike, for good, until
// user unlock (issue 28, point 7). One process, memory throttle.
func TestMFACodeLock(t *testing.T) {
	t.Parallel()
	logged := new(servertest.SyncBuffer)
	e := newTestEnvConfig(t, slog.New(slog.NewTextHandler(logged, nil)), func(c *envConfig) {
		c.tokenTTL = time.Hour
		// The per-pair and per-user windows out of the way: the lock
		// alone must refuse.
		c.throttle.PairFailures, c.throttle.UserFailures = 1000, 1000
	})
	secret32, _ := e.enrol("alice", e.login("alice"))
	const wrong = "aaaaaa-aaaaaa-aaaaaa-aaaaaa" // never a TOTP code, nor (but for 2^-120) a recovery code
	// wrongCodes sends n wrong codes, four in five as second steps (five
	// to an mfa_token), the rest as one-step otp.
	wrongCodes := func(n int) {
		t.Helper()
		tok := ""
		for i := range n {
			var w *httptest.ResponseRecorder
			if i%5 == 4 {
				w = e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+wrong+`"}`)
			} else {
				if i%5 == 0 {
					tok = e.mfaToken("alice")
				}
				w = e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+tok+`","code":"`+wrong+`"}`)
			}
			if w.Code != http.StatusUnauthorized || errorCode(t, w) != "invalid_credentials" {
				t.Fatalf("wrong code %d of %d = %d %s; want 401 invalid_credentials", i+1, n, w.Code, w.Body)
			}
		}
	}
	secondStep := func(tok string) *httptest.ResponseRecorder {
		t.Helper()
		e.clock.Advance(30 * time.Second) // a new TOTP counter
		return e.mfaDo("POST", "/api/auth/login/mfa/", "", `{"mfa_token":"`+tok+`","code":"`+totpCode(t, secret32, e.clock.Now())+`"}`)
	}

	// A success starts the count again: 99 + 99 wrong codes lock nothing.
	for round := range 2 {
		wrongCodes(throttle.MaxCodeFailures - 1)
		if w := secondStep(e.mfaToken("alice")); w.Code != http.StatusOK {
			t.Fatalf("round %d: the right code after %d wrong ones = %d %s; want 200", round, throttle.MaxCodeFailures-1, w.Code, w.Body)
		}
	}

	early := e.mfaToken("alice")
	wrongCodes(throttle.MaxCodeFailures)
	locked := func(what string, w *httptest.ResponseRecorder) {
		t.Helper()
		if w.Code != http.StatusTooManyRequests || errorCode(t, w) != "throttled" || w.Header().Get("Retry-After") == "" {
			t.Errorf("%s after %d wrong codes = %d %s (Retry-After %q); want 429 throttled with Retry-After", what, throttle.MaxCodeFailures, w.Code, w.Body, w.Header().Get("Retry-After"))
		}
	}
	locked("the right code with a new mfa_token", secondStep(e.mfaToken("alice")))
	locked("the right code with an mfa_token from before", secondStep(early))
	e.clock.Advance(30 * time.Second)
	locked("one-step login with the right code", e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-pw","otp":"`+totpCode(t, secret32, e.clock.Now())+`"}`))
	e.clock.Advance(24 * time.Hour)
	locked("the right code a day later", secondStep(e.mfaToken("alice")))
	if w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"bob","password":"bob-pw"}`); w.Code != http.StatusOK {
		t.Errorf("bob's login while alice is locked = %d %s; want 200", w.Code, w.Body)
	}
	if !regexp.MustCompile(`msg="login mfa" outcome=throttled username=alice .* limit=code note=.*authsvc user unlock`).MatchString(logged.String()) {
		t.Errorf("no audit line of a locked second step naming limit=code and authsvc user unlock in\n%s", logged)
	}
	if m := e.do("GET", "/metrics", "").Body.String(); !strings.Contains(m, "authsvc_mfa_lockouts_total 1\n") {
		t.Errorf("/metrics lacks authsvc_mfa_lockouts_total 1")
	}

	// A reset confirm lifts the password lockouts (failures_after) alone:
	// the code lock holds (API.md, Password reset).
	if err := e.users.Update(context.Background(), "alice", func(u *users.User) error { u.FailuresAfter = e.clock.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Millisecond)
	locked("the right code after the password lockouts were lifted", secondStep(e.mfaToken("alice")))

	// user unlock (the directory's codes_after) lifts it.
	tok := e.mfaToken("alice")
	if err := users.Unlock(context.Background(), e.users, "alice"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Millisecond)
	if w := secondStep(tok); w.Code != http.StatusOK {
		t.Errorf("the right code after user unlock = %d %s; want 200", w.Code, w.Body)
	}
}
