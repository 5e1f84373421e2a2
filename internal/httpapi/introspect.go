package httpapi

import (
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// maxIntrospectBody bounds an introspection request (API.md: 16 KiB).
const maxIntrospectBody = 16 << 10

// introspectFloor is the least time an introspection's answer takes,
// counted from when the token asked about is known: a live token's, an
// unknown one's (a miss, and a read of the directory again), an expired
// one's and a malformed one's all take it, so that the time tells
// nothing the answer does not. It is a sleep, no CPU; it is well above
// what each path costs on a users file or a warm PostgreSQL cache.
const introspectFloor = time.Millisecond

// introspectReply is RFC 7662's answer for a live token. An inactive
// token's is inactiveReply alone: nothing about it is told.
type introspectReply struct {
	Active    bool     `json:"active"`
	TokenType string   `json:"token_type"`
	Username  string   `json:"username"`
	Sub       string   `json:"sub"`
	IAT       int64    `json:"iat"`
	Exp       *int64   `json:"exp,omitempty"`
	Admin     bool     `json:"admin"`
	Groups    []string `json:"groups"`
	Scope     string   `json:"scope,omitempty"`
}

// inactiveReply is the whole answer for any token that is not live.
var inactiveReply = []byte(`{"active":false}`)

// handleIntrospect answers RFC 7662 introspection: the caller presents a
// personal access token with the introspect scope (a session, or a
// token without it: 403 insufficient_scope), and the body names the
// token asked about, form-encoded or as JSON. A live token (session or
// personal access token) is described; any other is {"active": false},
// whatever is wrong with it, in the same time as a live one
// (introspectFloor): the store and the directory are read for a
// malformed token too. The
// introspected token's use is recorded, as on info; its life is not
// extended.
func handleIntrospect(log *slog.Logger, tc tokenCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := tc.authenticateScope(r, users.ScopeIntrospect, false)
		var token string
		if err == nil {
			token, err = readIntrospectBody(w, r)
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		asked := time.Now()
		digest, kind, err := tokens.ParseToken(token)
		var p principal
		if err != nil {
			// Malformed: the same reads as a live token's, found empty.
			digest = sha256.Sum256([]byte(token))
			tc.store.Lookup(r.Context(), digest, tc.now())
			users.LookupAccessToken(r.Context(), tc.users, digest)
			err = errInvalidToken
		} else if p, err = tc.check(r.Context(), digest, kind); err == nil && p.enrolmentOnly() {
			// A token that may only enrol a second factor authenticates
			// its user to no service: inactive, as RFC 7662 says of a
			// token the resource must not accept.
			err = errInvalidToken
		}
		tc.metrics.tokenChecked(kind, err)
		users.HoldUntil(introspectFloor, time.Since(asked))
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Pragma", "no-cache")
		switch {
		case errors.Is(err, errInvalidToken):
			writeJSON(w, http.StatusOK, inactiveReply)
		case err != nil:
			writeError(w, r, log, err) // the store or directory cannot say: 503, never a verdict
		default:
			encode(w, http.StatusOK, describe(p))
		}
	})
}

// describe returns the introspection answer for a live principal.
func describe(p principal) introspectReply {
	info := p.user.Info()
	reply := introspectReply{Active: true, TokenType: p.kind().String(), Username: info.Username, Sub: info.Username,
		Admin: info.Admin, Groups: info.Groups}
	if p.pat != nil {
		exp := p.pat.ExpiresAt.Unix()
		reply.IAT, reply.Exp, reply.Scope = p.pat.CreatedAt.Unix(), &exp, strings.Join(p.pat.Scopes, " ") // RFC 7662: space-separated
		return reply
	}
	reply.IAT = p.session.IssuedAt.Unix()
	if !p.session.ExpiresAt.IsZero() {
		exp := p.session.ExpiresAt.Unix()
		reply.Exp = &exp
	}
	return reply
}

// readIntrospectBody returns the token an introspection body names: form
// (RFC 7662 §2.1) or JSON; 415 for another media type, 413 over the
// limit, 400 without a token.
func readIntrospectBody(w http.ResponseWriter, r *http.Request) (string, error) {
	mediaType, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/json" && mediaType != "application/x-www-form-urlencoded" {
		return "", errIntrospectMedia
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxIntrospectBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return "", errTooLarge
	case err != nil:
		return "", invalidRequest("Could not read the request body.")
	}
	var token string
	if mediaType == "application/json" {
		var req struct {
			Token string `json:"token"`
		}
		if err := decodeObject(body, &req); err != nil {
			return "", err
		}
		token = req.Token
	} else {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return "", invalidRequest("Body is not a valid form.")
		}
		if len(form["token"]) > 1 {
			return "", invalidRequest("token is repeated.")
		}
		token = form.Get("token")
	}
	if token == "" {
		return "", invalidRequest("token is required.")
	}
	return token, nil
}

// errIntrospectMedia: an introspection body neither form nor JSON.
var errIntrospectMedia = &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_media_type",
	detail: "Content-Type must be application/x-www-form-urlencoded or application/json."}
