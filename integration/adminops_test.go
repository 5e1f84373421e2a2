package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// The walk's admin (API.md, "Admin API"): an admin acts on the step's
// user through the admin API of the step's instance, and each action does
// what the matching `authsvc user` command does (ops_test.go's cliOp), to
// the model's tokens, logins and reset links, with one difference: the
// instance that answered tells the token store and the instances sharing
// it at once (adminCall.changed), so a death is refused at once by that
// instance and within the store's bound by the others, where the CLI's
// take the directory's bound. A disable (PATCH disabled), a delete and a
// password end every session and personal access token of the user; a
// logout their sessions alone; a reset-mfa their sessions when there was
// a factor to remove; an enable, a create, a profile PATCH and a reset
// link end nothing (a link made by the admin is the user's live link,
// which reset-confirm may use). The admin is a user of the model whom no
// step draws: they act with a session or a personal access token with the
// admin scope, which the checks hold live on every instance, and their
// attempts to delete, disable or demote themselves answer 409 conflict
// and change nothing.

// adminName is the walk's admin, whom `user add --admin` makes before the
// instances start.
const adminName = "root"

// adminOperations are the admin's steps; ops_test.go's init adds them to
// the table.
var adminOperations = []operation{
	{"admin-disable", 2, adminDisabled(true)},
	{"admin-enable", 2, adminDisabled(false)},
	{"admin-delete", 1, (*walker).opAdminDelete},
	{"admin-create", 2, (*walker).opAdminCreate},
	{"admin-password", 2, (*walker).opAdminPassword},
	{"admin-logout", 1, (*walker).opAdminLogout},
	{"admin-reset-mfa", 1, (*walker).opAdminResetMFA},
	{"admin-reset-link", 2, (*walker).opAdminResetLink},
	{"admin-profile", 1, (*walker).opAdminProfile},
	{"admin-read", 1, (*walker).opAdminRead},
	{"admin-self", 1, (*walker).opAdminSelf},
	{"admin-denied", 1, (*walker).opAdminDenied},
}

// profileGroups are the groups lists the admin sets, each in byte order
// (the order the API keeps).
var profileGroups = [][]string{{}, {"dev"}, {"dev", "ops"}}

// adminFleet returns makeDir with the walk's admin added, as `user add
// --admin` does, before any instance starts (its error left in *err),
// and, for odd seeds, serve's --reset-url; and the pattern of the links
// the admin API makes.
func adminFleet(makeDir func(*testing.T, string) (string, []string), m *model, seed uint64) (func(*testing.T, string) (string, []string), string, *error) {
	pattern := "{uid}/{token}"
	if seed%2 == 1 {
		pattern = resetURLPattern
	}
	addErr := new(error)
	return func(t *testing.T, dir string) (string, []string) {
		users, serve := makeDir(t, dir)
		f := &fleet{dir: dir, users: users}
		if res := f.cli(m.users[m.admin].cur().password, "add", "--admin", m.admin); res.code != 0 {
			*addErr = fmt.Errorf("user add --admin %s: %s", m.admin, res)
		}
		if seed%2 == 1 {
			serve = append(slices.Clone(serve), "--reset-url", pattern)
		}
		return users, serve
	}, pattern, addErr
}

// userPath is the admin API's path of user name.
func userPath(name string) string { return "/api/admin/users/" + url.PathEscape(name) }

// adminAuth returns what the admin acts with on instance i: their session
// or, for pick%3 == 0, their personal access token with the admin scope;
// each made on first use, the session again once a restart of the memory
// store ended it. Both are tokens of the model, which the checks hold
// live on every instance.
func (w *walker) adminAuth(i, pick int) (*token, error) {
	name := w.m.admin
	if w.adminSession == nil || w.adminSession.state != live {
		tk, err := w.login(i, name, w.m.users[name].cur().password, 0, "admin login")
		if err != nil {
			return nil, err
		}
		if tk == nil || tk.state != live {
			return nil, w.fail("admin", "login of the admin %s on %s with the password gave no live session", name, w.f.insts[i].name)
		}
		w.adminSession = tk
	}
	if pick%3 != 0 {
		w.note("as the admin with #%d", w.adminSession.id)
		return w.adminSession, nil
	}
	if w.adminPAT == nil || w.adminPAT.state != live {
		if err := w.adminMint(i); err != nil {
			return nil, err
		}
	}
	w.note("as the admin with #%d", w.adminPAT.id)
	return w.adminPAT, nil
}

// adminMint makes the admin's personal access token with the admin scope
// on instance i: 201, live at once everywhere.
func (w *walker) adminMint(i int) error {
	name := w.m.admin
	p := &patInfo{name: fmt.Sprintf("admin-%d", w.m.nextID), scopes: []string{"admin"}, createdOn: i, createdAt: time.Now(), exactExpiry: true}
	body, _ := json.Marshal(map[string]any{"name": p.name, "scopes": p.scopes, "password": w.m.users[name].cur().password})
	r, err := w.call(i, "POST", "/api/auth/tokens/", w.adminSession.value, string(body))
	if err != nil {
		return err
	}
	what := fmt.Sprintf("POST /api/auth/tokens/ on %s with the admin's live session %s and the password, for the admin scope", w.f.insts[i].name, w.adminSession)
	p.id, p.expiresAt = r.str("id"), parseTime(r.str("expires_at"))
	if r.status != 201 || !validPAT(r.str("token")) || p.id == "" || p.expiresAt.IsZero() {
		return w.fail("admin", "%s = %s; want 201 with a personal access token", what, r)
	}
	w.adminPAT = w.m.issuePAT(name, r.str("token"), fmt.Sprintf("%s at step %d", what, w.stepNo), p)
	return nil
}

// adminCall sends an admin request (body, when not nil, as JSON) to the
// step's instance with the admin's credential, and returns the reply and
// how a failure names the request (never its body, which may hold a
// password). A refusal of the credential itself is a failure: it is live,
// and an admin's.
func (w *walker) adminCall(s step, method, path string, body any) (reply, string, error) {
	cred, err := w.adminAuth(s.inst, s.pick)
	if err != nil {
		return reply{}, "", err
	}
	raw := ""
	if body != nil {
		b, _ := json.Marshal(body)
		raw = string(b)
	}
	what := fmt.Sprintf("%s %s on %s by the admin with %s", method, path, w.f.insts[s.inst].name, cred)
	r, err := w.call(s.inst, method, path, cred.value, raw)
	if err == nil && (r.status == 401 || r.status == 403) {
		err = w.fail("live-token-refused", "%s = %s; want the admin's live credential accepted", what, r)
	}
	return r, what, err
}

// adminWant fails unless r has status (and, when not "", error code).
func (w *walker) adminWant(what string, r reply, status int, code, why string) error {
	if r.status == status && (code == "" || r.code() == code) {
		return nil
	}
	return w.fail("admin", "%s = %s; want %s (%s)", what, r, strings.TrimSpace(fmt.Sprint(status, " ", code)), why)
}

// checkItem checks a user as the admin API shows them (body) against
// name's state st in the model (itemMatches).
func (w *walker) checkItem(what string, r reply, body map[string]any, name string, st userState, admin bool) error {
	if !itemMatches(body, name, st, admin) {
		return w.fail("admin", "%s = %s; want %s as the model has them: name %q, email \"\", groups [%s], admin %v, disabled %v, mfa %v, locked false, mfa_enrollment_pending false",
			what, r, name, st.name, st.groups, admin, st.disabled, st.totp != "")
	}
	return nil
}

// itemMatches reports whether body shows user name in state st: no
// email, never locked (the walk's limits stay out of the way), no
// enrolment pending (no --require-mfa).
func itemMatches(body map[string]any, name string, st userState, admin bool) bool {
	list, isList := body["groups"].([]any)
	var groups []string
	for _, g := range list {
		g, _ := g.(string)
		groups = append(groups, g)
	}
	return st.exists && body["username"] == name && body["name"] == st.name && body["email"] == "" && isList && strings.Join(groups, ",") == st.groups &&
		body["admin"] == admin && body["disabled"] == st.disabled && body["mfa"] == (st.totp != "") && body["locked"] == false && body["mfa_enrollment_pending"] == false
}

// shownAs returns the versions of user name that instance i may be
// answering from now (a read answers from the directory as the instance
// last loaded it) in which body would show them; body nil: in which they
// are gone, or do not match filter.
func (w *walker) shownAs(i int, name string, body map[string]any, filter func(string, userState) bool) []int {
	u := w.m.users[name]
	var out []int
	for _, j := range w.m.possible(i, name, time.Now()) {
		st := u.history[j].state
		listed := st.exists && filter(name, st)
		if body == nil && !listed || body != nil && listed && itemMatches(body, name, st, name == w.m.admin) {
			out = append(out, j)
		}
	}
	return out
}

// adminDisabled is PATCH {"disabled"}: a disable as user disable (every
// session and personal access token of the user dies, and their reset
// link), an enable as user enable (nothing dies). alt%4 == 3 also tries a
// user already so (200, nothing changes) or gone (404).
func adminDisabled(disable bool) func(*walker, step) error {
	return func(w *walker, s step) error {
		u := w.m.users[s.user]
		st := u.cur()
		change := st.exists && st.disabled != disable
		if !change && s.alt%4 != 3 {
			return errSkip
		}
		r, what, err := w.adminCall(s, "PATCH", userPath(s.user), map[string]bool{"disabled": disable})
		switch {
		case err != nil:
			return err
		case !st.exists:
			return w.adminWant(what, r, 404, "not_found", "no such user")
		case r.status != 200:
			return w.adminWant(what, r, 200, "", "the user as changed")
		}
		if change {
			now := time.Now()
			if disable {
				u.killLink()
				w.m.killUser(s.user, now, s.inst, nil, true)
			}
			st.disabled = disable
			w.m.change(s.user, st, now, false, disable, s.inst)
		}
		return w.checkItem(what, r, r.body, s.user, st, false)
	}
}

// opAdminDelete is DELETE, as user del: 204, every session and personal
// access token of the user dies, and their link; alt%4 == 3 also tries a
// user who is gone (404).
func (w *walker) opAdminDelete(s step) error {
	u := w.m.users[s.user]
	st := u.cur()
	if !st.exists && s.alt%4 != 3 {
		return errSkip
	}
	r, what, err := w.adminCall(s, "DELETE", userPath(s.user), nil)
	switch {
	case err != nil:
		return err
	case !st.exists:
		return w.adminWant(what, r, 404, "not_found", "no such user")
	case r.status != 204:
		return w.adminWant(what, r, 204, "", "deleted")
	}
	now := time.Now()
	u.killLink()
	u.pending = ""
	w.m.killUser(s.user, now, s.inst, nil, true)
	w.m.change(s.user, userState{factors: st.factors + 1}, now, false, true, s.inst)
	return nil
}

// opAdminCreate is POST /api/admin/users/, as user add: 201 with the
// user, a password (hashed at serve's policy) and, drawn by alt, a name
// and groups; no token of the name's earlier user comes back. alt%8 == 2
// sends a weak password (400 weak_password), alt%4 == 3 also tries a
// name taken (409 conflict); neither changes anything.
func (w *walker) opAdminCreate(s step) error {
	u := w.m.users[s.user]
	st := u.cur()
	if st.exists && s.alt%4 != 3 {
		return errSkip
	}
	weak := s.alt%8 == 2
	password := u.newPasswordPeek(s.user)
	if weak {
		password = weakPassword
	}
	next := userState{exists: true, password: password, factors: st.factors + 1}
	body := map[string]any{"username": s.user, "password": password}
	if (s.alt/8)%2 == 1 {
		next.name = fmt.Sprintf("Walker %d", s.pick)
		body["name"] = next.name
	}
	if (s.alt/16)%2 == 1 {
		g := profileGroups[s.pick%len(profileGroups)]
		next.groups = strings.Join(g, ",")
		body["groups"] = g
	}
	r, what, err := w.adminCall(s, "POST", "/api/admin/users/", body)
	switch {
	case err != nil:
		return err
	case st.exists:
		return w.adminWant(what+" for "+s.user, r, 409, "conflict", "a user of that name exists")
	case weak:
		return w.adminWant(what+" for "+s.user, r, 400, "weak_password", "a password below the policy")
	case r.status != 201:
		return w.adminWant(what+" for "+s.user, r, 201, "", "created")
	}
	u.newPassword(s.user)
	u.weak = false
	w.m.change(s.user, next, time.Now(), false, true, s.inst)
	return w.checkItem(what, r, r.body, s.user, next, false)
}

// opAdminPassword is POST …/password, as user passwd: 204, every session
// and personal access token of the user dies, and their link; the new
// hash is at serve's policy. alt%8 == 2 sends a weak password (400
// weak_password, nothing changes); alt%4 == 3 also tries a user who is
// gone (404).
func (w *walker) opAdminPassword(s step) error {
	u := w.m.users[s.user]
	st := u.cur()
	if !st.exists && s.alt%4 != 3 {
		return errSkip
	}
	weak := s.alt%8 == 2
	password := u.newPasswordPeek(s.user)
	if weak {
		password = weakPassword
	}
	r, what, err := w.adminCall(s, "POST", userPath(s.user)+"/password", map[string]string{"new_password": password})
	switch {
	case err != nil:
		return err
	case !st.exists:
		return w.adminWant(what, r, 404, "not_found", "no such user")
	case weak:
		return w.adminWant(what, r, 400, "weak_password", "a password below the policy")
	case r.status != 204:
		return w.adminWant(what, r, 204, "", "the password set")
	}
	now := time.Now()
	u.killLink()
	w.m.killUser(s.user, now, s.inst, nil, true)
	st.password = u.newPassword(s.user)
	w.m.change(s.user, st, now, false, true, s.inst)
	u.weak = false
	return nil
}

// opAdminLogout is POST …/logout, as user logout: 204, every session of
// the user dies; personal access tokens live on, and a session issued
// after it is live. alt%4 == 3 also tries a user who is gone (404).
func (w *walker) opAdminLogout(s step) error {
	st := w.m.users[s.user].cur()
	if !st.exists && s.alt%4 != 3 {
		return errSkip
	}
	r, what, err := w.adminCall(s, "POST", userPath(s.user)+"/logout", nil)
	switch {
	case err != nil:
		return err
	case !st.exists:
		return w.adminWant(what, r, 404, "not_found", "no such user")
	case r.status != 204:
		return w.adminWant(what, r, 204, "", "logged out")
	}
	w.m.killUser(s.user, time.Now(), s.inst, nil, false)
	w.m.users[s.user].killLink() // the cut-off moved: a pending reset link dies
	return nil
}

// opAdminResetMFA is POST …/reset-mfa, as user reset-mfa: 204; the
// authenticator and any enrolment go, and every session of the user dies
// (personal access tokens live on), unless there was nothing to remove:
// then nothing changes. alt%4 == 3 also tries a user who is gone (404).
func (w *walker) opAdminResetMFA(s step) error {
	u := w.m.users[s.user]
	st := u.cur()
	if !st.exists && s.alt%4 != 3 {
		return errSkip
	}
	r, what, err := w.adminCall(s, "POST", userPath(s.user)+"/reset-mfa", nil)
	switch {
	case err != nil:
		return err
	case !st.exists:
		return w.adminWant(what, r, 404, "not_found", "no such user")
	case r.status != 204:
		return w.adminWant(what, r, 204, "", "the factors reset")
	}
	if st.totp == "" && u.pending == "" {
		return nil
	}
	now := time.Now()
	w.m.killUser(s.user, now, s.inst, nil, false)
	u.killLink() // the cut-off moved
	st.totp, st.factors = "", st.factors+1
	u.pending = ""
	w.m.change(s.user, st, now, false, true, s.inst)
	return nil
}

// opAdminResetLink is POST …/reset-link, as user reset-link: 200 with
// the link (serve's --reset-url, for an hour), which becomes the user's
// live link, the older one dead; 409 conflict for a disabled user and 404
// for one who is gone (alt%4 == 3 tries those).
func (w *walker) opAdminResetLink(s step) error {
	u := w.m.users[s.user]
	st := u.cur()
	if (!st.exists || st.disabled) && s.alt%4 != 3 {
		return errSkip
	}
	sent := time.Now()
	r, what, err := w.adminCall(s, "POST", userPath(s.user)+"/reset-link", nil)
	answered := time.Now()
	switch {
	case err != nil:
		return err
	case !st.exists:
		return w.adminWant(what, r, 404, "not_found", "no such user")
	case st.disabled:
		return w.adminWant(what, r, 409, "conflict", "a disabled user gets no link")
	}
	l := &resetLink{id: w.m.nextID, ttl: time.Hour, sent: sent, answered: answered}
	expires := parseTime(r.str("expires_at"))
	var ok bool
	l.uid, l.token, ok = splitLink(w.resetURL, r.str("url"), s.user)
	if r.status != 200 || !ok || expires.Before(sent.Add(l.ttl-time.Second)) || expires.After(answered.Add(l.ttl)) {
		return w.fail("admin", "%s = %d, expires_at %q; want 200 with a url of the pattern %s (the username and 32 bytes in base64url) and expires_at an hour from now",
			what, r.status, r.str("expires_at"), w.resetURL)
	}
	w.m.nextID++
	u.killLink()
	u.link = l
	w.note("made %s", l)
	return nil
}

// splitLink returns the uid and token of link, made for user name with
// pattern ({uid}/{token} within it); ok is false unless link has the
// pattern's form, the user's uid and a token of 32 bytes.
func splitLink(pattern, link, name string) (uid, token string, ok bool) {
	prefix, suffix, _ := strings.Cut(pattern, "{uid}/{token}")
	rest, ok1 := strings.CutPrefix(link, prefix)
	rest, ok2 := strings.CutSuffix(rest, suffix)
	uid, token, ok3 := strings.Cut(rest, "/")
	raw, err := base64.RawURLEncoding.DecodeString(token)
	ok = ok1 && ok2 && ok3 && uid == base64.RawURLEncoding.EncodeToString([]byte(name)) && err == nil && len(raw) == 32
	return uid, token, ok
}

// opAdminProfile is PATCH {"name"} and/or {"groups"} (alt draws which):
// 200 with the user as changed; no token dies and logins are as before.
// alt%4 == 3 also tries a user who is gone (404).
func (w *walker) opAdminProfile(s step) error {
	st := w.m.users[s.user].cur()
	if !st.exists && s.alt%4 != 3 {
		return errSkip
	}
	body := map[string]any{}
	if (s.alt/4)%3 != 1 {
		st.name = fmt.Sprintf("Walker %d", s.pick)
		body["name"] = st.name
	}
	if (s.alt/4)%3 != 0 {
		g := profileGroups[s.pick%len(profileGroups)]
		st.groups = strings.Join(g, ",")
		body["groups"] = g
	}
	r, what, err := w.adminCall(s, "PATCH", userPath(s.user), body)
	switch {
	case err != nil:
		return err
	case !st.exists:
		return w.adminWant(what, r, 404, "not_found", "no such user")
	case r.status != 200:
		return w.adminWant(what, r, 200, "", "the user as changed")
	}
	w.m.change(s.user, st, time.Now(), false, false, s.inst)
	return w.checkItem(what, r, r.body, s.user, st, false)
}

// opAdminRead reads the directory through the admin API, which answers
// from the directory as the instance last loaded it (within the
// directory's bound of a change the instance did not make): for even alt
// GET the user (200 as one of the versions the instance may answer from
// has them, 404 when one has them gone); for odd alt the list, all of it
// or a filter's (alt/2%3: none, disabled=true, admin=false), in pages of
// 1 to 3 users (pick): in byte order, each user listed or not as a
// version would, next set exactly on a full page that another follows.
func (w *walker) opAdminRead(s step) error {
	all := func(string, userState) bool { return true }
	if s.alt%2 == 0 {
		r, what, err := w.adminCall(s, "GET", userPath(s.user), nil)
		if err != nil {
			return err
		}
		var body map[string]any
		if r.status == 200 {
			body = r.body
		} else if r.status != 404 || r.code() != "not_found" {
			return w.fail("admin", "%s = %s; want 200 or 404 not_found", what, r)
		}
		if len(w.shownAs(s.inst, s.user, body, all)) == 0 {
			return w.fail("admin", "%s = %s; want %s as one of versions %v has them", what, r, s.user, w.m.possible(s.inst, s.user, time.Now()))
		}
		return nil
	}
	filter, match := "", all
	switch (s.alt / 2) % 3 {
	case 1:
		filter, match = "&disabled=true", func(_ string, st userState) bool { return st.disabled }
	case 2:
		filter, match = "&admin=false", func(name string, _ userState) bool { return name != w.m.admin }
	}
	limit := 1 + s.pick%3
	listed, err := w.readPages(s, limit, filter)
	if err != nil {
		return err
	}
	for _, name := range w.m.everyone() {
		if len(w.shownAs(s.inst, name, listed[name], match)) == 0 {
			return w.fail("admin", "GET /api/admin/users/?limit=%d%s on %s, page by page: %s listed as %v; want it as one of versions %v has it",
				limit, filter, w.f.insts[s.inst].name, name, listed[name], w.m.possible(s.inst, name, time.Now()))
		}
	}
	return nil
}

// readPages reads the list's pages of limit with filter, following next,
// and returns the users listed; each page must be in byte order after the
// last, and next the last username of a full page, or null.
func (w *walker) readPages(s step, limit int, filter string) (map[string]map[string]any, error) {
	listed := map[string]map[string]any{}
	after := ""
	for {
		path := fmt.Sprintf("/api/admin/users/?limit=%d%s", limit, filter)
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		r, what, err := w.adminCall(s, "GET", path, nil)
		if err != nil {
			return nil, err
		}
		items := anyList(r.body["users"])
		next, hasNext := r.body["next"].(string)
		nullNext := r.body["next"] == nil && strings.Contains(r.raw, `"next":null`)
		ordered, last := true, after
		for _, item := range items {
			item, _ := item.(map[string]any)
			name, _ := item["username"].(string)
			ordered = ordered && name > last
			last = name
			listed[name] = item
		}
		if r.status != 200 || len(items) > limit || !hasNext && !nullNext || hasNext && (len(items) != limit || next != last) || !ordered || len(listed) > 10 {
			return nil, w.fail("admin", "%s = %s; want 200 with at most %d users, in byte order after %q, and next the last of a full page or null", what, r, limit, after)
		}
		if !hasNext {
			return listed, nil
		}
		after = next
	}
}

// opAdminSelf is the admin trying to delete, disable or demote
// themselves (alt%3): 409 conflict; they stay an admin, enabled, and
// every token of theirs lives (the checks).
func (w *walker) opAdminSelf(s step) error {
	me := w.m.admin
	method, body := "PATCH", any(nil)
	switch s.alt % 3 {
	case 0:
		method = "DELETE"
	case 1:
		body = map[string]bool{"disabled": true}
	default:
		body = map[string]bool{"admin": false}
	}
	r, what, err := w.adminCall(s, method, userPath(me), body)
	if err == nil {
		err = w.adminWant(what, r, 409, "conflict", "an admin cannot delete, disable or demote themselves")
	}
	if err != nil {
		return err
	}
	r, what, err = w.adminCall(s, "GET", userPath(me), nil)
	if err == nil {
		err = w.adminWant(what, r, 200, "", "the admin, unchanged")
	}
	if err != nil {
		return err
	}
	return w.checkItem(what, r, r.body, me, w.m.users[me].cur(), true)
}

// opAdminDenied sends an admin request with a live token of a user who is
// no admin: a session (even pick) answers 403 permission_denied, a
// personal access token (without the admin scope, as all of theirs) 403
// insufficient_scope; nothing changes (the checks). alt%3 draws the
// request: the list, a DELETE or a password of the user named by alt/3.
func (w *walker) opAdminDenied(s step) error {
	w.m.expire(time.Now().Add(expiryMargin))
	var caller *token
	code := "permission_denied"
	if s.pick%2 == 0 {
		caller = w.liveToken(s.user, s.pick/2)
	} else {
		caller, code = w.pickPAT(w.m.livePATs(s.user, ""), s.pick/2), "insufficient_scope"
	}
	if caller == nil {
		return errSkip
	}
	target := w.m.names[(s.alt/3)%len(w.m.names)]
	method, path, body := "GET", "/api/admin/users/", ""
	switch s.alt % 3 {
	case 1:
		method, path = "DELETE", userPath(target)
	case 2:
		method, path, body = "POST", userPath(target)+"/password", jsonBody(map[string]string{"new_password": w.m.users[target].newPasswordPeek(target)})
	}
	r, err := w.call(s.inst, method, path, caller.value, body)
	if err != nil {
		return err
	}
	return w.adminWant(fmt.Sprintf("%s %s on %s with %s", method, path, w.f.insts[s.inst].name, caller), r, 403, code, "the admin API is for admins, through a session or a token with the admin scope")
}
