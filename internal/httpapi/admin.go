package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"authsvc/internal/login"
	"authsvc/internal/throttle"
	"authsvc/internal/users"
)

// The admin API (API.md, "Admin API"): what an operator does with
// `authsvc user`, over HTTP. Every action is the users package's operation
// the CLI calls (users.Create, Edit, SetPassword, Logout, Unlock,
// ResetFactors, NewResetLink, Directory.Delete), so both behave alike: the
// same checks, deaths and records. What the CLI leaves to each instance's
// next reload, the API does at once on this one and tells the others
// (adminCall.changed): the token store learns the user's new stamp and
// cut-off, and the instances sharing it reread the user.

// adminUser is one user as the admin API shows them: the list's item, and
// the reply of read, create and edit.
type adminUser struct {
	Username string   `json:"username"`
	Name     string   `json:"name"`
	Email    string   `json:"email"`
	Groups   []string `json:"groups"`
	Admin    bool     `json:"admin"`
	Disabled bool     `json:"disabled"`
	MFA      bool     `json:"mfa"`    // has a second factor
	Locked   bool     `json:"locked"` // the throttle's per-user limit, or the code lock, refuses their logins now
	Tokens   int      `json:"tokens"` // live personal access tokens
	// MFAEnrollmentPending: --require-mfa requires a second factor of
	// the user, who has none: they log in to enrolment only.
	MFAEnrollmentPending bool `json:"mfa_enrollment_pending"`
}

// adminList is the reply of GET /api/admin/users/.
type adminList struct {
	Users []adminUser `json:"users"`
	Next  *string     `json:"next"` // the after of the next page; null on the last
}

// resetLinkReply is the reply of POST /api/admin/users/{username}/reset-link.
type resetLinkReply struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// admin is what the admin handlers share.
type admin struct {
	log       *slog.Logger
	tc        tokenCheck
	guard     *login.Guard
	trusted   []netip.Prefix // proxies whose X-Forwarded-For is believed
	passwords PasswordSetter
	reset     ResetPolicy
}

// An adminCall is one admin request: its principal, the action and the
// target, for the audit line every request gets.
type adminCall struct {
	a      admin
	w      http.ResponseWriter
	r      *http.Request
	p      principal
	action string
	target string // the username acted on; "" for the list
	fields []string
}

// The admin API's own refusals, and the list's known parameters.
var (
	errUserExists       = &apiError{status: http.StatusConflict, code: "conflict", detail: "A user of that name exists."}
	errSelf             = &apiError{status: http.StatusConflict, code: "conflict", detail: "An admin cannot delete, disable or demote themselves."}
	errLastAdmin        = &apiError{status: http.StatusConflict, code: "conflict", detail: "At least one enabled admin must remain."}
	errResetOfDisabled  = &apiError{status: http.StatusConflict, code: "conflict", detail: "The user is disabled; enable them before making a reset link."}
	adminListParameters = []string{"limit", "after", "prefix", "group", "admin", "disabled", "mfa"}
)

// handle returns the handler of action: the token must be an admin's
// session or a personal access token with the admin scope whose user is
// an admin; then serve does the action and returns the status and body
// (nil: none) of its reply, or its error. One audit line each.
func (a admin) handle(action string, serve func(c *adminCall) (int, any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &adminCall{a: a, w: w, r: r, action: action}
		if name := r.PathValue("username"); name != "" {
			c.target = users.NormalizeUsername(name)
		}
		var err error
		c.p, err = a.tc.authenticateScope(r, users.ScopeAdmin, true)
		if err == nil && !c.p.user.Admin() {
			err = errPermissionDenied
		}
		status, body := 0, any(nil)
		if err == nil {
			status, body, err = serve(c)
		}
		c.audit(err)
		if err != nil {
			writeError(w, r, a.log, err)
			return
		}
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		if body == nil {
			w.WriteHeader(status)
			return
		}
		encode(w, status, body)
	})
}

// audit writes the request's audit line: the admin, the action, the
// target and the outcome; never a password or a link.
func (c *adminCall) audit(err error) {
	who := "(unknown)"
	if c.p.user != nil {
		who = c.p.user.Username()
	}
	target := c.target
	if target == "" {
		target = "-"
	}
	attrs := []slog.Attr{slog.String("action", c.action), slog.String("outcome", outcomeName(err)),
		slog.String("admin", who), slog.String("target", target)}
	if c.p.user != nil {
		attrs = append(attrs, slog.String("token", c.p.kind().String()))
	}
	if len(c.fields) > 0 {
		attrs = append(attrs, slog.String("fields", strings.Join(c.fields, ",")))
	}
	attrs = append(attrs, slog.String("client", throttle.ClientKey(ClientIP(c.r, c.a.trusted))), slog.String("request_id", requestID(c.w)))
	c.a.log.LogAttrs(c.r.Context(), slog.LevelInfo, "admin", attrs...)
}

// changed makes a change of the target's record hold at once: the token
// store is told the user's stamp and cut-off as the directory now has
// them (their sessions issued before it die on every instance sharing
// the store; a deleted user's, all of them), and the instances sharing
// it reread the user. What the CLI's change reaches through each
// instance's reload (serve's endTokens), the API's reaches before it
// answers. A failure is logged: the directory's record holds regardless.
func (c *adminCall) changed() {
	ctx, tc, name := c.r.Context(), c.a.tc, c.target
	now := tc.now()
	sup := tc.policy.Supersession(name, 0, now, now) // deleted: every session dies
	u, err := tc.users.Lookup(ctx, name)
	switch {
	case err == nil:
		sup = tc.policy.Supersession(name, u.SessionGeneration(), u.TokensAfter(), now)
	case !errors.Is(err, users.ErrNotFound):
		c.a.log.WarnContext(ctx, "admin change; the user could not be read back, their old sessions end at the next reload", "username", name, "err", err)
		return
	}
	n, err := tc.store.Supersede(ctx, sup)
	if err != nil {
		c.a.log.WarnContext(ctx, "admin change; the user's old sessions stay in the store until they expire (the cut-off refuses them)", "username", name, "err", err)
	}
	tc.metrics.Revoked(RevokedUserChange, n)
	tc.notifyUser(ctx, c.a.log, name)
}

// item returns u as the admin API shows them, locked as the throttle has them now.
func (a admin) item(ctx context.Context, u *users.User, locked bool) adminUser {
	now := a.tc.now()
	n := 0
	for i := range u.AccessTokens {
		if u.AccessTokens[i].Live(now) {
			n++
		}
	}
	groups := u.Groups
	if groups == nil {
		groups = []string{}
	}
	return adminUser{Username: u.Username, Name: u.Name, Email: u.Email, Groups: groups, Admin: u.Admin, Disabled: u.Disabled,
		MFA: u.HasSecondFactor(), Locked: locked, Tokens: n, MFAEnrollmentPending: a.tc.policy.RequireMFA.PendingUser(u)}
}

// locked reports, for each of list, whether the login throttle's
// per-user limit refuses the user's logins now, or the code lock their
// second-factor codes (MaxCodeFailures wrong ones), as user unlock would
// lift either. A throttle that cannot say leaves it false: the list is
// for reading, and the login itself still fails closed.
func (a admin) locked(ctx context.Context, list []users.User) []bool {
	out := make([]bool, len(list))
	now := a.guard.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8) // a shared throttle answers each in a round trip
	for i := range list {
		u := &list[i]
		key := u.Username
		if !u.FailuresAfter.IsZero() {
			key += "\x00unlocked " + strconv.FormatInt(u.FailuresAfter.UnixNano(), 10) // throttleKey's
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			l, err := a.guard.Throttle.Explain(ctx, key, "", now)
			if out[i] = err == nil && l&throttle.LimitUser != 0; !out[i] {
				codes, err := a.guard.Throttle.CodeLocked(ctx, u.Username, u.CodesAfter)
				out[i] = err == nil && codes
			}
		})
	}
	wg.Wait()
	return out
}

// read returns the user named name as the backing holds them now: the
// first user at or after name whose username starts with it is name
// itself when there is one.
func (a admin) read(ctx context.Context, name string) (*users.User, error) {
	page, err := a.tc.users.Page(ctx, "", 1, users.Filter{Prefix: name})
	if err != nil {
		return nil, err
	}
	if len(page) == 0 || page[0].Username != name {
		return nil, users.ErrNotFound
	}
	return &page[0], nil
}

// show returns the reply of the target as they are now.
func (c *adminCall) show(status int) (int, any, error) {
	u, err := c.a.read(c.r.Context(), c.target)
	if err != nil {
		return 0, nil, err
	}
	return status, c.a.item(c.r.Context(), u, c.a.locked(c.r.Context(), []users.User{*u})[0]), nil
}

// list serves GET /api/admin/users/.
func (c *adminCall) list() (int, any, error) {
	after, limit, f, err := parseAdminList(c.r.URL.RawQuery)
	if err != nil {
		return 0, nil, err
	}
	ctx, d := c.r.Context(), c.a.tc.users
	page, err := d.Page(ctx, after, limit, f)
	if err != nil {
		return 0, nil, err
	}
	reply := adminList{Users: make([]adminUser, len(page))}
	if len(page) == limit {
		// A full page: whether another follows, so that a client never
		// asks for an empty one, nor stops one short.
		last := page[len(page)-1].Username
		more, err := d.Page(ctx, last, 1, f)
		if err != nil {
			return 0, nil, err
		}
		if len(more) > 0 {
			reply.Next = &last
		}
	}
	locked := c.a.locked(ctx, page)
	for i := range page {
		reply.Users[i] = c.a.item(ctx, &page[i], locked[i])
	}
	return http.StatusOK, reply, nil
}

// parseAdminList parses the list's query: every parameter known and
// given once, limit 1 to users.MaxPage (100 when absent).
func parseAdminList(rawQuery string) (after string, limit int, f users.Filter, err error) {
	q, perr := url.ParseQuery(rawQuery)
	if perr != nil {
		return "", 0, f, invalidRequest("The query string is malformed.")
	}
	limit = 100
	for name, values := range q {
		if !slices.Contains(adminListParameters, name) {
			return "", 0, f, invalidRequest("Unknown parameter " + strconv.Quote(name) + "; known: " + strings.Join(adminListParameters, ", ") + ".")
		}
		if len(values) != 1 {
			return "", 0, f, invalidRequest("Parameter " + name + " is repeated.")
		}
		v := values[0]
		var want *users.Want
		switch name {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > users.MaxPage {
				return "", 0, f, invalidRequest("limit must be a whole number from 1 to 500.")
			}
			limit = n
		case "after":
			after = v
		case "prefix":
			f.Prefix = v
		case "group":
			if v == "" {
				return "", 0, f, invalidRequest("group must not be empty.")
			}
			f.Groups = []string{v}
		case "admin":
			want = &f.Admin
		case "disabled":
			want = &f.Disabled
		case "mfa":
			want = &f.MFA
		}
		if want != nil {
			w, err := users.ParseWant(v)
			if err != nil {
				return "", 0, f, invalidRequest(name + " must be true or false.")
			}
			*want = w
		}
	}
	return after, limit, f, nil
}

// adminCreate is the body of POST /api/admin/users/.
type adminCreate struct {
	Username string   `json:"username"`
	Password *string  `json:"password"`
	Name     string   `json:"name"`
	Email    string   `json:"email"`
	Groups   []string `json:"groups"`
	Admin    bool     `json:"admin"`
}

// create serves POST /api/admin/users/: users.Create, as user add.
func (c *adminCall) create() (int, any, error) {
	var req adminCreate
	if err := c.decode(&req, "username", "password", "name", "email", "groups", "admin"); err != nil {
		return 0, nil, err
	}
	if req.Username == "" {
		return 0, nil, invalidRequest("username is required.")
	}
	c.target = users.NormalizeUsername(req.Username) // as user add and Django store it
	nu := users.NewUser{Username: c.target, Name: req.Name, Email: req.Email, Groups: req.Groups, Admin: req.Admin}
	if err := nu.Check(); err != nil {
		return 0, nil, err // as user add: the name and profile before the password, and no hash paid for
	}
	if req.Password != nil {
		hash, err := c.a.hashNew(c.r.Context(), c.target, *req.Password)
		if err != nil {
			return 0, nil, err
		}
		nu.PasswordHash = hash
	}
	u, err := users.Create(c.r.Context(), c.a.tc.users, nu)
	if errors.Is(err, users.ErrExists) {
		return 0, nil, errUserExists
	}
	if err != nil {
		return 0, nil, err
	}
	c.changed() // the tombstone of an earlier user of the name, as a reload would
	c.w.Header().Set("Location", "/api/admin/users/"+url.PathEscape(u.Username))
	return http.StatusCreated, c.a.item(c.r.Context(), &u, false), nil
}

// edit serves PATCH /api/admin/users/{username}: users.Edit.
func (c *adminCall) edit() (int, any, error) {
	var ch users.Change
	var req struct {
		Name     *string   `json:"name"`
		Email    *string   `json:"email"`
		Groups   *[]string `json:"groups"`
		Admin    *bool     `json:"admin"`
		Disabled *bool     `json:"disabled"`
	}
	if err := c.decode(&req, "name", "email", "groups", "admin", "disabled"); err != nil {
		return 0, nil, err
	}
	// KeepAdmin: the last-admin rule is decided inside the write, so that
	// two admins demoting or disabling each other at once, on one
	// instance or two, never both succeed.
	ch = users.Change{Name: req.Name, Email: req.Email, Groups: req.Groups, Admin: req.Admin, Disabled: req.Disabled, KeepAdmin: true}
	if c.target == c.p.user.Username() && (req.Admin != nil && !*req.Admin || req.Disabled != nil && *req.Disabled) {
		return 0, nil, errSelf
	}
	u, err := users.Edit(c.r.Context(), c.a.tc.users, c.target, ch)
	if errors.Is(err, users.ErrLastAdmin) {
		return 0, nil, errLastAdmin
	}
	if err != nil {
		return 0, nil, err
	}
	c.changed()
	return http.StatusOK, c.a.item(c.r.Context(), &u, c.a.locked(c.r.Context(), []users.User{u})[0]), nil
}

// remove serves DELETE /api/admin/users/{username}: Directory.Delete, as
// user del, but never of the last enabled admin (Delete with users.KeepAnAdmin).
func (c *adminCall) remove() (int, any, error) {
	if c.target == c.p.user.Username() {
		return 0, nil, errSelf
	}
	err := c.a.tc.users.Delete(c.r.Context(), c.target, users.KeepAnAdmin)
	if errors.Is(err, users.ErrLastAdmin) {
		return 0, nil, errLastAdmin
	}
	if err != nil {
		return 0, nil, err
	}
	c.changed()
	return http.StatusNoContent, nil, nil
}

// setPassword serves POST /api/admin/users/{username}/password:
// users.SetPassword, as user passwd, under the password policy.
func (c *adminCall) setPassword() (int, any, error) {
	var req struct {
		NewPassword *string `json:"new_password"`
	}
	if err := c.decode(&req, "new_password"); err != nil {
		return 0, nil, err
	}
	if req.NewPassword == nil {
		return 0, nil, invalidRequest("new_password is required.")
	}
	ctx := c.r.Context()
	// 404 before the hash's cost, on the backing as it is now: a user
	// added a moment ago on another instance or by the CLI is there.
	if _, err := c.a.tc.users.Recheck(ctx, c.target); err != nil {
		return 0, nil, err
	}
	hash, err := c.a.hashNew(ctx, c.target, *req.NewPassword)
	if err == nil {
		err = users.SetPassword(ctx, c.a.tc.users, c.target, hash)
	}
	if err != nil {
		return 0, nil, err
	}
	c.changed()
	return http.StatusNoContent, nil, nil
}

// change serves an action that is one of the users package's operations
// on the target alone: logout, unlock, reset-mfa.
func (c *adminCall) change(op func(context.Context, users.Directory, string) error) (int, any, error) {
	if err := op(c.r.Context(), c.a.tc.users, c.target); err != nil {
		return 0, nil, err
	}
	c.changed()
	return http.StatusNoContent, nil, nil
}

// resetLink serves POST /api/admin/users/{username}/reset-link:
// users.NewResetLink, as user reset-link, with serve's --reset-url and
// --reset-ttl.
func (c *adminCall) resetLink() (int, any, error) {
	now := c.a.tc.now()
	ttl := c.a.reset.ttl()
	uid, token, err := users.NewResetLink(c.r.Context(), c.a.tc.users, c.target, ttl, now)
	switch {
	case errors.Is(err, users.ErrDisabled):
		return 0, nil, errResetOfDisabled
	case err != nil:
		return 0, nil, err
	}
	c.changed() // the older link is dead on every instance
	return http.StatusOK, resetLinkReply{URL: users.FormatResetURL(c.a.reset.url(), uid, token), ExpiresAt: now.Add(ttl).UTC().Truncate(time.Second)}, nil
}

// decode reads the request's JSON body (415, 413, 400 as for login) into
// v, refusing a field not in known, a null and a value of the wrong
// type; its errors never quote the body, which may hold a password.
func (c *adminCall) decode(v any, known ...string) error {
	body, err := readJSONBody(c.w, c.r)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := decodeObject(body, &fields); err != nil {
		return err
	}
	for name, raw := range fields {
		if !slices.Contains(known, name) {
			return invalidRequest("Unknown field " + strconv.Quote(name) + "; known: " + strings.Join(known, ", ") + ".")
		}
		if string(raw) == "null" {
			return invalidRequest(name + " must not be null.")
		}
		c.fields = append(c.fields, name)
	}
	slices.Sort(c.fields)
	if err := json.Unmarshal(body, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return invalidRequest(typeErr.Field + " has the wrong type.")
		}
		return invalidRequest("Body is not valid JSON.")
	}
	return nil
}

// hashNew checks password against the policy (400 weak_password) and
// hashes it with a hasher slot (503 when none comes): the reset
// confirm's way.
func (a admin) hashNew(ctx context.Context, username, password string) (string, error) {
	if err := passwordTooLong(bodyField{"password", password}); err != nil {
		return "", err
	}
	if err := a.passwords.Policy.Check(username, password); err != nil {
		return "", weakPasswordReply(err)
	}
	release, err := a.guard.Admission.Acquire(ctx)
	if err != nil {
		return "", errUnavailable
	}
	hash, err := a.passwords.Hash(password)
	release()
	if err != nil {
		return "", weakPasswordReply(err) // bcrypt's 72 bytes: the only way hashing fails
	}
	return hash, nil
}

// addAdminRoutes registers the admin API with handle.
func addAdminRoutes(handle func(method, path string, h http.Handler), d Deps, tc tokenCheck) {
	a := admin{log: d.Log, tc: tc, guard: d.Guard, trusted: d.TrustedProxies, passwords: d.Passwords, reset: d.Reset}
	const user = "/api/admin/users/{username}"
	handle("GET", "/api/admin/users/", a.handle("list", (*adminCall).list))
	handle("POST", "/api/admin/users/", a.handle("create", (*adminCall).create))
	handle("GET", user, a.handle("read", func(c *adminCall) (int, any, error) { return c.show(http.StatusOK) }))
	handle("PATCH", user, a.handle("edit", (*adminCall).edit))
	handle("DELETE", user, a.handle("delete", (*adminCall).remove))
	handle("POST", user+"/password", a.handle("password", (*adminCall).setPassword))
	handle("POST", user+"/logout", a.handle("logout", func(c *adminCall) (int, any, error) { return c.change(users.Logout) }))
	handle("POST", user+"/unlock", a.handle("unlock", func(c *adminCall) (int, any, error) { return c.change(users.Unlock) }))
	handle("POST", user+"/reset-mfa", a.handle("reset-mfa", func(c *adminCall) (int, any, error) {
		return c.change(func(ctx context.Context, d users.Directory, name string) error {
			_, _, err := users.ResetFactors(ctx, d, name)
			return err
		})
	}))
	handle("POST", user+"/reset-link", a.handle("reset-link", (*adminCall).resetLink))
}
