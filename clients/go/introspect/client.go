package introspect

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

var (
	// ErrInactive is Introspect's answer for a token authsvc calls
	// inactive (unknown, expired, revoked) or that is malformed.
	ErrInactive = errors.New("introspect: the token is not active")
	// ErrServiceToken is wrapped by Introspect's error when authsvc
	// refuses the service's own token (Config.Token): revoked, expired, or
	// without the introspect scope. A misconfiguration, not the caller's.
	ErrServiceToken = errors.New("authsvc refused the service's introspection token (Config.Token: live, with the introspect scope?)")
)

// maxReply bounds an introspection reply: authsvc's is a few hundred
// bytes; anything much bigger is not authsvc.
const maxReply = 64 << 10

// reply is RFC 7662's answer as authsvc gives it (API.md, "POST
// /api/auth/introspect/").
type reply struct {
	Active    *bool    `json:"active"`
	TokenType string   `json:"token_type"`
	Username  string   `json:"username"`
	IAT       int64    `json:"iat"`
	Exp       *int64   `json:"exp"`
	Admin     bool     `json:"admin"`
	Groups    []string `json:"groups"`
	Scope     string   `json:"scope"`
}

// Introspect returns the Info of token, from authsvc or, when the cache is
// on, from an answer of up to Config.CacheTTL ago: ErrInactive when
// authsvc calls it inactive, or at once when it has neither a session's
// form nor a personal access token's with its checksum matching (authsvc
// would refuse it without a look-up, so junk costs it nothing); another
// error when authsvc cannot say. Wrap calls it for each request; a
// service may call it for a token that comes another way.
func (m *Middleware) Introspect(ctx context.Context, token string) (*Info, error) {
	if !wellFormed(token) {
		return nil, ErrInactive
	}
	var key [sha256.Size]byte
	if m.cache != nil {
		key = sha256.Sum256([]byte(token))
		if info, ok := m.cache.get(key, m.now()); ok {
			return info.clone(), nil
		}
	}
	info, err := m.ask(ctx, token)
	if err != nil {
		return nil, err
	}
	if m.cache != nil {
		m.cache.put(key, info, m.now())
	}
	return info.clone(), nil
}

// ask posts token to authsvc's introspection endpoint and decides on the
// answer. Its errors name authsvc's address and status, never a token.
func (m *Middleware) ask(ctx context.Context, token string) (*Info, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	body := strings.NewReader(url.Values{"token": {token}}.Encode())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.endpoint, body)
	if err != nil {
		return nil, fmt.Errorf("introspect: %v", err) // New checked the URL
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		// A *url.Error: the method, the endpoint and the cause; the
		// request's headers and body are not in it.
		return nil, fmt.Errorf("introspect: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("introspect: reading authsvc's reply: %w", err)
	case len(data) > maxReply:
		return nil, fmt.Errorf("introspect: authsvc's reply is over %d bytes", maxReply)
	}
	return decide(resp.StatusCode, data)
}

// decide returns the Info of a 200 reply for a live token, ErrInactive
// for an inactive one, and an error for anything else.
func decide(status int, data []byte) (*Info, error) {
	if status != http.StatusOK {
		var e struct{ Code string }
		json.Unmarshal(data, &e) // best effort: the code is only for the log
		if status == http.StatusUnauthorized || status == http.StatusForbidden {
			return nil, fmt.Errorf("introspect: %w: %d %s", ErrServiceToken, status, e.Code)
		}
		return nil, fmt.Errorf("introspect: authsvc answered %d %s", status, e.Code)
	}
	var r reply
	if err := json.Unmarshal(data, &r); err != nil || r.Active == nil {
		return nil, errors.New("introspect: a 200 reply that is not introspection's")
	}
	if !*r.Active {
		return nil, ErrInactive
	}
	if r.Username == "" || r.TokenType != "session" && r.TokenType != "pat" {
		return nil, errors.New("introspect: an active reply without username or token_type")
	}
	info := &Info{Username: r.Username, Groups: r.Groups, Admin: r.Admin, TokenType: r.TokenType,
		IssuedAt: time.Unix(r.IAT, 0)}
	if info.Groups == nil {
		info.Groups = []string{}
	}
	if r.Scope != "" {
		info.Scopes = strings.Fields(r.Scope)
	}
	if r.Exp != nil {
		info.Expires = time.Unix(*r.Exp, 0)
	}
	return info, nil
}
