package integration

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"authsvc/internal/tokens"
)

// The walk's personal access tokens (API.md, "Personal access tokens" and
// "POST /api/auth/introspect/"): their operations, and their check. A
// personal access token is live iff it was made, and has not been
// revoked, nor expired, nor outlived its user (disable, del) or an
// operator's password (user passwd); it survives every end of sessions
// (logout, logoutall, sessions DELETE, user logout), the user's own
// password change, user reset-mfa and second-factor changes, and a
// restart on every store. It lives in the directory, not in the token
// store (docs/design/tokens.md): a revocation through the API is refused
// at once by the instance that answered it, within the store's bound by
// the instances sharing its token store (a notice through the store makes
// each read the user again), and within the directory's bound by any
// other; the CLI's deaths reach every instance within the directory's
// bound; a new token works at once everywhere (an instance that has not
// seen it reads the directory again before it refuses it).

// expiryMargin is how long before its expiry a token is taken for dying:
// a request sent a moment before may be judged a moment after.
const expiryMargin = time.Second

// patScopes are the scope sets the operations draw (admin is for the
// admin API, which the walk does not drive).
var patScopes = [][]string{{"info"}, {"introspect"}, {"info", "introspect"}}

// issuePAT adds a personal access token that was just made: live at once
// on every instance.
func (m *model) issuePAT(name, value, origin string, p *patInfo) *token {
	p.refusedOn = map[int]bool{}
	tk := &token{id: m.nextID, user: name, value: value, origin: origin, actor: -1, pat: p}
	m.nextID++
	m.tokens = append(m.tokens, tk)
	return tk
}

// livePATs returns the live personal access tokens of user name ("": of
// anyone) that carry scope ("": any), oldest first.
func (m *model) livePATs(name, scope string) []*token {
	var out []*token
	for _, tk := range m.tokens {
		if tk.pat != nil && tk.state == live && (name == "" || tk.user == name) && (scope == "" || tk.pat.has(scope)) {
			out = append(out, tk)
		}
	}
	return out
}

// expire takes the personal access tokens that expire by at for dying at
// their expiry: refused everywhere from then on.
func (m *model) expire(at time.Time) {
	for _, tk := range m.tokens {
		if tk.pat == nil || tk.pat.expiresAt.After(at) {
			continue
		}
		switch {
		case tk.state == live:
			tk.state, tk.killedAt, tk.deadline = dying, tk.pat.expiresAt, tk.pat.expiresAt
		case tk.state == dying && tk.deadline.After(tk.pat.expiresAt):
			tk.deadline = tk.pat.expiresAt
		}
	}
}

// pickPAT is the step's pick among tokens, or nil.
func (w *walker) pickPAT(list []*token, pick int) *token {
	if len(list) == 0 {
		return nil
	}
	tk := list[pick%len(list)]
	w.note("with #%d", tk.id)
	return tk
}

// opPATCreate mints a personal access token with POST /api/auth/tokens/:
// a live session of the user, the password, and a code when a version the
// instance may answer from has a second factor (unless alt leaves it out,
// to see mfa_required). alt also draws the scopes and the expiry: a few
// seconds (so that expiries happen within a walk), an hour, or the
// default; and now and then a name taken or the admin scope. What the instance may answer is what a login on the same
// proof would (the check of password and code is the login's); a token
// it makes is written to the directory as it is now, so it is live.
func (w *walker) opPATCreate(s step) error {
	sess := w.liveToken(s.user, s.pick)
	if sess == nil {
		return errSkip
	}
	u := w.m.users[s.user]
	now := time.Now()
	poss := w.m.possible(s.inst, s.user, now)
	p := &patInfo{name: fmt.Sprintf("walk-%d", w.m.nextID), scopes: patScopes[s.alt%len(patScopes)], createdOn: s.inst, createdAt: now, exactExpiry: true}
	body := map[string]any{"name": p.name, "scopes": p.scopes, "password": u.cur().password}
	var expires time.Time
	switch (s.alt / 3) % 4 {
	case 0, 1:
		expires = now.Add(time.Duration(1+s.alt%4) * time.Second).Truncate(time.Second).Add(time.Second)
	case 2:
		expires = now.Add(time.Hour).Truncate(time.Second)
	}
	if !expires.IsZero() {
		body["expires_at"] = expires.UTC().Format(time.RFC3339)
	}
	// alt/48%8: 7 asks for the admin scope, which no user of the walk may
	// have (403 permission_denied, before the proof); 6 takes the name of
	// a live token of the user (409 conflict once the proof holds).
	variant := (s.alt / 48) % 8
	if variant == 7 {
		body["scopes"] = []string{"admin"}
		raw, _ := json.Marshal(body)
		r, err := w.call(s.inst, "POST", "/api/auth/tokens/", sess.value, string(raw))
		if err == nil && (r.status != 403 || r.code() != "permission_denied") {
			err = w.fail("pat-create", "POST /api/auth/tokens/ on %s with live session %s, for the admin scope of a user who is no admin = %s; want 403 permission_denied", w.f.insts[s.inst].name, sess, r)
		}
		return err
	}
	var taken *token
	if variant == 6 {
		w.m.expire(now.Add(expiryMargin))
		if list := w.m.livePATs(s.user, ""); len(list) > 0 {
			taken = list[s.pick%len(list)]
			p.name, body["name"] = taken.pat.name, taken.pat.name
			w.note("with the name of #%d", taken.id)
		}
	}
	var c code
	var haveCode bool
	for _, j := range poss {
		if u.history[j].state.totp != "" {
			if (s.alt/12)%4 != 3 {
				c, haveCode = w.anyCode(s.user, s.alt%2 == 0)
			}
			break
		}
	}
	otp := ""
	if haveCode {
		otp = c.value
		body["code"] = otp
	}
	raw, _ := json.Marshal(body)
	r, err := w.call(s.inst, "POST", "/api/auth/tokens/", sess.value, string(raw))
	if err != nil {
		return err
	}
	want := map[outcome][]int{}
	for _, j := range poss {
		st := u.history[j].state
		o := loginOutcome(st, u.cur().password, otp, haveCode && c.accepts(st))
		want[o] = append(want[o], j)
	}
	what := fmt.Sprintf("POST /api/auth/tokens/ on %s with live session %s and the password", w.f.insts[s.inst].name, sess)
	if haveCode {
		what += " and " + c.describe()
	} else if len(want[mfaRequired]) > 0 {
		what += " and no code"
	}
	got := replyOutcome(r)
	switch {
	case taken == nil && r.status == 201, taken != nil && r.status == 409 && r.code() == "conflict":
		got = granted
	case r.status == 200 || r.status == 201:
		got = outcome(fmt.Sprint(r.status))
	}
	if _, ok := want[got]; !ok || got == mfaRequired && r.str("mfa_token") != "" {
		return w.fail("pat-create", "%s = %s; want %s, never an mfa_token (versions %v)", what, r, patOutcomes(want, taken != nil), poss)
	}
	if got != granted || taken != nil {
		return nil
	}
	p.id, p.expiresAt = r.str("id"), parseTime(r.str("expires_at"))
	value := r.str("token")
	var scopes []string
	for _, x := range anyList(r.body["scopes"]) {
		s, _ := x.(string)
		scopes = append(scopes, s)
	}
	switch {
	case !validPAT(value) || p.id == "" || r.str("name") != p.name || !slices.Equal(scopes, p.scopes):
		return w.fail("pat-create", "%s = %s; want 201 with an authsvc_pat_ token, an id, name %s and scopes %v", what, r, p.name, p.scopes)
	case !expires.IsZero() && !p.expiresAt.Equal(expires):
		return w.fail("pat-create", "%s and expires_at %s = %s; want that expires_at", what, expires.UTC().Format(time.RFC3339), r)
	case expires.IsZero() && (p.expiresAt.Before(now.Add(30*24*time.Hour-time.Minute)) || p.expiresAt.After(time.Now().Add(30*24*time.Hour))):
		return w.fail("pat-create", "%s and no expires_at = %s; want the default, 30 days from now", what, r)
	}
	w.m.issuePAT(s.user, value, fmt.Sprintf("%s at step %d", what, w.stepNo), p)
	return nil
}

// patOutcomes is want with a grant written as a create answers it: 201,
// or 409 conflict when the name is taken.
func patOutcomes(want map[outcome][]int, taken bool) string {
	if taken {
		return strings.Replace(outcomes(want), string(granted), "409 conflict", 1)
	}
	return strings.Replace(outcomes(want), string(granted), "201", 1)
}

// validPAT reports whether v has the form of a personal access token.
func validPAT(v string) bool {
	return len(v) == tokens.PATLength && strings.HasPrefix(v, tokens.PATPrefix)
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
}

func anyList(v any) []any {
	list, _ := v.([]any)
	return list
}

// opCLITokenCreate mints a token with `authsvc token create`, as an
// operator does for a service account (no password): exit 0 and a token
// on stdout that works at once on every instance, for a user who exists
// and is enabled; a refusal for one who is not (odd alt tries that).
func (w *walker) opCLITokenCreate(s step) error {
	st := w.m.users[s.user].cur()
	able := st.exists && !st.disabled
	if !able && s.alt%2 == 0 {
		return errSkip
	}
	p := &patInfo{name: fmt.Sprintf("cli-%d", w.m.nextID), scopes: patScopes[s.alt%len(patScopes)], createdOn: -1}
	args := []string{"--name", p.name}
	for _, sc := range p.scopes {
		args = append(args, "--scope", sc)
	}
	ttl := 30 * 24 * time.Hour
	if (s.alt/3)%2 == 0 {
		ttl = 2 * time.Hour
		args = append(args, "--expires", "2h")
	}
	p.createdAt = time.Now()
	res := w.f.tokenCLI("create", append(args, s.user)...)
	what := fmt.Sprintf("authsvc token create %s %s", strings.Join(args, " "), s.user)
	if !able {
		if res.code == 0 {
			return w.fail("cli", "%s of a user who is disabled or gone = %s; want a refusal", what, res)
		}
		return nil
	}
	value := strings.TrimSpace(res.stdout)
	if res.code != 0 || !validPAT(value) {
		return w.fail("cli", "%s = %s; want exit 0 and a token on stdout", what, res)
	}
	p.expiresAt = p.createdAt.Add(ttl)
	w.m.issuePAT(s.user, value, fmt.Sprintf("%s at step %d", what, w.stepNo), p)
	return nil
}

// opPATRevoke revokes one of the user's live personal access tokens: with
// DELETE /api/auth/tokens/{id} and a live session (204; refused at once
// by the instance that answered), or, for alt a multiple of 4, with
// `authsvc token revoke` (the directory's bound). A token the CLI made
// has an id the walk learns from the listing.
func (w *walker) opPATRevoke(s step) error {
	w.m.expire(time.Now().Add(expiryMargin))
	tk := w.pickPAT(w.m.livePATs(s.user, ""), s.pick)
	if tk == nil {
		return errSkip
	}
	cli := s.alt%4 == 0
	sess := w.liveToken(s.user, s.alt)
	if sess == nil && (!cli || tk.pat.id == "") {
		return errSkip
	}
	if tk.pat.id == "" {
		if err := w.listPATs(s.inst, sess); err != nil {
			return err
		}
		if tk.pat.id == "" {
			return errSkip // the instance has not seen the CLI's token yet
		}
	}
	if cli {
		res := w.f.tokenCLI("revoke", tk.pat.id)
		now := time.Now()
		if res.code != 0 {
			return w.fail("cli", "authsvc token revoke %s (%s) = %s; want exit 0", tk.pat.id, tk, res)
		}
		w.m.kill(tk, now, -1)
		return nil
	}
	if err := w.want(s.inst, "DELETE", "/api/auth/tokens/"+tk.pat.id, sess, "", 204); err != nil {
		return err
	}
	w.m.kill(tk, time.Now(), s.inst)
	return nil
}

// opPATList lists the user's tokens with GET /api/auth/tokens/ and a live
// session, and checks the listing (listPATs).
func (w *walker) opPATList(s step) error {
	sess := w.liveToken(s.user, s.pick)
	if sess == nil {
		return errSkip
	}
	return w.listPATs(s.inst, sess)
}

// listPATs lists sess's user's tokens on instance i, learns the ids of
// the tokens the CLI made, and checks the listing against the model: no
// token that is dead on that instance (it refused it, or its bound has
// passed), and every live one the instance made or that was made longer
// than the directory's bound ago, each with its prefix and scopes.
func (w *walker) listPATs(i int, sess *token) error {
	w.m.expire(time.Now().Add(expiryMargin))
	before := time.Now()
	r, err := w.call(i, "GET", "/api/auth/tokens/", sess.value, "")
	if err != nil {
		return err
	}
	what := fmt.Sprintf("GET /api/auth/tokens/ on %s with %s", w.f.insts[i].name, sess)
	if r.status != 200 {
		return w.fail("pat-list", "%s = %s; want 200", what, r)
	}
	listed := map[string]bool{}
	for _, e := range anyList(r.body["tokens"]) {
		e, _ := e.(map[string]any)
		name, _ := e["name"].(string)
		id, _ := e["id"].(string)
		prefix, _ := e["prefix"].(string)
		_, leaks := e["token"]
		listed[name] = true
		var tk *token
		for _, x := range w.m.tokens {
			if x.pat != nil && x.user == sess.user && x.pat.name == name {
				tk = x
			}
		}
		switch {
		case leaks:
			return w.fail("pat-list", "%s lists a token itself: %s; want the token in the create reply alone", what, r)
		case tk == nil:
			return w.fail("pat-list", "%s = %s; lists %q, a token refused everywhere (or never made); want live ones only", what, r, name)
		case tk.state != live && (tk.pat.refusedOn[i] || before.After(tk.deadline.Add(grace))):
			return w.fail("pat-list", "%s = %s; lists %s, dead on %s; want live ones only", what, r, tk, w.f.insts[i].name)
		case tk.pat.id != "" && id != tk.pat.id || prefix != tk.value[:tokens.PATShownPrefix]:
			return w.fail("pat-list", "%s = %s; lists %s with id %q prefix %q; want id %q and the token's first %d characters", what, r, tk, id, prefix, tk.pat.id, tokens.PATShownPrefix)
		}
		tk.pat.id = id
	}
	for _, tk := range w.m.livePATs(sess.user, "") {
		if !listed[tk.pat.name] && (tk.pat.createdOn == i || before.Sub(tk.pat.createdAt) > directoryBound+grace) {
			return w.fail("pat-list", "%s = %s; want live token %s listed", what, r, tk)
		}
	}
	return nil
}

// sessionOnly are endpoints a personal access token may not use, whatever
// its scopes: 403 insufficient_scope.
var sessionOnly = []struct{ method, path string }{
	{"POST", "/api/auth/logout/"},
	{"POST", "/api/auth/logoutall/"},
	{"GET", "/api/auth/sessions/"},
	{"POST", "/api/auth/password/"},
	{"GET", "/api/auth/tokens/"},
	{"POST", "/api/auth/tokens/"},
	{"GET", "/api/auth/mfa/"},
}

// opPATUse uses one of the user's live personal access tokens on the
// step's instance: GET /api/auth/info (200 as the user; 403
// insufficient_scope without the info scope), or, for alt%3 == 2, an
// endpoint for sessions only, which answers 403 insufficient_scope and
// changes nothing.
func (w *walker) opPATUse(s step) error {
	w.m.expire(time.Now().Add(expiryMargin))
	tk := w.pickPAT(w.m.livePATs(s.user, ""), s.pick)
	if tk == nil {
		return errSkip
	}
	if s.alt%3 != 2 {
		st, err := w.info(s.inst, tk)
		if err == nil && st != 200 {
			err = w.fail("live-token-refused", "live token %s on %s: GET /api/auth/info = 401; want it accepted", tk, w.f.insts[s.inst].name)
		}
		return err
	}
	e := sessionOnly[(s.alt/3)%len(sessionOnly)]
	u := w.m.users[s.user]
	body := ""
	switch e.path {
	case "/api/auth/password/":
		body = jsonBody(map[string]string{"current_password": u.cur().password, "new_password": "a-pat-may-not-set-this-one"})
	case "/api/auth/tokens/":
		body = jsonBody(map[string]string{"name": "from-a-pat", "password": u.cur().password})
	}
	r, err := w.call(s.inst, e.method, e.path, tk.value, body)
	if err != nil {
		return err
	}
	if r.status != 403 || r.code() != "insufficient_scope" {
		return w.fail("pat-scope", "%s %s on %s with live %s = %s; want 403 insufficient_scope (sessions only)", e.method, e.path, w.f.insts[s.inst].name, tk, r)
	}
	return nil
}

// opIntrospect asks POST /api/auth/introspect/ about a token the walk
// holds (any user's, any state, a session or a personal access token),
// or about junk, with a live personal access token that has the
// introspect scope: active must agree with the model as info's answer
// would. alt%8 == 0 sends a session as the caller, 1 a personal access
// token without the scope: 403 insufficient_scope.
func (w *walker) opIntrospect(s step) error {
	w.m.expire(time.Now().Add(expiryMargin))
	var caller *token
	variant := s.alt % 8
	switch variant {
	case 0:
		caller = w.liveToken(s.user, s.pick)
	case 1:
		var without []*token
		for _, tk := range w.m.livePATs("", "") {
			if !tk.pat.has("introspect") {
				without = append(without, tk)
			}
		}
		caller = w.pickPAT(without, s.pick)
	default:
		caller = w.pickPAT(w.m.livePATs("", "introspect"), s.pick)
	}
	if caller == nil {
		return errSkip
	}
	var target *token
	value := "not-a-token"
	if variant == 2 {
		if s.pick%2 == 0 {
			value, _ = tokens.NewPAT() // well-formed, never made
		}
		w.note("about junk")
	} else if len(w.m.tokens) > 0 {
		target = w.m.tokens[(s.alt/8)%len(w.m.tokens)]
		value = target.value
		w.note("about #%d", target.id)
	}
	ctype, body := "application/x-www-form-urlencoded", "token="+url.QueryEscape(value)
	if s.pick%2 == 1 {
		ctype, body = "application/json", jsonBody(map[string]string{"token": value})
	}
	r, err := w.callAs(s.inst, "POST", "/api/auth/introspect/", caller.value, ctype, body)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("POST /api/auth/introspect/ on %s by %s", w.f.insts[s.inst].name, caller)
	if variant < 2 {
		if r.status != 403 || r.code() != "insufficient_scope" {
			return w.fail("introspect", "%s, without the introspect scope, = %s; want 403 insufficient_scope", what, r)
		}
		return nil
	}
	if r.status != 200 {
		return w.fail("introspect", "%s = %s; want 200", what, r)
	}
	active := r.body["active"] == true
	if !active && (len(r.body) != 1 || r.body["active"] != false) {
		return w.fail("introspect", "%s = %s; want {\"active\": false} and nothing more", what, r)
	}
	if target == nil {
		if active {
			return w.fail("introspect", "%s about junk = %s; want {\"active\": false}", what, r)
		}
		return nil
	}
	what += " about " + target.String()
	if active {
		if err := w.checkDescription(what, r, target); err != nil {
			return err
		}
	}
	return w.observe(s.inst, target, active, what)
}

// checkDescription checks an active introspection reply about tk.
func (w *walker) checkDescription(what string, r reply, tk *token) error {
	kind, scope := "session", ""
	if tk.pat != nil {
		kind, scope = "pat", strings.Join(tk.pat.scopes, " ")
	}
	exp, _ := r.body["exp"].(float64)
	badExp := tk.pat != nil && tk.pat.exactExpiry && int64(exp) != tk.pat.expiresAt.Unix()
	if r.str("token_type") != kind || r.str("username") != tk.user || r.str("sub") != tk.user || r.str("scope") != scope || badExp {
		return w.fail("introspect", "%s = %s; want active, token_type %s, username and sub %s, scope %q and its expiry as exp", what, r, kind, tk.user, scope)
	}
	return nil
}

// observe judges one answer of instance i about tk other than the
// check's (an introspection): accepted or refused, against its state as
// checkToken would, without polling.
func (w *walker) observe(i int, tk *token, accepted bool, what string) error {
	now := time.Now()
	switch {
	case tk.state == live && !accepted:
		return w.fail("live-token-refused", "%s = inactive; want active (a live token)", what)
	case tk.state == live, tk.state == uncertain && !now.Before(tk.deadline):
		// The latter: its first answer after its bound decides; the check's.
	case accepted && now.After(tk.deadline.Add(grace)):
		return w.fail("dead-token-accepted", "%s = active %v after its bound ended; want inactive", what, now.Sub(tk.deadline).Round(time.Millisecond))
	case accepted && tk.pat != nil && tk.pat.refusedOn[i]:
		return w.fail("dead-token-revived", "%s = active after %s refused it; want inactive (dead stays dead)", what, w.f.insts[i].name)
	case accepted && tk.pat == nil && !tk.refusedAt.IsZero() && now.Sub(tk.refusedAt) > storeBound+grace:
		return w.fail("dead-token-revived", "%s = active %v after an instance refused it; want inactive (dead stays dead)", what, now.Sub(tk.refusedAt).Round(time.Millisecond))
	case !accepted:
		w.refused(i, tk, now)
	}
	return nil
}

// checkPAT checks personal access token tk on every instance against its
// state: live, accepted everywhere; revoked through the API, refused at
// once by the instance that did it, and within the store's bound by those
// sharing its store (patLags); within its bound, either, but never
// accepted again by an instance that refused it; past its bound, refused
// everywhere.
func (w *walker) checkPAT(tk *token) error {
	w.m.expire(time.Now().Add(expiryMargin))
	if tk.state == dying && tk.actor >= 0 && !tk.checked {
		if err := w.revokedAtOnce(tk, w.m.sharedStore); err != nil {
			return err
		}
	}
	switch {
	case tk.state == live:
		return w.acceptedEverywhere(tk)
	case time.Now().Before(tk.deadline):
		return w.observeAll(tk)
	}
	return w.refusedEverywhere(tk)
}

// observeAll asks every instance about tk, within its bound, and judges
// each answer (observe).
func (w *walker) observeAll(tk *token) error {
	for i, inst := range w.f.insts {
		st, err := w.info(i, tk)
		if err != nil {
			return err
		}
		if err := w.observe(i, tk, st == 200, fmt.Sprintf("GET /api/auth/info on %s with %s", inst.name, tk)); err != nil {
			return err
		}
	}
	return nil
}
