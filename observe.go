package main

import (
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
	var buf [40]byte // prefix (13) + a uint64 (at most 20): built on the stack, one allocation for the string
	return string(strconv.AppendUint(append(buf[:0], g.prefix...), g.n.Add(1), 10))
}

// statusRecorder carries a request's id to the handlers and remembers the
// status and error code they wrote, for the access log and the metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
	code   string    // the error code writeError sent, if any
	id     [1]string // the request id; also the X-Request-Id header's value slice
}

func (r *statusRecorder) requestID() string { return r.id[0] }

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

// requestID returns the id of the request w answers, for its log lines.
func requestID(w http.ResponseWriter) string {
	if rec, ok := w.(interface{ requestID() string }); ok {
		return rec.requestID()
	}
	return ""
}

// observe wraps the mux: it gives every request an id (kept from a
// well-formed X-Request-Id, else generated) and echoes it, then logs one
// access line — method, path (never the query or a header, so never a
// token), status, duration, client, request id — and records the route's
// metrics. Handlers find the id with requestID(w).
// A nil log writes no access lines.
func observe(log *slog.Logger, m *metrics, next http.Handler) http.Handler {
	ids := newRequestIDs()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		rec.id[0] = r.Header.Get("X-Request-Id")
		if !validRequestID(rec.id[0]) {
			rec.id[0] = ids.next()
		}
		w.Header()["X-Request-Id"] = rec.id[:]
		if len(r.TransferEncoding) > 0 {
			// net/http keeps a connection open after a request that had both
			// Transfer-Encoding and Content-Length; RFC 9112 §6.1 says close,
			// lest a proxy framing by Content-Length let a request be smuggled.
			w.Header()["Connection"] = []string{"close"}
		}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		end := time.Now()
		d := end.Sub(start)
		m.observe(routeLabel(r.Pattern), rec.status, rec.code, d) // the mux set r.Pattern
		if log == nil {
			return
		}
		if h := log.Handler(); h.Enabled(r.Context(), slog.LevelInfo) {
			// A record without a caller's pc: runtime.Callers costs more than the rest.
			line := slog.NewRecord(end, slog.LevelInfo, "request", 0)
			line.AddAttrs(
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", rec.status),
				slog.Duration("duration", d),
				slog.String("client", r.RemoteAddr),
				slog.String("request_id", rec.id[0]),
			)
			h.Handle(r.Context(), line)
		}
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
