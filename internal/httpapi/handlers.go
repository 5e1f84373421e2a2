package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// decodeObject decodes a JSON request body into the struct v points to,
// as invalid_request errors that name the field at fault and never quote
// the body (it holds passwords). A body that is not valid UTF-8, or that
// escapes a lone UTF-16 surrogate, is refused: encoding/json would turn
// either into U+FFFD, so that two different passwords became one.
func decodeObject(body []byte, v any) error {
	if !utf8.Valid(body) || hasLoneSurrogate(body) {
		return invalidRequest("Body is not valid UTF-8.")
	}
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
		p, err := tc.authenticateScope(r, users.ScopeInfo, true)
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

// hasLoneSurrogate reports whether a JSON string in body escapes half of a
// UTF-16 surrogate pair without the other half (\ud800 alone, or \udc00
// first), which encoding/json decodes as U+FFFD. It reads body as JSON
// text; what is not JSON it leaves to the decoder to refuse.
func hasLoneSurrogate(body []byte) bool {
	inString := false
	pendingHigh := false // the last escape was a high surrogate
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch {
		case c == '"':
			if pendingHigh {
				return true
			}
			inString = false
		case c == '\\' && i+1 < len(body) && body[i+1] == 'u' && i+5 < len(body):
			r, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
			if err != nil {
				return false // not JSON: the decoder refuses it
			}
			switch {
			case 0xd800 <= r && r < 0xdc00:
				if pendingHigh {
					return true
				}
				pendingHigh = true
			case 0xdc00 <= r && r < 0xe000:
				if !pendingHigh {
					return true
				}
				pendingHigh = false
			default:
				if pendingHigh {
					return true
				}
			}
			i += 5
		case c == '\\':
			if pendingHigh {
				return true
			}
			i++ // the escaped character, whatever it is
		default:
			if pendingHigh {
				return true
			}
		}
	}
	return false
}
