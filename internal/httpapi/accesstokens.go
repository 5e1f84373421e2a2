package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// Personal access tokens' limits (API.md).
const (
	// DefaultPATMaxTTL is --pat-max-ttl's default: 366 days.
	DefaultPATMaxTTL = 8784 * time.Hour
	// patTouchLag is how stale a token's recorded last use may be before
	// a use records it again; with the writes every PATUseFlush and a
	// reload's 5 s, last_used_at lags a real use by well under API.md's
	// 60 s, and a busy token costs the directory one write per lag.
	patTouchLag = 30 * time.Second
	// PATUseFlush is how often the recorded uses are written.
	PATUseFlush = 15 * time.Second
)

// patMaxTTL returns the longest a personal access token may live.
func (p TokenPolicy) patMaxTTL() time.Duration { return setOr(p.PATMaxTTL, DefaultPATMaxTTL) }

// tokenCreateRequest is the body of POST /api/auth/tokens/. Scopes is
// raw so that a wrong type gets its own message; nil: the default.
type tokenCreateRequest struct {
	Name      string          `json:"name"`
	Scopes    json.RawMessage `json:"scopes"`
	ExpiresAt *string         `json:"expires_at"`
	Password  string          `json:"password"`
	Code      string          `json:"code"`
}

// A tokenSpec is what a create request asks for, checked.
type tokenSpec struct {
	name      string
	scopes    []string
	expiresAt time.Time
	password  string
	code      string
}

// decodeTokenCreate parses a create body at now, with API.md's rules for
// each field (400 invalid_request naming the field), never quoting the
// password.
func decodeTokenCreate(body []byte, now time.Time, maxTTL time.Duration) (tokenSpec, error) {
	var req tokenCreateRequest
	if err := decodeObject(body, &req); err != nil {
		return tokenSpec{}, err
	}
	spec := tokenSpec{name: req.Name, scopes: []string{users.ScopeInfo}, password: req.Password, code: req.Code,
		expiresAt: now.Add(min(users.DefaultAccessTokenTTL, maxTTL))}
	switch {
	case req.Password == "":
		return tokenSpec{}, invalidRequest("password is required.")
	case len(req.Password) > 1024:
		return tokenSpec{}, invalidRequest("password is longer than 1024 bytes.")
	case len(req.Code) > maxCodeLen:
		return tokenSpec{}, invalidRequest("code is too long.")
	}
	if err := users.CheckAccessTokenName(req.Name); err != nil {
		return tokenSpec{}, invalidRequest("name: " + err.Error() + "; want 1-100 characters without control characters.")
	}
	if len(req.Scopes) > 0 && string(req.Scopes) != "null" {
		if err := json.Unmarshal(req.Scopes, &spec.scopes); err != nil {
			return tokenSpec{}, invalidRequest("scopes must be a list of strings.")
		}
		if err := users.CheckScopes(spec.scopes); err != nil {
			return tokenSpec{}, invalidRequest("scopes: " + err.Error() + ".")
		}
	}
	if req.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339, *req.ExpiresAt)
		switch {
		case err != nil:
			return tokenSpec{}, invalidRequest("expires_at must be an RFC 3339 time, such as 2027-03-01T00:00:00Z.")
		case !t.After(now):
			return tokenSpec{}, invalidRequest("expires_at must be in the future.")
		case t.Sub(now) > maxTTL:
			return tokenSpec{}, invalidRequest("expires_at is further away than this server allows (" + maxTTL.String() + ").")
		}
		spec.expiresAt = t
	}
	spec.expiresAt = spec.expiresAt.UTC().Truncate(time.Second)
	if !spec.expiresAt.After(now) {
		return tokenSpec{}, invalidRequest("expires_at must be in the future.")
	}
	return spec, nil
}

// tokenReply is a personal access token in a reply: the create reply
// carries the token itself (Token), and no other reply ever does.
type tokenReply struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Token      string     `json:"token,omitempty"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  time.Time  `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	Prefix     string     `json:"prefix,omitempty"`
}

// replyOf returns t as a reply shows it, with its last use as lastUsed
// (zero: none).
func replyOf(t *users.AccessToken, lastUsed time.Time) tokenReply {
	r := tokenReply{ID: t.ID, Name: t.Name, Scopes: slices.Clone(t.Scopes), CreatedAt: t.CreatedAt.UTC().Truncate(time.Second),
		ExpiresAt: t.ExpiresAt.UTC().Truncate(time.Second)}
	if !lastUsed.IsZero() {
		at := lastUsed.UTC().Truncate(time.Second)
		r.LastUsedAt = &at
	}
	return r
}

// handleTokenCreate mints a personal access token, in API.md's order: a
// session (401; a personal access token: 403), the body (415, 413, 400),
// the admin scope (403), then the password and, for a user with a second
// factor, a code, checked as on a password change (429, 503, 401, 401
// mfa_required without an mfa_token), then the name (409). Every request
// gets one audit line.
func handleTokenCreate(log *slog.Logger, tc tokenCheck, gt gate) http.Handler {
	const event = "token create"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := tc.authenticate(r)
		if err == nil && tc.mfaMissing(p.user) {
			// A session from before the policy is a full one, but mints
			// nothing its user could not mint at a login now.
			err = errMintEnrollmentRequired
		}
		var body []byte
		if err == nil {
			body, err = readJSONBody(w, r)
		}
		var spec tokenSpec
		if err == nil {
			spec, err = decodeTokenCreate(body, tc.now(), tc.policy.patMaxTTL())
		}
		if err == nil && slices.Contains(spec.scopes, users.ScopeAdmin) && !p.user.Admin() {
			err = errPermissionDenied
		}
		if err != nil {
			username := ""
			if p.user != nil {
				username = p.user.Username()
			}
			gt.audit(r.Context(), gt.client(w, r), event, username, err)
			writeError(w, r, log, err)
			return
		}
		a := gt.attempt(w, r, p.user.Username())
		err = gt.logins.Prove(a, spec.password, spec.code)
		var reply tokenReply
		if err == nil {
			reply, err = createToken(r.Context(), tc, p.user.Username(), spec)
		}
		var minted []slog.Attr
		if err == nil {
			minted = []slog.Attr{slog.String("token_id", reply.ID), slog.String("scopes", strings.Join(reply.Scopes, " "))}
		}
		a.Release()
		gt.auditAttempt(r.Context(), gt.client(w, r), event, p.user.Username(), err, minted...)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		encode(w, http.StatusCreated, reply)
	})
}

// errMintEnrollmentRequired: a session of a user whom --require-mfa
// covers and who has no second factor asks for a personal access token,
// whenever the session was issued (login.ErrEnrolmentRequired).
var errMintEnrollmentRequired = &apiError{status: http.StatusForbidden, code: "mfa_enrollment_required",
	detail: "A second factor is required: enrol one (POST /api/auth/mfa/totp/, then confirm) before minting a personal access token."}

// errCodeMissing: a proof without the code of the user's second factor
// (a login.SecondFactorError without an mfa_token).
var errCodeMissing = &apiError{status: http.StatusUnauthorized, code: "mfa_required", detail: "A second factor is required: send a code of it as code."}

// createToken makes a token of spec for username and stores its digest.
func createToken(ctx context.Context, tc tokenCheck, username string, spec tokenSpec) (tokenReply, error) {
	token, t := users.MintAccessToken(spec.name, spec.scopes, tc.now(), spec.expiresAt)
	if err := users.CreateAccessToken(ctx, tc.users, username, t); err != nil {
		return tokenReply{}, err
	}
	reply := replyOf(&t, time.Time{})
	reply.Token = token
	return reply, nil
}

// tokensReply is the body of GET /api/auth/tokens/.
type tokensReply struct {
	Tokens []tokenReply `json:"tokens"`
}

// handleTokenList lists the live personal access tokens of the session's
// user or, for admins, of the user ?username= names, newest first.
func handleTokenList(log *slog.Logger, tc tokenCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, target, err := tc.authenticateTarget(r)
		var list []users.AccessToken
		if err == nil {
			list, err = users.AccessTokens(r.Context(), tc.users, target.Username())
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		reply := tokensReply{Tokens: []tokenReply{}}
		for _, t := range users.LiveAccessTokens(list, tc.now()) {
			x := replyOf(&t, users.Later(t.LastUsedAt, tc.uses.lastUse(target.Username(), t.ID)))
			x.Prefix = t.Prefix
			reply.Tokens = append(reply.Tokens, x)
		}
		w.Header().Set("Cache-Control", "no-store")
		encode(w, http.StatusOK, reply)
	})
}

// handleTokenRevoke revokes the personal access token {id} of the
// session's user or, for admins, of the user ?username= names: 204, or
// 404 when that user has no live token of that id. Every revoke gets an
// audit line.
func handleTokenRevoke(log *slog.Logger, tc tokenCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, target, err := tc.authenticateTarget(r)
		id := r.PathValue("id")
		var gone users.AccessToken
		if err == nil {
			gone, err = users.RevokeAccessToken(r.Context(), tc.users, target.Username(), id, tc.now())
		}
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		log.LogAttrs(r.Context(), slog.LevelInfo, "token revoke", slog.String("outcome", "success"),
			slog.String("by", p.user.Username()), slog.String("username", target.Username()),
			slog.String("token_id", gone.ID), slog.String("request_id", requestID(w)))
		tc.notifyUser(r.Context(), log, target.Username())
		w.WriteHeader(http.StatusNoContent)
	})
}

// notifyUser tells the instances sharing the token store, if it can
// (tokens.UserNotifier), that username's record changed, so that they
// refuse a revoked token within the store's bound rather than at their
// next reload. Before the reply: the bound runs from it. A failure
// changes nothing that was done; the others' reload still brings it.
func (c tokenCheck) notifyUser(ctx context.Context, log *slog.Logger, username string) {
	n, ok := c.store.(tokens.UserNotifier)
	if !ok {
		return
	}
	if err := n.NotifyUser(ctx, username); err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "could not tell the other instances of a changed user; they see it at their next reload",
			slog.String("username", username), slog.Any("err", err))
	}
}

// AccessTokenUses records the uses of personal access tokens and writes
// them to the directory now and then (Run): a use is a write of the
// user's record, too dear for every request. A token's recorded last use
// lags a real one by at most patTouchLag, plus the time to the next write.
type AccessTokenUses struct {
	dir users.Directory
	log *slog.Logger
	mu  sync.Mutex
	// pending are the uses not yet written, by username, by token id;
	// guarded by mu.
	pending map[string]map[string]time.Time
}

// NewAccessTokenUses returns a recorder of uses that writes them to dir.
func NewAccessTokenUses(dir users.Directory, log *slog.Logger) *AccessTokenUses {
	return &AccessTokenUses{dir: dir, log: log, pending: make(map[string]map[string]time.Time)}
}

// record notes a use of username's token t at now, unless its recorded
// last use is recent enough.
func (u *AccessTokenUses) record(username string, t *users.AccessToken, now time.Time) {
	if now.Sub(t.LastUsedAt) < patTouchLag {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	byID := u.pending[username]
	if byID == nil {
		byID = make(map[string]time.Time)
		u.pending[username] = byID
	}
	if now.After(byID[t.ID]) {
		byID[t.ID] = now
	}
}

// lastUse returns the use of username's token id recorded here and not
// yet written; zero if none.
func (u *AccessTokenUses) lastUse(username, id string) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.pending[username][id]
}

// Flush writes the uses recorded so far. Those it cannot write are kept
// for the next Flush.
func (u *AccessTokenUses) Flush(ctx context.Context) error {
	u.mu.Lock()
	batch := u.pending
	u.pending = make(map[string]map[string]time.Time)
	u.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := users.TouchAccessTokens(ctx, u.dir, batch)
	if err != nil {
		u.mu.Lock()
		for name, byID := range batch {
			for id, at := range byID {
				if cur := u.pending[name]; cur == nil {
					u.pending[name] = map[string]time.Time{id: at}
				} else if at.After(cur[id]) {
					cur[id] = at
				}
			}
		}
		u.mu.Unlock()
	}
	return err
}

// Run flushes every interval until ctx is done, then once more.
func (u *AccessTokenUses) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := u.Flush(ctx); err != nil {
				u.log.Warn("cannot record personal access tokens' last use; trying again", "err", err)
			}
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := u.Flush(final); err != nil {
				u.log.Warn("personal access tokens' last uses since the last write are lost", "err", err)
			}
			cancel()
			return
		}
	}
}
