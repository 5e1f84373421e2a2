package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"sort"
	"strings"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// Deps is everything the handlers need.
type Deps struct {
	Log    *slog.Logger
	Users  users.Directory
	Store  tokens.Store
	Policy TokenPolicy
	Guard  *login.Guard
	// TrustedProxies are the proxies whose X-Forwarded-For is believed:
	// the client a throttle and an audit line name (ClientIP).
	TrustedProxies []netip.Prefix
	// Passwords decides and hashes new passwords (POST /api/auth/password/).
	Passwords PasswordSetter
	// MFA is what the second-factor endpoints need: the secret key, the issuer.
	MFA MFAConfig
	Now func() time.Time

	Metrics       *Metrics
	MetricsOnMain bool     // serve /metrics here (without the mail delivery counters), not on --metrics-addr
	CORSOrigins   []string // origins whose pages may call the API
	NoAccessLog   bool     // log no line per request (audit and error lines stay)
	// LogOut and LogFormat, when set, are log's destination and
	// NewLogger's format: access lines skip slog's generic path (accesslog.go).
	LogOut    io.Writer
	LogFormat string
	// Reset is how password reset links work.
	Reset ResetPolicy
	// ResetRequester mails reset links (POST /api/auth/password/reset/);
	// nil without --smtp-url, when that route answers 404.
	ResetRequester ResetRequester
	// RequireMFA is --require-mfa: whom a second factor is required of.
	RequireMFA users.MFAPolicy
	// AccessTokenUses records personal access tokens' uses; its Run is
	// the caller's. Nil: NewServer makes one, whose uses are written only
	// when the caller flushes them.
	AccessTokenUses *AccessTokenUses
}

// NewServer returns the service's whole HTTP handler.
func NewServer(d Deps) http.Handler {
	rt := newRouter(d.Log)
	addRoutes(rt, d)
	var access *accessLog
	if !d.NoAccessLog {
		access = newAccessLog(d.Log, d.LogFormat, d.LogOut)
	}
	return observe(access, d.Metrics, cors(d.CORSOrigins, rt))
}

// A router is the API's ServeMux, with each pattern that matches a single
// path (no wildcard: "/healthz", "/api/auth/info", "/api/auth/login/{$}")
// also in a map by that path, looked up first: the mux's matching and the
// path check cost /info more than its token check does. A path in the map
// is served as the mux would serve it: a literal pattern matches only its
// path, and is more specific than any pattern with a wildcard that also
// matches it. An escaped path (RawPath set, which the mux matches segment
// by segment) and CONNECT (whose path the mux does not clean) go the
// mux's way, through cleanPathsOnly.
type router struct {
	mux     *http.ServeMux
	literal map[string]literalRoute // by path
	slow    http.Handler            // cleanPathsOnly, then mux
}

// A literalRoute is a pattern that matches one path, and its handler.
type literalRoute struct {
	pattern string
	h       http.Handler
}

func newRouter(log *slog.Logger) *router {
	mux := http.NewServeMux()
	return &router{mux: mux, literal: make(map[string]literalRoute), slow: cleanPathsOnly(log, mux)}
}

// Handle registers h for pattern, as ServeMux.Handle does.
func (rt *router) Handle(pattern string, h http.Handler) {
	rt.mux.Handle(pattern, h)
	if p, ok := literalPath(pattern); ok {
		rt.literal[p] = literalRoute{pattern: pattern, h: h}
	}
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawPath == "" && r.Method != http.MethodConnect {
		if lr, ok := rt.literal[r.URL.Path]; ok {
			r.Pattern = lr.pattern // as the mux sets it, for the metrics
			lr.h.ServeHTTP(w, r)
			return
		}
	}
	rt.slow.ServeHTTP(w, r)
}

// literalPath returns the one path a ServeMux pattern matches, and false
// when it matches more or other than a path: a wildcard, a subtree (a
// trailing slash without {$}), a method or a host.
func literalPath(pattern string) (string, bool) {
	p, exact := strings.CutSuffix(pattern, "{$}")
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "{} \t") || (!exact && strings.HasSuffix(p, "/")) {
		return "", false
	}
	return p, true
}

// cleanPathsOnly answers 404 not_found for a path with an empty, "." or
// ".." segment, which ServeMux would answer with a 307 to the cleaned path
// and an HTML body: no client of this API sends one, and a redirect would
// only help a probe map the routes.
func cleanPathsOnly(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if clean := path.Clean(p); clean != p && clean+"/" != p {
			writeError(w, r, log, errNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// addRoutes registers every route on mux and returns them as "METHOD
// /canonical/path" (for the OpenAPI test). The API paths are served with
// and without their trailing slash alike, and nothing below them.
func addRoutes(mux interface{ Handle(string, http.Handler) }, d Deps) []string {
	var routes, paths []string
	byPath := make(map[string]map[string]http.Handler) // by path, by method
	handle := func(method, path string, h http.Handler) {
		routes = append(routes, method+" "+path)
		if byPath[path] == nil {
			byPath[path] = make(map[string]http.Handler)
			paths = append(paths, path)
		}
		byPath[path][method] = h
	}
	if d.AccessTokenUses == nil {
		d.AccessTokenUses = NewAccessTokenUses(d.Users, d.Log)
	}
	d.Policy.RequireMFA = d.RequireMFA
	tc := tokenCheck{users: d.Users, store: d.Store, policy: d.Policy, metrics: d.Metrics, uses: d.AccessTokenUses, now: d.Now}
	enrol := tc // for the endpoints an enrolment session may call
	enrol.enrolment = true
	sf := secondFactors{users: d.Users, config: d.MFA, now: d.Now, log: d.Log}
	gt := gate{logins: &login.Logins{Guard: d.Guard, Users: d.Users, Store: d.Store, Policy: d.Policy.sessions(), Now: d.Now,
		Factors: login.SecondFactors{Users: d.Users, Store: d.Store, Keys: d.MFA.Keys, Now: d.Now, Log: d.Log}}, trusted: d.TrustedProxies}
	handle("POST", "/api/auth/login/", handleLogin(d.Log, gt))
	handle("POST", "/api/auth/login/mfa/", handleLoginMFA(d.Log, gt, d.Metrics))
	handle("GET", "/api/auth/info", handleInfo(d.Log, tc))
	handle("POST", "/api/auth/logout/", handleLogout(d.Log, enrol))
	handle("POST", "/api/auth/logoutall/", handleLogoutAll(d.Log, tc))
	handle("POST", "/api/auth/password/", handlePassword(d.Log, tc, gt, d.Passwords))
	handle("GET", "/api/auth/sessions/", handleSessions(d.Log, tc))
	handle("DELETE", "/api/auth/sessions/{id}", handleRevokeSession(d.Log, tc))
	handle("GET", "/api/auth/mfa/", handleMFAStatus(d.Log, enrol, gt))
	handle("POST", "/api/auth/mfa/totp/", handleTOTPEnrol(d.Log, enrol, gt, sf))
	handle("DELETE", "/api/auth/mfa/totp/", handleTOTPRemove(d.Log, tc, gt, sf))
	handle("POST", "/api/auth/mfa/totp/confirm/", handleTOTPConfirm(d.Log, enrol, gt, sf))
	handle("POST", "/api/auth/mfa/recovery-codes/", handleRecoveryCodes(d.Log, tc, gt, sf))
	handle("POST", "/api/auth/tokens/", handleTokenCreate(d.Log, tc, gt))
	handle("GET", "/api/auth/tokens/", handleTokenList(d.Log, tc))
	handle("DELETE", "/api/auth/tokens/{id}", handleTokenRevoke(d.Log, tc))
	handle("POST", "/api/auth/introspect/", handleIntrospect(d.Log, tc))
	addAdminRoutes(handle, d, tc)
	handle("POST", "/api/auth/password/reset/confirm/", handleResetConfirm(d.Log, tc, gt, d.Passwords, d.Reset))
	if d.ResetRequester != nil { // API.md: without --smtp-url, 404
		handle("POST", "/api/auth/password/reset/", handleResetRequest(d.Log, tc, gt, d.ResetRequester, d.Reset))
	}
	handle("GET", "/api/openapi.json", handleOpenAPI())
	handle("GET", "/healthz", handleHealthz())
	handle("GET", "/readyz", handleReadyz(d.Log, d.Store, d.Users))
	if d.MetricsOnMain {
		handle("GET", "/metrics", d.Metrics.APIHandler())
	}
	for _, path := range paths {
		h := d.methods(byPath[path])
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
	mux.Handle("/", handleNotFound(d.Log))
	return routes
}

// methods returns a handler that serves each method with its handler (and
// HEAD as GET) and answers 405 with Allow otherwise: ServeMux's own 405 is
// plain text.
func (d Deps) methods(byMethod map[string]http.Handler) http.Handler {
	var allowed []string
	for method := range byMethod {
		allowed = append(allowed, method)
	}
	if get, ok := byMethod[http.MethodGet]; ok {
		allowed = append(allowed, http.MethodHead)
		byMethod[http.MethodHead] = get
	}
	sort.Strings(allowed)
	allow := strings.Join(allowed, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := byMethod[r.Method]; ok {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Allow", allow)
		writeError(w, r, d.Log, methodNotAllowed(allow))
	})
}

// observe wraps the mux: it gives every request an id (requestid.go) and
// echoes it, closes connections a request could be smuggled on
// (smuggling.go), then records the route's metrics (metrics.go) and writes
// the access line (accesslog.go). One wrapper, one recorder: the hot path
// pays for a single indirection. Handlers find the id with requestID(w).
func observe(access *accessLog, m *Metrics, next http.Handler) http.Handler {
	ids := newRequestIDs()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		if v := r.Header["X-Request-Id"]; len(v) > 0 { // Header.Get, without canonicalizing a canonical key
			rec.id[0] = v[0]
		}
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
		// One clock read: time.Now reads the wall and the monotonic clock,
		// time.Since the monotonic one alone (about 25 ns each here, of a
		// 1 µs request); end's wall time is start's plus d.
		d := time.Since(start)
		end := start.Add(d)
		m.observe(routeLabel(r.Pattern), rec.status, rec.code, d) // the mux set r.Pattern
		access.write(r, rec, end, d)
	})
}
