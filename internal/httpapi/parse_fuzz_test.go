package httpapi

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"authsvc/internal/password"
	"authsvc/internal/users"
)

func FuzzDecodeLogin(f *testing.F) {
	for _, s := range []string{
		`{"username":"alice","password":"alice-pw"}`, `{"username":"a","password":"b"} `, `[]`, `null`, `{}`,
		`{"username":1}`, `{"username":"a","password":"b"}x`, `{"username":"\u0000","password":"\ud800"}`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeLogin(body)
		if err != nil {
			var e *apiError
			if !errors.As(err, &e) || e.status != 400 || e.code != "invalid_request" {
				t.Fatalf("decodeLogin(%q) error = %v; want 400 invalid_request", body, err)
			}
			if req != (LoginRequest{}) {
				t.Fatalf("decodeLogin(%q) returned %+v with an error", body, req)
			}
			if p := jsonPassword(body); len(p) > 3 && strings.Contains(e.detail, p) {
				t.Fatalf("decodeLogin(%q) detail %q quotes the password", body, e.detail)
			}
			return
		}
		if req.Username == "" || req.Password == "" || len(req.Username) > users.MaxUsernameLen || len(req.Password) > password.MaxLen {
			t.Fatalf("decodeLogin(%q) = %+v; accepted a field outside its limits", body, req)
		}
		if !json.Valid(body) {
			t.Fatalf("decodeLogin(%q) accepted invalid JSON", body)
		}
	})
}

// jsonPassword returns the body's password field when it has one.
func jsonPassword(body []byte) string {
	var v struct{ Password string }
	json.Unmarshal(body, &v)
	return v.Password
}

func FuzzUsernameParam(f *testing.F) {
	for _, s := range []string{"", "username=alice", "username=", "username=a&username=b", "x=1&username=%61", "username=%zz", "%75sername=bob", "username=a+b", "&&username"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := usernameParam(raw)
		want, parseErr := url.ParseQuery(raw)
		if err != nil {
			return
		}
		// Where the standard parser succeeds, both agree on a single value.
		if parseErr == nil && len(want["username"]) <= 1 && got != want.Get("username") {
			t.Fatalf("usernameParam(%q) = %q; want %q", raw, got, want.Get("username"))
		}
	})
}
