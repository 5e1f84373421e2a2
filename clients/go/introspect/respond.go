package introspect

import (
	"net/http"
	"strconv"
)

// A refusal is the middleware's answer to a request it does not let
// through, in authsvc's error shape.
type refusal struct {
	status    int
	code      string
	detail    string
	challenge string // RFC 6750's error for WWW-Authenticate, if any
}

var (
	refuseNoCredentials = &refusal{status: http.StatusUnauthorized, code: "not_authenticated",
		detail: "Authentication credentials were not provided."}
	refuseInvalid = &refusal{status: http.StatusUnauthorized, code: "invalid_token",
		detail: "Invalid token.", challenge: "invalid_token"}
	refuseScope = &refusal{status: http.StatusForbidden, code: "insufficient_scope",
		detail: "This token's scopes do not cover this service.", challenge: "insufficient_scope"}
	refuseGroup = &refusal{status: http.StatusForbidden, code: "permission_denied",
		detail: "You do not have permission to perform this action."}
	refuseUnavailable = &refusal{status: http.StatusServiceUnavailable, code: "unavailable",
		detail: "The authentication service is unavailable; try again later."}
)

// write sends the refusal; scope is the one a personal access token
// needs, named in an insufficient_scope challenge.
func (f *refusal) write(w http.ResponseWriter, scope string) {
	h := w.Header()
	switch {
	case f.challenge == "insufficient_scope":
		h.Set("WWW-Authenticate", `Bearer realm="authsvc", error="insufficient_scope", scope=`+strconv.Quote(scope))
	case f.challenge != "":
		h.Set("WWW-Authenticate", `Bearer realm="authsvc", error="`+f.challenge+`"`)
	case f.status == http.StatusUnauthorized:
		h.Set("WWW-Authenticate", `Bearer realm="authsvc"`)
	case f.status == http.StatusServiceUnavailable:
		h.Set("Retry-After", "1")
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(f.status)
	w.Write([]byte(`{"detail":` + strconv.Quote(f.detail) + `,"code":"` + f.code + `"}` + "\n"))
}
