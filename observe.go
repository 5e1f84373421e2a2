package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxRequestIDLen bounds an incoming X-Request-Id (API.md: 1–128 characters).
const maxRequestIDLen = 128

// validRequestID reports whether id may be kept as it came: 1–128
// characters of A-Z a-z 0-9 . _ -.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// requestIDs generates request ids: a random per-process prefix and a
// counter, unique without a crypto/rand read per request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:])
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (g *requestIDs) next() string {
	return g.prefix + strconv.FormatUint(g.n.Add(1), 10)
}

type requestIDKey struct{}

// requestLogHandler adds the request id of the record's context to every
// log line, so each line of a request names it.
type requestLogHandler struct{ slog.Handler }

func (h requestLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestLogHandler) WithGroup(name string) slog.Handler {
	return requestLogHandler{h.Handler.WithGroup(name)}
}

// statusRecorder remembers the status and error code a handler wrote, for
// the access log and the metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
	code   string // the error code writeError sent, if any
}

func (r *statusRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(p)
}

func (r *statusRecorder) setErrorCode(code string) { r.code = code }

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// observe wraps the mux: it gives every request an id (kept from a
// well-formed X-Request-Id, else generated) and echoes it, then logs one
// access line — method, path (never the query or a header, so never a
// token), status, duration, client — and records the route's metrics.
func observe(log *slog.Logger, m *metrics, next http.Handler) http.Handler {
	ids := newRequestIDs()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = ids.next()
		}
		w.Header()["X-Request-Id"] = []string{id}
		if len(r.TransferEncoding) > 0 {
			// net/http keeps a connection open after a request that had both
			// Transfer-Encoding and Content-Length; RFC 9112 §6.1 says close,
			// lest a proxy framing by Content-Length let a request be smuggled.
			w.Header()["Connection"] = []string{"close"}
		}
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		d := time.Since(start)
		m.observe(routeLabel(r.Pattern), rec.status, rec.code, d) // the mux set r.Pattern
		log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", rec.status),
			slog.Duration("duration", d),
			slog.String("client", r.RemoteAddr),
		)
	})
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
