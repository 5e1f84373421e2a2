package main

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// An accessLog writes each request's access line: method, path (never the
// query or a header, so never a token), status, duration, client and
// request id.
type accessLog struct {
	log *slog.Logger
	// out, when set, is where log's handler (newLogger's, in format json or
	// text) writes: a line whose values need no quoting or escaping is
	// formatted here, byte for byte as that handler would, and written
	// straight to out. The handler's generic path cost 4–7 % of /info.
	out  io.Writer
	json bool
	bufs sync.Pool // of *[]byte
}

// newAccessLog returns the access log that writes to log; out and format,
// when known, are log's destination and newLogger's format.
func newAccessLog(log *slog.Logger, format string, out io.Writer) *accessLog {
	a := &accessLog{log: log, out: out, json: format == "json"}
	a.bufs.New = func() any { b := make([]byte, 0, 256); return &b }
	return a
}

// write logs r's access line; a nil log writes nothing (--access-log=false).
func (a *accessLog) write(r *http.Request, rec *statusRecorder, end time.Time, d time.Duration) {
	if a == nil {
		return
	}
	if a.out != nil && plainLogValue(r.Method) && plainLogValue(r.URL.Path) && plainLogValue(r.RemoteAddr) && plainLogValue(rec.id[0]) {
		bp := a.bufs.Get().(*[]byte)
		line := appendAccessLine((*bp)[:0], a.json, r.Method, r.URL.Path, rec.status, d, r.RemoteAddr, rec.id[0], end)
		a.out.Write(line)
		*bp = line
		a.bufs.Put(bp)
		return
	}
	h := a.log.Handler()
	if !h.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
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

// plainLogValue reports whether s is written as it is by both slog
// handlers: 1 or more printable ASCII bytes other than space, '=', '"' and
// '\' (the text handler quotes the first two, JSON escapes the last two).
func plainLogValue(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '=' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendAccessLine appends the access line that slog's JSON or text handler
// would write for these plain values (plainLogValue).
func appendAccessLine(b []byte, json bool, method, path string, status int, d time.Duration, client, id string, end time.Time) []byte {
	end = end.Round(0) // as slog: no monotonic reading
	if json {
		b = append(b, `{"time":"`...)
		b = end.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","level":"INFO","msg":"request","method":"`...)
		b = append(b, method...)
		b = append(b, `","path":"`...)
		b = append(b, path...)
		b = append(b, `","status":`...)
		b = strconv.AppendInt(b, int64(status), 10)
		b = append(b, `,"duration":`...)
		b = strconv.AppendInt(b, int64(d), 10)
		b = append(b, `,"client":"`...)
		b = append(b, client...)
		b = append(b, `","request_id":"`...)
		b = append(b, id...)
		return append(b, "\"}\n"...)
	}
	b = append(b, "time="...)
	b = appendRFC3339Millis(b, end)
	b = append(b, " level=INFO msg=request method="...)
	b = append(b, method...)
	b = append(b, " path="...)
	b = append(b, path...)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, " duration="...)
	b = append(b, d.String()...)
	b = append(b, " client="...)
	b = append(b, client...)
	b = append(b, " request_id="...)
	b = append(b, id...)
	return append(b, '\n')
}

// appendRFC3339Millis appends t as slog's text handler writes times:
// RFC 3339 with exactly three digits of milliseconds.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	// RFC3339Nano trims trailing zeros: a tenth of a millisecond keeps four digits, then the fourth is dropped.
	b = t.Truncate(time.Millisecond).Add(time.Millisecond/10).AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...)
}
