// Package introspect is net/http middleware for Go services behind
// authsvc: it authenticates each request's authsvc token (a login session
// or a personal access token, in `Authorization: Token …` or `Bearer …`)
// with authsvc's RFC 7662 introspection endpoint, and hands the handler
// who the token speaks for.
//
// The service calls POST {URL}/api/auth/introspect/ with its own
// personal access token, one with the introspect scope (`authsvc token
// create --name orders --scope introspect svc-orders` for a service
// account, or POST /api/auth/tokens/), and the caller's token in a form
// body. Then:
//
//   - a live token: the next handler runs, and FromContext returns the
//     token's Info (username, groups, admin, token type, scopes, expiry);
//   - no token, another scheme, a malformed one (refused here without
//     asking, as authsvc would), or one authsvc calls inactive (unknown,
//     expired, revoked): 401 with `WWW-Authenticate: Bearer`;
//   - a personal access token without Config.Scope ("info" by default),
//     or a user outside Config.Group: 403;
//   - authsvc unreachable, slow past Config.Timeout, a 5xx, a reply that
//     is not introspection's, or a refusal of the service's own token
//     (401: revoked or expired; 403: without the introspect scope): 503
//     with `Retry-After: 1`. It fails closed: never an anonymous request.
//
// Error replies are authsvc's shape: {"detail": "…", "code": "…"}. No
// token, the service's or a caller's, is ever logged or put in a reply.
//
// With Config.CacheTTL above 0, a live token's answer is reused for up to
// that long (never past the token's own expiry), keyed by the token's
// SHA-256: a token revoked in authsvc is then still accepted for up to
// CacheTTL by this process. The default, 0, asks authsvc on every request.
//
// The package imports nothing but the standard library, so a service in
// another module may copy its folder (the non-test files), or require
// authsvc with a replace directive pointing at a checkout.
package introspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Info is what authsvc's introspection says of a live token.
type Info struct {
	Username  string
	Groups    []string
	Admin     bool
	TokenType string    // "session" or "pat" (a personal access token)
	Scopes    []string  // a personal access token's scopes; nil for a session
	IssuedAt  time.Time // when the session began or the token was created
	Expires   time.Time // zero when the token does not expire
}

// InGroup reports whether the token's user is in group.
func (i *Info) InGroup(group string) bool { return slices.Contains(i.Groups, group) }

// HasScope reports whether the token is a personal access token with
// scope.
func (i *Info) HasScope(scope string) bool { return slices.Contains(i.Scopes, scope) }

// clone returns a copy of i that shares no slice with it: a handler may
// change its own.
func (i *Info) clone() *Info {
	c := *i
	c.Groups = slices.Clone(i.Groups)
	c.Scopes = slices.Clone(i.Scopes)
	return &c
}

type contextKey struct{}

// FromContext returns the Info that Middleware put in a request's
// context, and whether there is one.
func FromContext(ctx context.Context) (*Info, bool) {
	info, ok := ctx.Value(contextKey{}).(*Info)
	return info, ok
}

// Config says which authsvc to ask and how.
type Config struct {
	// URL is authsvc's base URL, http or https, with a path prefix if
	// authsvc sits under one ("https://sso.example.com/auth").
	URL string
	// Token is the service's own personal access token, with the
	// introspect scope. Keep it out of source code and logs.
	Token string
	// Scope is the scope a personal access token must carry to be
	// accepted (a session carries its user's every right, so passes);
	// default "info", the scope authsvc's own /info and the Django client
	// ask for, so that a token made for something else (say, another
	// service's introspect token) cannot be used as a user's.
	Scope string
	// Group, when set, is a group the token's user must be in (403
	// permission_denied otherwise).
	Group string
	// Timeout bounds one introspection, connecting included; default 2 s.
	Timeout time.Duration
	// CacheTTL is how long a live token's answer is reused; 0 (the
	// default): never. A revoked token is accepted for up to CacheTTL.
	CacheTTL time.Duration
	// CacheSize bounds the cache; default 10000 tokens.
	CacheSize int
	// Client makes the introspection requests; default a client with no
	// proxy that follows no redirect. Timeout applies either way.
	Client *http.Client
	// Logger gets one line for each 503 (never a token); default
	// slog.Default().
	Logger *slog.Logger
}

// Middleware authenticates requests with authsvc. Its methods are safe
// for concurrent use.
type Middleware struct {
	endpoint string
	token    string
	scope    string
	group    string
	timeout  time.Duration
	client   *http.Client
	log      *slog.Logger
	cache    *cache // nil: off
	now      func() time.Time
}

// New returns the Middleware cfg describes, or an error naming what is
// wrong in cfg (never quoting the token).
func New(cfg Config) (*Middleware, error) {
	endpoint, err := endpointOf(cfg.URL)
	if err != nil {
		return nil, err
	}
	switch {
	case !validPAT(cfg.Token):
		return nil, errors.New("introspect: Config.Token is not a personal access token (authsvc_pat_…, its checksum matching)")
	case cfg.Timeout < 0 || cfg.CacheTTL < 0 || cfg.CacheSize < 0:
		return nil, errors.New("introspect: Config.Timeout, CacheTTL and CacheSize cannot be negative")
	}
	m := &Middleware{endpoint: endpoint, token: cfg.Token, scope: cmp.Or(cfg.Scope, "info"), group: cfg.Group,
		timeout: cmp.Or(cfg.Timeout, 2*time.Second), client: cfg.Client, log: cfg.Logger, now: time.Now}
	if m.client == nil {
		m.client = &http.Client{
			// No Proxy: HTTP_PROXY and friends are not for authsvc.
			Transport:     &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if cfg.CacheTTL > 0 {
		m.cache = newCache(cfg.CacheTTL, cmp.Or(cfg.CacheSize, 10000))
	}
	return m, nil
}

// endpointOf returns the introspection URL under base.
func endpointOf(base string) (string, error) {
	u, err := url.Parse(base)
	switch {
	case err != nil:
		return "", fmt.Errorf("introspect: Config.URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return "", fmt.Errorf("introspect: Config.URL %q: want http://host[:port][/prefix] or https://…", base)
	case u.User != nil, u.RawQuery != "", u.Fragment != "":
		return "", fmt.Errorf("introspect: Config.URL %q: credentials, a query or a fragment are not supported", base)
	}
	return strings.TrimSuffix(base, "/") + "/api/auth/introspect/", nil
}

// Wrap returns next behind authentication: next runs only for a request
// with a live token that passes Config's Scope and Group, and finds its
// Info with FromContext.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, fail := m.authenticate(r)
		if fail != nil {
			fail.write(w, m.scope)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), contextKey{}, info)))
	})
}

// authenticate returns the Info of r's token, or the refusal to answer.
func (m *Middleware) authenticate(r *http.Request) (*Info, *refusal) {
	token, err := credentials(r.Header)
	switch {
	case errors.Is(err, errNoCredentials):
		return nil, refuseNoCredentials
	case err != nil:
		return nil, refuseInvalid
	}
	info, err := m.Introspect(r.Context(), token)
	switch {
	case errors.Is(err, ErrInactive):
		return nil, refuseInvalid
	case err != nil:
		m.logUnavailable(r, err)
		return nil, refuseUnavailable
	case info.TokenType == "pat" && !info.HasScope(m.scope):
		return nil, refuseScope
	case m.group != "" && !info.InGroup(m.group):
		return nil, refuseGroup
	}
	return info, nil
}

// logUnavailable logs why a request gets 503: an error for a refusal of
// the service's own token (an operator must act), a warning otherwise,
// nothing when the caller went away. err names no token (see ask).
func (m *Middleware) logUnavailable(r *http.Request, err error) {
	ctx := r.Context()
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, ErrServiceToken):
		m.log.ErrorContext(ctx, "authsvc refused this service's token; answering 503", "err", err,
			"method", r.Method, "path", r.URL.Path)
	default:
		m.log.WarnContext(ctx, "authsvc could not check a token; answering 503", "err", err,
			"method", r.Method, "path", r.URL.Path)
	}
}
