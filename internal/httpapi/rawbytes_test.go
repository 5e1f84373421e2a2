package httpapi_test

import (
	"testing"
	"time"

	"authsvc/internal/httpapi"
)

// TestRawBytesRefused: a login or a password change whose body is not
// valid UTF-8 is 400 invalid_request, and changes nothing. Before, the
// bytes \xff\xfe became U+FFFD U+FFFD, so that \xc0\xc1 then matched the
// same password.
func TestRawBytesRefused(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	tok := e.login("alice")
	const newPassword = "\xff\xfe-and-long-enough"
	w := e.do("POST", "/api/auth/password/", `{"current_password":"alice-pw","new_password":"`+newPassword+`"}`, jsonCT, "Authorization: Token "+tok)
	if w.Code != 400 || errorCode(t, w) != "invalid_request" {
		t.Fatalf("password change to raw bytes = %d %s; want 400 invalid_request", w.Code, w.Body)
	}
	for _, pw := range []string{newPassword, "\xc0\xc1-and-long-enough"} {
		w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"`+pw+`"}`, jsonCT)
		if w.Code != 400 || errorCode(t, w) != "invalid_request" {
			t.Errorf("login with password %q = %d %s; want 400 invalid_request", pw, w.Code, w.Body)
		}
	}
	if w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT); w.Code != 200 {
		t.Errorf("login with the unchanged password = %d %s; want 200", w.Code, w.Body)
	}
	if w := e.do("GET", "/api/auth/info", "", "Authorization: Token "+tok); w.Code != 200 {
		t.Errorf("info with the token from before the refused change = %d; want 200", w.Code)
	}
}
