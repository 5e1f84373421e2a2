package httpapi

import "net/http"

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
