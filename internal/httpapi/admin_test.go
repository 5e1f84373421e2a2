package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"authsvc/internal/servertest"
	"authsvc/internal/throttle"
	"authsvc/internal/users"
)

// adminItem is one user as the admin API shows them.
type adminItem struct {
	Username             string   `json:"username"`
	Name                 string   `json:"name"`
	Email                string   `json:"email"`
	Groups               []string `json:"groups"`
	Admin                bool     `json:"admin"`
	Disabled             bool     `json:"disabled"`
	MFA                  bool     `json:"mfa"`
	Locked               bool     `json:"locked"`
	Tokens               int      `json:"tokens"`
	MFAEnrollmentPending bool     `json:"mfa_enrollment_pending"`
}

// adminPage is the reply of GET /api/admin/users/.
type adminPage struct {
	Users []adminItem `json:"users"`
	Next  *string     `json:"next"`
}

// adminEnv is a test env with an admin session (bob's) and alice's.
func adminEnv(t *testing.T, log *slog.Logger) (e *testEnv, bob, alice string) {
	t.Helper()
	e = newTestEnvConfig(t, log, func(c *envConfig) {
		c.tokenTTL, c.passwordMinLength = time.Hour, 8
		c.throttle.UserFailures = 3 // locked after 3 wrong passwords
	})
	return e, e.login("bob"), e.login("alice")
}

// decodeJSON decodes w's body into v, failing the test unless it is JSON.
func decodeJSON(t *testing.T, w interface{ Bytes() []byte }, v any) {
	t.Helper()
	if err := json.Unmarshal(w.Bytes(), v); err != nil {
		t.Fatalf("body %q: %v", w.Bytes(), err)
	}
}

// TestAdminAuthorization: an admin's session or a personal access token
// with the admin scope; nobody else, each with API.md's answer.
func TestAdminAuthorization(t *testing.T) {
	t.Parallel()
	e, bob, alice := adminEnv(t, nil)
	adminPAT := e.mintPAT("bob", bob, `"name":"ops","scopes":["admin"]`)
	infoPAT := e.mintPAT("bob", bob, `"name":"ci","scopes":["info"]`)
	for _, tc := range []struct {
		name, token string
		status      int
		code        string
	}{
		{"no token", "", http.StatusUnauthorized, "not_authenticated"},
		{"unknown token", strings.Repeat("ab", 20), http.StatusUnauthorized, "invalid_token"},
		{"a user who is not an admin", alice, http.StatusForbidden, "permission_denied"},
		{"a token without the admin scope", infoPAT.Token, http.StatusForbidden, "insufficient_scope"},
		{"an admin's session", bob, http.StatusOK, ""},
		{"a token with the admin scope", adminPAT.Token, http.StatusOK, ""},
	} {
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/api/admin/users/", ""},
			{"GET", "/api/admin/users/alice", ""},
			{"POST", "/api/admin/users/alice/unlock", ""},
		} {
			w := e.mfaDo(r.method, r.path, tc.token, r.body)
			want := tc.status
			if want == http.StatusOK && r.method == "POST" {
				want = http.StatusNoContent
			}
			if w.Code != want || tc.code != "" && errorCode(t, w) != tc.code {
				t.Errorf("%s: %s %s = %d %s; want %d %s", tc.name, r.method, r.path, w.Code, w.Body, want, tc.code)
			}
		}
	}
	// A token with the admin scope of a user demoted since then is refused.
	e.mfaDo("PATCH", "/api/admin/users/bob", adminPAT.Token, `{"name":"Bob"}`)
	if _, err := users.Edit(context.Background(), e.users, "bob", users.Change{Admin: new(bool)}); err != nil {
		t.Fatal(err)
	}
	if w := e.mfaDo("GET", "/api/admin/users/", bob, ""); w.Code != http.StatusForbidden || errorCode(t, w) != "permission_denied" {
		t.Errorf("GET /api/admin/users/ by a demoted admin's session = %d %s; want 403 permission_denied", w.Code, w.Body)
	}
	if w := e.mfaDo("GET", "/api/admin/users/", adminPAT.Token, ""); w.Code != http.StatusUnauthorized {
		t.Errorf("GET /api/admin/users/ with a demoted admin's admin token = %d %s; want 401: demotion ends it", w.Code, w.Body)
	}
}

// TestAdminList: keyset pagination in byte order, the filters, and 400
// for every query API.md refuses.
func TestAdminList(t *testing.T) {
	t.Parallel()
	e, bob, _ := adminEnv(t, nil)
	for _, name := range []string{"Zed", "ärger", "dave", "dan"} {
		if _, err := users.Create(context.Background(), e.users, users.NewUser{Username: name, Groups: []string{"ops"}}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(query string) adminPage {
		t.Helper()
		w := e.mfaDo("GET", "/api/admin/users/"+query, bob, "")
		if w.Code != http.StatusOK {
			t.Fatalf("GET /api/admin/users/%s = %d %s; want 200", query, w.Code, w.Body)
		}
		var p adminPage
		decodeJSON(t, w.Body, &p)
		return p
	}
	names := func(p adminPage) string {
		var out []string
		for _, u := range p.Users {
			out = append(out, u.Username)
		}
		return strings.Join(out, " ")
	}
	var all []string
	for q := "?limit=2"; ; {
		p := list(q)
		all = append(all, names(p))
		if p.Next == nil {
			break
		}
		q = "?limit=2&after=" + url.QueryEscape(*p.Next)
	}
	if got, want := strings.Join(all, " | "), "Zed alice | bob carol | dan dave | ärger"; got != want {
		t.Errorf("pages of 2 = %q; want %q (byte order, next null on the last)", got, want)
	}
	for _, tc := range []struct{ query, want string }{
		{"", "Zed alice bob carol dan dave ärger"},
		{"?prefix=da", "dan dave"},
		{"?group=ops", "Zed dan dave ärger"},
		{"?admin=true", "bob"},
		{"?disabled=true", "carol"},
		{"?admin=false&disabled=false&group=dev", "alice"},
		{"?mfa=true", ""},
		{"?after=carol&limit=1", "dan"},
		{"?after=b", "bob carol dan dave ärger"},
	} {
		if got := names(list(tc.query)); got != tc.want {
			t.Errorf("GET /api/admin/users/%s = %q; want %q", tc.query, got, tc.want)
		}
	}
	if p := list("?limit=7"); p.Next != nil {
		t.Errorf("a full last page: next = %q; want null", *p.Next)
	}
	alice := list("?prefix=alice").Users[0]
	if alice.Name != "Alice" || alice.Email != "alice@example.com" || strings.Join(alice.Groups, ",") != "dev" || alice.Admin || alice.Disabled || alice.MFA || alice.Locked || alice.Tokens != 0 {
		t.Errorf("alice's item = %+v", alice)
	}
	for _, query := range []string{"?limit=0", "?limit=501", "?limit=x", "?limit=1&limit=2", "?admin=yes", "?mfa=", "?group=", "?sort=name", "?username=alice", "?%zz"} {
		w := e.mfaDo("GET", "/api/admin/users/"+query, bob, "")
		if w.Code != http.StatusBadRequest || errorCode(t, w) != "invalid_request" {
			t.Errorf("GET /api/admin/users/%s = %d %s; want 400 invalid_request", query, w.Code, w.Body)
		}
	}
}

// TestAdminCreate: a user made over HTTP is the user user add makes, and
// every refusal loses nothing.
func TestAdminCreate(t *testing.T) {
	t.Parallel()
	e, bob, _ := adminEnv(t, nil)
	w := e.mfaDo("POST", "/api/admin/users/", bob, `{"username":"Ｄｏｒａ","password":"dora-s-long-pw","name":"Dora","email":"dora@example.com","groups":["ops"]}`)
	if w.Code != http.StatusCreated || w.Header().Get("Location") != "/api/admin/users/Dora" {
		t.Fatalf("create = %d %s (Location %q); want 201 at /api/admin/users/Dora", w.Code, w.Body, w.Header().Get("Location"))
	}
	var dora adminItem
	decodeJSON(t, w.Body, &dora)
	if dora.Username != "Dora" || dora.Name != "Dora" || strings.Join(dora.Groups, ",") != "ops" || dora.Admin {
		t.Errorf("created = %+v; want Dora (NFKC), in ops", dora)
	}
	if w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"Dora","password":"dora-s-long-pw"}`); w.Code != http.StatusOK {
		t.Errorf("login of the new user = %d %s; want 200", w.Code, w.Body)
	}
	w = e.mfaDo("POST", "/api/admin/users/", bob, `{"username":"eve"}`)
	if w.Code != http.StatusCreated {
		t.Fatalf("create without a password = %d %s; want 201", w.Code, w.Body)
	}
	u, err := e.users.Lookup(context.Background(), "eve")
	if err != nil || u.Hash().Usable() {
		t.Errorf("eve, created without a password: %v, usable hash %v; want a hash no password matches", err, err == nil && u.Hash().Usable())
	}
	for _, tc := range []struct {
		body, ct string
		status   int
		code     string
	}{
		{`{"username":"alice","password":"a-long-password"}`, jsonCT, http.StatusConflict, "conflict"},
		{`{"username":"fred","password":"short"}`, jsonCT, http.StatusBadRequest, "weak_password"},
		{`{"username":"fred","password":"fred-is-long-pw","disabled":true}`, jsonCT, http.StatusBadRequest, "invalid_request"},
		{`{"username":"fred!"}`, jsonCT, http.StatusBadRequest, "invalid_request"},
		{`{"username":"` + strings.Repeat("f", 151) + `"}`, jsonCT, http.StatusBadRequest, "invalid_request"},
		{`{"username":"fred","name":"a\u0007b"}`, jsonCT, http.StatusBadRequest, "invalid_request"},
		{`{"username":"fred","groups":"ops"}`, jsonCT, http.StatusBadRequest, "invalid_request"},
		{`{"username":"fred","admin":null}`, jsonCT, http.StatusBadRequest, "invalid_request"},
		{`{"name":"Fred"}`, jsonCT, http.StatusBadRequest, "invalid_request"},
		{`{"username":"fred"} x`, jsonCT, http.StatusBadRequest, "invalid_request"},
		{`{"username":"fred"}`, "Content-Type: text/plain", http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{`{"username":"fred","name":"` + strings.Repeat("x", 17<<10) + `"}`, jsonCT, http.StatusRequestEntityTooLarge, "request_too_large"},
	} {
		w := e.do("POST", "/api/admin/users/", tc.body, tc.ct, "Authorization: Token "+bob)
		if w.Code != tc.status || errorCode(t, w) != tc.code {
			t.Errorf("create %.60s = %d %s; want %d %s", tc.body, w.Code, w.Body, tc.status, tc.code)
		}
	}
	if _, err := e.users.Lookup(context.Background(), "fred"); err == nil {
		t.Error("a refused create made fred")
	}
}

// TestAdminEdit: PATCH changes what it names and nothing else; an admin
// cannot disable or demote themselves; disabling ends the user's tokens.
func TestAdminEdit(t *testing.T) {
	t.Parallel()
	e, bob, alice := adminEnv(t, nil)
	w := e.mfaDo("PATCH", "/api/admin/users/alice", bob, `{"name":"Alice Liddell","groups":["dev","ops"]}`)
	var got adminItem
	decodeJSON(t, w.Body, &got)
	if w.Code != http.StatusOK || got.Name != "Alice Liddell" || strings.Join(got.Groups, ",") != "dev,ops" || got.Email != "alice@example.com" {
		t.Fatalf("PATCH name, groups = %d %s; want 200 with both changed, email kept", w.Code, w.Body)
	}
	if e.infoStatus(alice) != http.StatusOK {
		t.Error("a profile change ended alice's session")
	}
	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/api/admin/users/alice", `{"password":"x"}`, http.StatusBadRequest, "invalid_request"},
		{"/api/admin/users/alice", `{"username":"alicia"}`, http.StatusBadRequest, "invalid_request"},
		{"/api/admin/users/alice", `{"admin":"yes"}`, http.StatusBadRequest, "invalid_request"},
		{"/api/admin/users/alice", `{"email":"` + strings.Repeat("e", 255) + `"}`, http.StatusBadRequest, "invalid_request"},
		{"/api/admin/users/nobody", `{"name":"x"}`, http.StatusNotFound, "not_found"},
		{"/api/admin/users/bob", `{"disabled":true}`, http.StatusConflict, "conflict"},
		{"/api/admin/users/bob", `{"admin":false}`, http.StatusConflict, "conflict"},
	} {
		w := e.mfaDo("PATCH", tc.path, bob, tc.body)
		if w.Code != tc.status || errorCode(t, w) != tc.code {
			t.Errorf("PATCH %s %s = %d %s; want %d %s", tc.path, tc.body, w.Code, w.Body, tc.status, tc.code)
		}
	}
	if w := e.mfaDo("PATCH", "/api/admin/users/bob", bob, `{"admin":true,"name":"Bob"}`); w.Code != http.StatusOK {
		t.Errorf("PATCH of oneself that demotes no one = %d %s; want 200", w.Code, w.Body)
	}
	w = e.mfaDo("PATCH", "/api/admin/users/alice", bob, `{"disabled":true}`)
	if w.Code != http.StatusOK || e.infoStatus(alice) != http.StatusUnauthorized {
		t.Errorf("PATCH disabled = %d; alice's session %d; want 200 and 401", w.Code, e.infoStatus(alice))
	}
	e.mfaDo("PATCH", "/api/admin/users/alice", bob, `{"disabled":false}`)
	if e.infoStatus(alice) != http.StatusUnauthorized {
		t.Error("enabling alice brought her old session back")
	}
}

// TestAdminDelete: the user and their tokens go; the tombstone keeps a
// token of the name dead when the name comes back; oneself is refused.
func TestAdminDelete(t *testing.T) {
	t.Parallel()
	e, bob, alice := adminEnv(t, nil)
	if w := e.mfaDo("DELETE", "/api/admin/users/bob", bob, ""); w.Code != http.StatusConflict || errorCode(t, w) != "conflict" {
		t.Errorf("DELETE oneself = %d %s; want 409 conflict", w.Code, w.Body)
	}
	if w := e.mfaDo("DELETE", "/api/admin/users/alice", bob, ""); w.Code != http.StatusNoContent {
		t.Fatalf("DELETE alice = %d %s; want 204", w.Code, w.Body)
	}
	if w := e.mfaDo("GET", "/api/admin/users/alice", bob, ""); w.Code != http.StatusNotFound {
		t.Errorf("GET a deleted user = %d; want 404", w.Code)
	}
	if w := e.mfaDo("DELETE", "/api/admin/users/alice", bob, ""); w.Code != http.StatusNotFound {
		t.Errorf("DELETE again = %d; want 404", w.Code)
	}
	e.mfaDo("POST", "/api/admin/users/", bob, `{"username":"alice","password":"alice-pw"}`)
	if e.infoStatus(alice) != http.StatusUnauthorized {
		t.Error("the deleted alice's session lives under the new alice")
	}
}

// TestAdminActions: password, logout, unlock, reset-mfa and reset-link
// do what their user commands do, each with its deaths.
func TestAdminActions(t *testing.T) {
	t.Parallel()
	var logged servertest.SyncBuffer
	e, bob, alice := adminEnv(t, slog.New(slog.NewTextHandler(&logged, nil)))
	act := func(action, body string, want int) *strings.Reader {
		t.Helper()
		w := e.mfaDo("POST", "/api/admin/users/alice/"+action, bob, body)
		if w.Code != want {
			t.Fatalf("POST …/alice/%s = %d %s; want %d", action, w.Code, w.Body, want)
		}
		return strings.NewReader(w.Body.String())
	}
	pat := e.mintPAT("alice", alice, `"name":"ci"`)

	act("logout", "", http.StatusNoContent)
	if e.infoStatus(alice) != http.StatusUnauthorized || e.infoStatus(pat.Token) != http.StatusOK {
		t.Error("logout: want the session dead and the personal access token alive")
	}
	alice = e.login("alice")
	if w := e.mfaDo("POST", "/api/admin/users/alice/password", bob, `{"new_password":"short"}`); w.Code != http.StatusBadRequest || errorCode(t, w) != "weak_password" {
		t.Errorf("password short = %d %s; want 400 weak_password", w.Code, w.Body)
	}
	if e.infoStatus(alice) != http.StatusOK {
		t.Error("a refused password ended alice's session")
	}
	act("password", `{"new_password":"alice-s-new-password"}`, http.StatusNoContent)
	if e.infoStatus(alice) != http.StatusUnauthorized || e.infoStatus(pat.Token) != http.StatusUnauthorized {
		t.Error("password: want every session and personal access token dead")
	}
	if w := e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"alice-s-new-password"}`); w.Code != http.StatusOK {
		t.Errorf("login with the new password = %d", w.Code)
	}

	for range 3 {
		e.mfaDo("POST", "/api/auth/login/", "", `{"username":"alice","password":"wrong"}`)
	}
	var page adminPage
	decodeJSON(t, e.mfaDo("GET", "/api/admin/users/?prefix=alice", bob, "").Body, &page)
	if !page.Users[0].Locked {
		t.Errorf("after 3 wrong passwords (the user limit): locked = false; want true")
	}
	act("unlock", "", http.StatusNoContent)
	decodeJSON(t, e.mfaDo("GET", "/api/admin/users/?prefix=alice", bob, "").Body, &page)
	if page.Users[0].Locked {
		t.Errorf("after unlock: locked = true; want false")
	}
	// The code lock: MaxCodeFailures wrong codes at login, counted by the
	// server's own throttle as its logins count them.
	for range throttle.MaxCodeFailures {
		if v, _, err := e.deps.Guard.Throttle.ReserveCode(context.Background(), "alice", time.Time{}, time.Now()); v != throttle.Admitted || err != nil {
			t.Fatalf("ReserveCode(alice) = %v, %v; want admitted", v, err)
		}
	}
	decodeJSON(t, e.mfaDo("GET", "/api/admin/users/?prefix=alice", bob, "").Body, &page)
	if !page.Users[0].Locked {
		t.Errorf("after %d wrong codes (the code lock): locked = false; want true", throttle.MaxCodeFailures)
	}
	act("unlock", "", http.StatusNoContent)
	decodeJSON(t, e.mfaDo("GET", "/api/admin/users/?prefix=alice", bob, "").Body, &page)
	if page.Users[0].Locked {
		t.Errorf("after unlock of the code lock: locked = true; want false")
	}

	var link struct {
		URL       string    `json:"url"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.NewDecoder(act("reset-link", "", http.StatusOK)).Decode(&link); err != nil {
		t.Fatal(err)
	}
	uid, token, _ := strings.Cut(link.URL, "/")
	if !link.ExpiresAt.After(e.clock.Now()) || token == "" {
		t.Fatalf("reset-link = %+v; want {uid}/{token} and a later expiry", link)
	}
	w := e.mfaDo("POST", "/api/auth/password/reset/confirm/", "", `{"uid":"`+uid+`","token":"`+token+`","new_password":"alice-s-reset-password"}`)
	if w.Code != http.StatusNoContent {
		t.Errorf("confirm of the admin's link = %d %s; want 204", w.Code, w.Body)
	}
	act("reset-mfa", "", http.StatusNoContent)
	if w := e.mfaDo("POST", "/api/admin/users/nobody/logout", bob, ""); w.Code != http.StatusNotFound {
		t.Errorf("logout of nobody = %d; want 404", w.Code)
	}
	if w := e.mfaDo("POST", "/api/admin/users/carol/reset-link", bob, ""); w.Code != http.StatusConflict {
		t.Errorf("reset-link of the disabled carol = %d %s; want 409", w.Code, w.Body)
	}

	text := logged.String()
	for _, want := range []string{
		`msg=admin action=logout outcome=success admin=bob target=alice token=session`,
		`msg=admin action=password outcome=weak_password admin=bob target=alice`,
		`msg=admin action=password outcome=success admin=bob target=alice token=session fields=new_password`,
		`msg=admin action=list outcome=success admin=bob target=-`,
		`msg=admin action=reset-link outcome=success admin=bob target=alice`,
		`msg=admin action=logout outcome=not_found admin=bob target=nobody`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	for _, secret := range []string{"alice-s-new-password", token, pat.Token} {
		if strings.Contains(text, secret) {
			t.Errorf("the log holds a password, link or token:\n%s", text)
		}
	}
}
