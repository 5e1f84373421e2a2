package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"authsvc/internal/buildinfo"
	"authsvc/internal/login"
	"authsvc/internal/tokens"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the service's Prometheus metrics, in registries of their own
// (no process-wide default registry, so several servers can share a test
// binary). Label values come from fixed sets: routes and outcome codes,
// never a username, an address or a token.
//
// No metric served to the public may tell whether a user or an address
// exists (API.md, Operations): whatever an unauthenticated request (login,
// reset request, reset confirm) can move moves alike for an unknown user
// and a known one. The counters of mail delivered or not cannot be made
// so (only a real user is mailed, however late), so they are kept apart,
// in delivery, which only the metrics listener (--metrics-addr) serves.
type Metrics struct {
	registry       *prometheus.Registry     // served on the API listener and the metrics listener
	delivery       *prometheus.Registry     // the mail delivery counters: served on the metrics listener only
	requests       *prometheus.HistogramVec // by route
	logins         *prometheus.CounterVec   // by outcome
	infos          *prometheus.CounterVec   // by outcome
	passwords      *prometheus.CounterVec   // password changes, by outcome
	mfa            *prometheus.CounterVec   // second-factor steps, by step and outcome
	mfaLockouts    prometheus.Counter       // code locks begun
	tokensIssued   prometheus.Counter
	revocations    *prometheus.CounterVec // by kind
	rehashes       *prometheus.CounterVec // by result
	reloads        *prometheus.CounterVec // by result
	lastGoodReload prometheus.Gauge
	tokenChecksVec *prometheus.CounterVec
	resetMails     *prometheus.CounterVec   // reset link mails, by outcome
	tokenChecks    [3][6]prometheus.Counter // by tokenKinds, by tokenCheckOutcomes: resolved once, for the hot path
	// enrolmentPending counts the users --require-mfa covers who have no
	// second factor (SetEnrolmentPending).
	enrolmentPending prometheus.Gauge

	// routes holds each known route's series, resolved once: label hashing
	// per request would cost the hot path.
	routes map[string]*routeMetrics
}

// routeMetrics are one route's series.
type routeMetrics struct {
	duration prometheus.Observer
	outcomes []string                      // the route's outcome set; nil when it has none
	counts   map[string]prometheus.Counter // by outcome
}

// metricRoutes are the route labels resolved in advance: routeLabel of every
// pattern addRoutes registers, and "other" (TestMetricRoutesMatchAddRoutes
// keeps the two in step).
var metricRoutes = []string{"/api/auth/login", "/api/auth/info", "/api/auth/logout", "/api/auth/logoutall",
	"/api/auth/password", "/api/auth/sessions", "/api/auth/sessions/{id}",
	"/api/auth/login/mfa", "/api/auth/mfa", "/api/auth/mfa/totp", "/api/auth/mfa/totp/confirm", "/api/auth/mfa/recovery-codes",
	"/api/auth/tokens", "/api/auth/tokens/{id}", "/api/auth/introspect", "/api/auth/password/reset/confirm",
	"/api/admin/users", "/api/admin/users/{username}", "/api/admin/users/{username}/password", "/api/admin/users/{username}/logout",
	"/api/admin/users/{username}/unlock", "/api/admin/users/{username}/reset-mfa", "/api/admin/users/{username}/reset-link",
	"/api/openapi.json", "/healthz", "/readyz", "/metrics", "other"}

// Outcomes of login and info: API.md's error codes, folded into a fixed set.
var (
	loginOutcomes    = []string{"success", "invalid_credentials", "mfa_required", "throttled", "unavailable", "invalid_request", "internal_error"}
	passwordOutcomes = []string{"success", "invalid_credentials", "weak_password", "throttled", "unavailable", "not_authenticated", "invalid_token", "mfa_enrollment_required", "invalid_request", "internal_error"}
	infoOutcomes     = []string{"success", "not_authenticated", "invalid_token", "insufficient_scope", "mfa_enrollment_required", "permission_denied", "not_found", "unavailable", "invalid_request", "internal_error"}
)

// outcomeOf folds a reply's status and error code into one of outcomes.
func outcomeOf(status int, code string, outcomes []string) string {
	if status < 400 {
		return "success"
	}
	for _, o := range outcomes {
		if o == code {
			return o
		}
	}
	if status >= 500 {
		return "internal_error"
	}
	return "invalid_request" // 405, 413, 415: the request was malformed
}

// MetricsSources are the gauges read at scrape time.
type MetricsSources struct {
	Users     interface{ Len() int }
	Store     tokens.Store
	Admission *login.Admission
}

// NewMetrics makes the service's metrics, their label series at zero, and
// registers them with the gauges read from src at scrape time.
func NewMetrics(src MetricsSources) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "authsvc_http_request_duration_seconds",
			Help:    "Time to serve a request, by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route"}),
		logins:         counterVec("authsvc_login_total", "Login attempts by outcome.", "outcome"),
		passwords:      counterVec("authsvc_password_changes_total", "Password changes (POST /api/auth/password/) by outcome.", "outcome"),
		mfa:            counterVec("authsvc_mfa_total", "Second-factor steps by step (required, code, enrol, confirm, remove, recovery_codes) and outcome.", "step", "outcome"),
		mfaLockouts:    counter("authsvc_mfa_lockouts_total", "Users whose second steps are refused after 100 consecutive wrong codes (each wrong code that made 100); authsvc user unlock lifts it."),
		infos:          counterVec("authsvc_info_total", "Info requests by outcome.", "outcome"),
		tokensIssued:   counter("authsvc_tokens_issued_total", "Tokens issued."),
		rehashes:       counterVec("authsvc_rehashes_total", "Rehashes on login of a hash outside the hash policy, by result (ok, skipped, error).", "result"),
		revocations:    counterVec("authsvc_sessions_revoked_total", "Sessions ended before their expiry, by kind.", "kind"),
		reloads:        counterVec("authsvc_users_reloads_total", "Users file reloads by result.", "result"),
		resetMails:     counterVec("authsvc_reset_mail_total", "Password reset mails by outcome: sent, dropped (the queue was full), or failed_REASON after the last try (connect, tls, auth, rejected, timeout, message, canceled, shutdown).", "outcome"),
		tokenChecksVec: counterVec("authsvc_token_checks_total", "Token checks (the authorization header, an introspected token) by kind (session, pat, unknown: not even parsed) and outcome.", "kind", "outcome"),
		enrolmentPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "authsvc_mfa_enrollment_pending",
			Help: "Enabled users whom --require-mfa requires a second factor of and who have none: they log in to enrolment only.",
		}),
		lastGoodReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "authsvc_users_last_reload_success_timestamp_seconds", Help: "When the users file was last loaded successfully.",
		}),
	}
	m.resolveRoutes()
	m.presetSeries()
	reg.MustRegister(m.requests, m.logins, m.passwords, m.mfa, m.mfaLockouts, m.infos, m.tokensIssued, m.revocations, m.rehashes, m.reloads, m.lastGoodReload, m.tokenChecksVec, m.enrolmentPending)
	registerGauges(reg, src)
	m.delivery = prometheus.NewRegistry()
	m.delivery.MustRegister(m.resetMails)
	return m
}

// counterVec makes a counter with labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// counter makes a counter without labels.
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// resolveRoutes resolves every known route's series once (m.routes).
func (m *Metrics) resolveRoutes() {
	m.routes = make(map[string]*routeMetrics, len(metricRoutes))
	for _, route := range metricRoutes {
		rm := &routeMetrics{duration: m.requests.WithLabelValues(route)}
		switch route {
		case "/api/auth/login":
			rm.outcomes, rm.counts = loginOutcomes, outcomeCounters(m.logins, loginOutcomes)
		case "/api/auth/password":
			rm.outcomes, rm.counts = passwordOutcomes, outcomeCounters(m.passwords, passwordOutcomes)
		case "/api/auth/info":
			rm.outcomes, rm.counts = infoOutcomes, outcomeCounters(m.infos, infoOutcomes)
		}
		m.routes[route] = rm
	}
}

// registerGauges registers the metrics read at scrape time: the build, the
// users, the password checks, the runtime, and what the store can tell.
func registerGauges(reg *prometheus.Registry, src MetricsSources) {
	b := buildinfo.Read()
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsvc_build_info", Help: "Build information; always 1.",
			ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion},
		}, func() float64 { return 1 }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsvc_users_loaded", Help: "Users in force.",
		}, func() float64 { return float64(src.Users.Len()) }),
	)
	running := func() float64 { n, _ := src.Admission.Stats(); return float64(n) }
	waiting := func() float64 { _, n := src.Admission.Stats(); return float64(n) }
	for _, g := range []struct {
		name, help string
		value      func() float64
	}{
		{"authsvc_password_checks_running", "Password checks running.", running},
		{"authsvc_password_checks_waiting", "Password checks waiting for a slot.", waiting},
		// The former names, for dashboards not yet moved (CHANGELOG.md).
		{"authsvc_bcrypt_running", "Deprecated: authsvc_password_checks_running.", running},
		{"authsvc_bcrypt_waiting", "Deprecated: authsvc_password_checks_waiting.", waiting},
	} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help}, g.value))
	}
	// API.md: every metric name starts with authsvc_, the runtime's too.
	prometheus.WrapRegistererWithPrefix("authsvc_", reg).MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	registerStoreGauges(reg, src.Store)
}

// registerStoreGauges registers what store can tell cheaply: its token
// cache (Redis), and how many sessions it holds (memory).
func registerStoreGauges(reg *prometheus.Registry, store tokens.Store) {
	if c, ok := store.(tokenCacheStats); ok { // stores that cache looked-up sessions (Redis)
		stat := func(i int) func() float64 {
			return func() float64 {
				hits, misses, breaks, size := c.CacheStats()
				return [...]float64{float64(hits), float64(misses), float64(breaks), float64(size)}[i]
			}
		}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "authsvc_token_cache_hits_total", Help: "Token checks answered from this instance's token cache."}, stat(0)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "authsvc_token_cache_misses_total", Help: "Token checks that read the token store past the cache."}, stat(1)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "authsvc_token_cache_link_breaks_total", Help: "Times the token cache's invalidation link broke and the cache was dropped."}, stat(2)),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "authsvc_token_cache_entries", Help: "Sessions in this instance's token cache."}, stat(3)),
		)
	}
	if _, ok := store.Len(); ok { // stores that count their sessions cheaply
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "authsvc_live_tokens", Help: "Sessions in the memory store, expired ones not yet swept included.",
		}, func() float64 { n, _ := store.Len(); return float64(n) }))
	}
}

// presetSeries makes every labelled series of the fixed label sets at
// zero, once: a scrape shows them before their first event, and a rate
// over them needs no special case for a series that appears.
func (m *Metrics) presetSeries() {
	for _, result := range []string{"ok", "skipped", "error"} {
		m.rehashes.WithLabelValues(result)
	}
	for _, kind := range revocationKinds {
		m.revocations.WithLabelValues(kind)
	}
	for _, step := range mfaSteps {
		for _, o := range mfaOutcomes {
			m.mfa.WithLabelValues(step, o)
		}
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("error")
	m.resetMails.WithLabelValues("sent")
	m.resetMails.WithLabelValues("dropped")
	for k, kind := range tokenKinds {
		for o, outcome := range tokenCheckOutcomes {
			m.tokenChecks[k][o] = m.tokenChecksVec.WithLabelValues(kind, outcome)
		}
	}
}

// outcomeCounters resolves the counter of every outcome.
func outcomeCounters(vec *prometheus.CounterVec, outcomes []string) map[string]prometheus.Counter {
	counts := make(map[string]prometheus.Counter, len(outcomes))
	for _, o := range outcomes {
		counts[o] = vec.WithLabelValues(o)
	}
	return counts
}

// observe records one served request on route.
func (m *Metrics) observe(route string, status int, code string, d time.Duration) {
	rm, ok := m.routes[route]
	if !ok {
		// A route missing from metricRoutes still counts under its own
		// label (a mux pattern: a fixed set), only more slowly.
		rm = &routeMetrics{duration: m.requests.WithLabelValues(route)}
	}
	rm.duration.Observe(d.Seconds())
	if rm.outcomes != nil {
		rm.counts[outcomeOf(status, code, rm.outcomes)].Inc()
	}
	if (route == "/api/auth/login" || route == "/api/auth/login/mfa") && status == http.StatusOK {
		m.tokensIssued.Inc()
	}
}

// Kinds of session revocation, the label values of authsvc_sessions_revoked_total.
const (
	revokedLogout     = "logout"              // POST /api/auth/logout/
	revokedLogoutAll  = "logoutall"           // POST /api/auth/logoutall/
	revokedByID       = "revoke"              // DELETE /api/auth/sessions/{id}
	revokedIdle       = "idle"                // unused for --token-idle
	revokedEviction   = login.RevokedEviction // the per-user limit
	RevokedUserChange = "user_change"         // deleted, disabled, password changed, user logout
)

var revocationKinds = []string{revokedLogout, revokedLogoutAll, revokedByID, revokedIdle, revokedEviction, RevokedUserChange}

// Second-factor steps and their outcomes, the labels of authsvc_mfa_total.
var (
	mfaSteps    = []string{"required", "code", "enrol", "confirm", "remove", "recovery_codes"}
	mfaOutcomes = []string{"success", "invalid_credentials", "invalid_token", "throttled", "unavailable", "invalid_request", "mfa_enrolled", "internal_error"}
)

// SecondFactorStep counts one second-factor step (one of mfaSteps) ending
// with err: "required" is a right password answered mfa_required, "code"
// a code checked at login (one step or the second).
func (m *Metrics) SecondFactorStep(step string, err error) {
	if m == nil {
		return
	}
	status, code := http.StatusOK, "success"
	if err != nil {
		e, _ := errorReply(err)
		status, code = e.status, e.code
	}
	m.mfa.WithLabelValues(step, outcomeOf(status, code, mfaOutcomes)).Inc()
}

// MFALocked counts a user's code lock begun: the wrong code that made
// throttle.MaxCodeFailures.
func (m *Metrics) MFALocked() {
	if m != nil {
		m.mfaLockouts.Inc()
	}
}

// Revoked counts n sessions ended by kind.
func (m *Metrics) Revoked(kind string, n int) {
	if n > 0 {
		m.revocations.WithLabelValues(kind).Add(float64(n))
	}
}

// Reloaded records a reload of the users file.
func (m *Metrics) Reloaded(err error, now time.Time) {
	if err != nil {
		m.reloads.WithLabelValues("error").Inc()
		return
	}
	m.reloads.WithLabelValues("ok").Inc()
	m.lastGoodReload.Set(float64(now.Unix()))
}

// Handler serves every metric in Prometheus text format, the mail
// delivery counters included: the metrics listener's /metrics
// (--metrics-addr), which is not the public's.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{m.registry, m.delivery}, promhttp.HandlerOpts{})
}

// APIHandler serves the metrics in Prometheus text format without the
// mail delivery counters: /metrics on the API listener, which anyone who
// can reach the API can read, and which a reset request must not move
// differently for a user who exists (API.md, Operations).
func (m *Metrics) APIHandler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// routeLabel names the route of a mux pattern for the metrics: the path
// without a trailing slash, so both forms of a path count as one route;
// "other" for paths no route claims.
func routeLabel(pattern string) string {
	pattern = strings.TrimSuffix(strings.TrimSuffix(pattern, "{$}"), "/")
	if pattern == "" {
		return "other"
	}
	return pattern
}

// Rehashed counts a rehash on login by result: ok, skipped (a password
// bcrypt would cut, or a hash changed meanwhile) or error.
func (m *Metrics) Rehashed(result string) { m.rehashes.WithLabelValues(result).Inc() }

// tokenCacheStats is what a store that caches looked-up sessions reports
// (redisstore.Cached: Store's and ClusterStore's CacheStats).
type tokenCacheStats interface {
	CacheStats() (hits, misses, breaks uint64, size int)
}

// Kinds and outcomes of token checks, the labels of authsvc_token_checks_total.
var (
	tokenKinds         = []string{"session", "pat", "unknown"}
	tokenCheckOutcomes = []string{"success", "invalid_token", "insufficient_scope", "unavailable", "mfa_enrollment_required", "internal_error"}
)

// tokenChecked counts one check of a token of kind (0: not even
// parsed) ending with err.
func (m *Metrics) tokenChecked(kind tokens.Kind, err error) {
	if m == nil {
		return
	}
	k := 2
	switch kind {
	case tokens.KindSession:
		k = 0
	case tokens.KindPAT:
		k = 1
	}
	o := 0
	if err != nil {
		e, _ := errorReply(err)
		o = slices.Index(tokenCheckOutcomes, outcomeOf(e.status, e.code, tokenCheckOutcomes))
		if o < 0 { // invalid_request: not a token check's outcome
			o = len(tokenCheckOutcomes) - 1
		}
	}
	m.tokenChecks[k][o].Inc()
}

// Mailed counts a reset link mail's outcome: "sent", "dropped", or
// "failed_" and the mail package's reason. Only a user who exists is
// mailed, so the counter is served on the metrics listener only
// (Handler, not APIHandler).
func (m *Metrics) Mailed(outcome string) {
	if m != nil {
		m.resetMails.WithLabelValues(outcome).Inc()
	}
}

// SetEnrolmentPending sets authsvc_mfa_enrollment_pending to n: the
// enabled users --require-mfa requires a second factor of who have none
// (users.MFAPolicy.Pending), as serve counts them in the directory.
func (m *Metrics) SetEnrolmentPending(n int) {
	if m != nil {
		m.enrolmentPending.Set(float64(n))
	}
}
