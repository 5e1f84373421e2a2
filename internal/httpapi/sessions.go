package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// SessionReply is one session as GET /api/auth/sessions/ shows it.
type SessionReply struct {
	ID         tokens.SessionID `json:"id"`
	CreatedAt  time.Time        `json:"created_at"`
	LastUsedAt time.Time        `json:"last_used_at"`
	ExpiresAt  *time.Time       `json:"expires_at"`
	Client     string           `json:"client"`
	UserAgent  string           `json:"user_agent"`
	Current    bool             `json:"current"`
}

// sessionsReply is the body of GET /api/auth/sessions/.
type sessionsReply struct {
	Sessions []SessionReply `json:"sessions"`
}

// handleSessions lists the live sessions of the token's user or, for
// admins, of the user ?username= names; current marks the presenting token.
func handleSessions(log *slog.Logger, tc tokenCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, target, err := tc.authenticateTarget(r)
		var listed []tokens.ListedSession
		if err == nil {
			listed, err = tc.store.List(r.Context(), target.Username(), tc.now())
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		reply := sessionsReply{Sessions: make([]SessionReply, 0, len(listed))}
		for _, ls := range listed {
			if u, _ := users.SessionUser(r.Context(), tc.users, ls.Username, ls.IssuedAt, ls.Stamp); u == nil || tc.policy.idleExpired(ls.Session, tc.now()) {
				continue // dead, though not yet removed
			}
			s := SessionReply{
				ID:         ls.ID,
				CreatedAt:  ls.IssuedAt.UTC().Truncate(time.Second),
				LastUsedAt: ls.LastUsedAt.UTC().Truncate(time.Second),
				Client:     ls.Client,
				UserAgent:  ls.UserAgent,
				Current:    ls.Digest == p.digest,
			}
			if !ls.ExpiresAt.IsZero() {
				expires := ls.ExpiresAt.UTC().Truncate(time.Second) // API.md: to the second
				s.ExpiresAt = &expires
			}
			reply.Sessions = append(reply.Sessions, s)
		}
		w.Header().Set("Cache-Control", "no-store")
		encode(w, http.StatusOK, reply)
	})
}

// handleRevokeSession ends the session {id} of the token's user or, for
// admins, of the user ?username= names: 204, or 404 when no live session
// has that id. An admin ending another user's session gets an audit line.
func handleRevokeSession(log *slog.Logger, tc tokenCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, target, err := tc.authenticateTarget(r)
		var id tokens.SessionID
		if err == nil {
			if id, err = tokens.ParseSessionID(r.PathValue("id")); err != nil {
				err = errNotFound // no session has a malformed id
			}
		}
		found := false
		if err == nil {
			found, err = tc.store.RevokeID(r.Context(), target.Username(), id)
		}
		if err == nil && !found {
			err = errNotFound
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		tc.metrics.Revoked(revokedByID, 1)
		if target != p.user {
			log.LogAttrs(r.Context(), slog.LevelInfo, "session revoked", slog.String("by", p.user.Username()),
				slog.String("username", target.Username()), slog.String("session", id.String()),
				slog.String("request_id", requestID(w)))
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
