package main

import (
	"authsvc/internal/tokens"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"
)

// serverDeps is everything the handlers need.
type serverDeps struct {
	log    *slog.Logger
	users  Directory
	store  tokens.Store
	policy tokenPolicy
	guard  *loginGuard
	// passwords decides and hashes new passwords (POST /api/auth/password/).
	passwords passwordSetter
	now       func() time.Time

	metrics       *metrics
	metricsOnMain bool     // serve /metrics here, not on --metrics-addr
	corsOrigins   []string // origins whose pages may call the API
	noAccessLog   bool     // log no line per request (audit and error lines stay)
	// logOut and logFormat, when set, are log's destination and
	// newLogger's format: access lines skip slog's generic path (accesslog.go).
	logOut    io.Writer
	logFormat string
}

// newServer returns the service's whole HTTP handler.
func newServer(d serverDeps) http.Handler {
	mux := http.NewServeMux()
	addRoutes(mux, d)
	var access *accessLog
	if !d.noAccessLog {
		access = newAccessLog(d.log, d.logFormat, d.logOut)
	}
	return observe(access, d.metrics, cors(d.corsOrigins, mux))
}

// addRoutes lists every route and returns them as "METHOD /canonical/path"
// (for the OpenAPI test). The API paths are served with and without their
// trailing slash alike, and nothing below them.
func addRoutes(mux *http.ServeMux, d serverDeps) []string {
	var routes []string
	handle := func(method, path string, h http.Handler) {
		routes = append(routes, method+" "+path)
		h = d.methods(method, h)
		switch trimmed, ok := strings.CutSuffix(path, "/"); {
		case ok:
			mux.Handle(path+"{$}", h)
			mux.Handle(trimmed, h)
		case strings.HasPrefix(path, "/api/auth/"):
			mux.Handle(path, h)
			mux.Handle(path+"/{$}", h)
		default:
			mux.Handle(path, h)
		}
	}
	tc := tokenCheck{users: d.users, store: d.store, policy: d.policy, metrics: d.metrics, now: d.now}
	handle("POST", "/api/auth/login/", handleLogin(d.log, d.users, d.store, d.policy, d.guard, d.now))
	handle("GET", "/api/auth/info", handleInfo(d.log, tc))
	handle("POST", "/api/auth/logout/", handleLogout(d.log, tc))
	handle("POST", "/api/auth/logoutall/", handleLogoutAll(d.log, tc))
	handle("POST", "/api/auth/password/", handlePassword(d.log, tc, d.guard, d.passwords))
	handle("GET", "/api/auth/sessions/", handleSessions(d.log, tc))
	handle("DELETE", "/api/auth/sessions/{id}", handleRevokeSession(d.log, tc))
	handle("GET", "/api/openapi.json", handleOpenAPI())
	handle("GET", "/healthz", handleHealthz())
	handle("GET", "/readyz", handleReadyz(d.log, d.store, d.users))
	if d.metricsOnMain {
		handle("GET", "/metrics", d.metrics.handler())
	}
	mux.Handle("/", handleNotFound(d.log))
	return routes
}

// methods returns a handler that serves h for method (and HEAD for GET) and
// answers 405 with Allow otherwise: ServeMux's own 405 is plain text.
func (d serverDeps) methods(method string, h http.Handler) http.Handler {
	allowed := []string{method}
	if method == http.MethodGet {
		allowed = append(allowed, http.MethodHead)
	}
	sort.Strings(allowed)
	allow := strings.Join(allowed, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == method || (r.Method == http.MethodHead && method == http.MethodGet) {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Allow", allow)
		writeError(w, r, d.log, methodNotAllowed(allow))
	})
}

// observe wraps the mux: it gives every request an id (requestid.go) and
// echoes it, closes connections a request could be smuggled on
// (smuggling.go), then records the route's metrics (metrics.go) and writes
// the access line (accesslog.go). One wrapper, one recorder: the hot path
// pays for a single indirection. Handlers find the id with requestID(w).
func observe(access *accessLog, m *metrics, next http.Handler) http.Handler {
	ids := newRequestIDs()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		rec.id[0] = r.Header.Get("X-Request-Id")
		if !validRequestID(rec.id[0]) {
			rec.id[0] = ids.next()
		}
		w.Header()["X-Request-Id"] = rec.id[:]
		if mustClose(r) {
			w.Header()["Connection"] = []string{"close"}
		}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		end := time.Now()
		d := end.Sub(start)
		m.observe(routeLabel(r.Pattern), rec.status, rec.code, d) // the mux set r.Pattern
		access.write(r, rec, end, d)
	})
}
