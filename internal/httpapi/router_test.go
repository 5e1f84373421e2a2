package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRouterServesAsMux: every request reaches the handler, r.Pattern and
// path values the ServeMux alone (behind cleanPathsOnly) would give it,
// whether the router's map of literal paths answers it or the mux does.
func TestRouterServesAsMux(t *testing.T) {
	t.Parallel()
	patterns := []string{
		"/api/auth/login/{$}", "/api/auth/login",
		"/api/auth/info", "/api/auth/info/{$}",
		"/api/auth/sessions/{$}", "/api/auth/sessions",
		"/api/auth/sessions/{id}", "/api/auth/sessions/{id}/{$}",
		"/healthz", "/api/openapi.json", "/",
	}
	log := slog.New(slog.DiscardHandler)
	rt := newRouter(log)
	mux := http.NewServeMux()
	for _, p := range patterns {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "handler %s, r.Pattern %s, id %q", p, r.Pattern, r.PathValue("id"))
		})
		rt.Handle(p, h)
		mux.Handle(p, h)
	}
	plain := cleanPathsOnly(log, mux)
	for _, tt := range []struct{ method, target string }{
		{"GET", "/api/auth/info"},
		{"HEAD", "/api/auth/info"},
		{"GET", "/api/auth/info/"},
		{"GET", "/api/auth/info//"},
		{"GET", "/api/auth/info?username=bob"},
		{"POST", "/api/auth/login/"},
		{"POST", "/api/auth/login"},
		{"GET", "/api/auth/sessions/"},
		{"GET", "/api/auth/sessions/abc"},
		{"GET", "/api/auth/sessions/abc/"},
		{"GET", "/api/auth%2Finfo"},
		{"GET", "/api/auth/inf%6F"},
		{"GET", "/api/auth/sessions/a%2Fb"},
		{"GET", "/healthz"},
		{"GET", "/healthz/"},
		{"GET", "/api/openapi.json"},
		{"GET", "/api/auth/../auth/info"},
		{"GET", "/nothing"},
		{"GET", "/"},
		{"CONNECT", "/api/auth/info"},
	} {
		want, got := httptest.NewRecorder(), httptest.NewRecorder()
		plain.ServeHTTP(want, httptest.NewRequest(tt.method, tt.target, nil))
		rt.ServeHTTP(got, httptest.NewRequest(tt.method, tt.target, nil))
		if got.Code != want.Code || got.Body.String() != want.Body.String() || got.Header().Get("Location") != want.Header().Get("Location") {
			t.Errorf("%s %s = %d %q (Location %q); want %d %q (Location %q), as the mux serves it", tt.method, tt.target,
				got.Code, got.Body, got.Header().Get("Location"), want.Code, want.Body, want.Header().Get("Location"))
		}
	}
}

// TestLiteralPath: only a pattern that matches one path, and nothing
// else, is looked up by that path.
func TestLiteralPath(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		pattern, path string
		ok            bool
	}{
		{"/api/auth/info", "/api/auth/info", true},
		{"/api/auth/login/{$}", "/api/auth/login/", true},
		{"/api/auth/info/{$}", "/api/auth/info/", true},
		{"/healthz", "/healthz", true},
		{"/", "", false},                         // every path
		{"/api/auth/", "", false},                // a subtree
		{"/api/auth/sessions/{id}", "", false},   // a wildcard
		{"/files/{path...}", "", false},          // a wildcard
		{"GET /api/auth/info", "", false},        // a method
		{"example.com/api/auth/info", "", false}, // a host
	} {
		if path, ok := literalPath(tt.pattern); path != tt.path || ok != tt.ok {
			t.Errorf("literalPath(%q) = %q, %v; want %q, %v", tt.pattern, path, ok, tt.path, tt.ok)
		}
	}
}
