package main

import (
	"log/slog"
	"net/http"
	"time"
)

// logAccess writes a request's access line to log: method, path (never the
// query or a header, so never a token), status, duration, client and
// request id. A nil log writes nothing (--access-log=false).
func logAccess(log *slog.Logger, r *http.Request, rec *statusRecorder, end time.Time, d time.Duration) {
	if log == nil {
		return
	}
	h := log.Handler()
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
