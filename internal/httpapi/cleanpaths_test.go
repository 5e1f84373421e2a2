package httpapi_test

import (
	"testing"

	"authsvc/internal/httpapi"
)

// TestUncleanPathsNotFound: a path with //, /./ or /../ is 404 not_found as
// JSON, never the mux's 307 to the cleaned path; clean paths, with or
// without the trailing slash, still reach their routes.
func TestUncleanPathsNotFound(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{})
	tok := e.login("alice")
	for _, tt := range []struct{ method, path string }{
		{"GET", "//api/auth/info"},
		{"GET", "/api//auth/info"},
		{"GET", "/api/./auth/info"},
		{"GET", "/api/auth/../auth/info"},
		{"GET", "/api/auth/info/.."},
		{"POST", "/api/auth//login/"},
		{"GET", "/healthz/."},
	} {
		w := e.do(tt.method, tt.path, "", "Authorization: Token "+tok)
		if w.Code != 404 || errorCode(t, w) != "not_found" || w.Header().Get("Location") != "" {
			t.Errorf("%s %s = %d %s (Location %q); want 404 not_found, no Location", tt.method, tt.path, w.Code, w.Body, w.Header().Get("Location"))
		}
	}
	for _, p := range []string{"/api/auth/info", "/api/auth/info/"} {
		if w := e.do("GET", p, "", "Authorization: Token "+tok); w.Code != 200 {
			t.Errorf("GET %s = %d %s; want 200", p, w.Code, w.Body)
		}
	}
}
