package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// decodeObject decodes a JSON request body into the struct v points to,
// as invalid_request errors that name the field at fault and never quote
// the body (it holds passwords).
func decodeObject(body []byte, v any) error {
	err := json.Unmarshal(body, v)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return invalidRequest(typeErr.Field + " must be a string.")
	case errors.As(err, &typeErr):
		return invalidRequest("Body must be a JSON object.")
	}
	return invalidRequest("Body is not valid JSON.")
}

// handleInfo answers with the token's user, or, for admins, any user.
func handleInfo(log *slog.Logger, tc tokenCheck) http.Handler {
	// Header values shared by every reply (net/http never writes into them):
	// the hot path allocates no header.
	noStore, varyAuth, contentType := []string{"no-store"}, []string{"Authorization"}, []string{"application/json"}
	// Reply buffers, reused: Write copies the body into the connection's buffer.
	bodies := sync.Pool{New: func() any { return new([]byte) }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := tc.authenticate(r)
		var target *users.Account
		if err == nil {
			target, err = tc.target(r, p)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		h := w.Header()
		h["Cache-Control"] = noStore
		if _, ok := h["Vary"]; ok {
			h.Add("Vary", "Authorization") // after CORS's Origin
		} else {
			h["Vary"] = varyAuth
		}
		h["Content-Type"] = contentType
		buf := bodies.Get().(*[]byte)
		body, length := target.InfoReply(*buf)
		h["Content-Length"] = length
		w.WriteHeader(http.StatusOK)
		w.Write(body)
		*buf = body
		bodies.Put(buf)
	})
}

// usernameParam returns the value of the query's username parameter, ""
// when absent, and invalid_request when it is repeated or badly escaped.
func usernameParam(rawQuery string) (string, error) {
	var value string
	found := false
	for rawQuery != "" {
		var part string
		part, rawQuery, _ = strings.Cut(rawQuery, "&")
		key, val, _ := strings.Cut(part, "=")
		if key != "username" {
			if k, err := url.QueryUnescape(key); err != nil || k != "username" {
				continue
			}
		}
		if found {
			return "", invalidRequest("username is repeated.")
		}
		found = true
		if strings.ContainsAny(val, "%+") {
			v, err := url.QueryUnescape(val)
			if err != nil {
				return "", invalidRequest("username is badly escaped.")
			}
			val = v
		}
		value = val
	}
	return value, nil
}

// handleLogout revokes the presented token.
func handleLogout(log *slog.Logger, tc tokenCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := tc.authenticate(r)
		if err == nil {
			err = tc.store.Revoke(r.Context(), p.digest)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		tc.metrics.Revoked(revokedLogout, 1)
		w.WriteHeader(http.StatusNoContent)
	})
}

// handleLogoutAll revokes every token of the presented token's user.
func handleLogoutAll(log *slog.Logger, tc tokenCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := tc.authenticate(r)
		n := 0
		if err == nil {
			n, err = tc.store.RevokeUser(r.Context(), p.session.Username)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		tc.metrics.Revoked(revokedLogoutAll, n)
		w.WriteHeader(http.StatusNoContent)
	})
}

// statusReply is the body of /healthz and /readyz.
type statusReply struct {
	Status string `json:"status"`
}

// handleHealthz reports that the process serves HTTP.
func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		encode(w, http.StatusOK, statusReply{Status: "ok"})
	})
}

// handleReadyz reports whether the token store and the user directory
// answer.
func handleReadyz(log *slog.Logger, store tokens.Store, dir users.Directory) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := store.Ping(r.Context())
		if err == nil {
			err = dir.Ping(r.Context())
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		encode(w, http.StatusOK, statusReply{Status: "ready"})
	})
}

// handleNotFound answers every path no route claims.
func handleNotFound(log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, log, errNotFound)
	})
}
