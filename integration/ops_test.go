package integration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"authsvc/internal/mfa/mfatest"
)

// A step is one operation of a walk, as the generator drew it: which
// operation, on which instance and user, and two numbers that choose a
// token, a code or a variant when it runs. A step names no token or
// password itself, so that a step list replays on a fresh fleet, steps
// removed or not.
type step struct {
	op   string
	inst int
	user string
	pick int
	alt  int
}

func (s step) String() string {
	return fmt.Sprintf("%s %s @%c pick=%d alt=%d", s.op, s.user, 'A'+rune(s.inst), s.pick, s.alt)
}

// parseStep reads a step back from its String.
func parseStep(text string) (step, error) {
	var s step
	var inst rune
	_, err := fmt.Sscanf(strings.TrimSpace(text), "%s %s @%c pick=%d alt=%d", &s.op, &s.user, &inst, &s.pick, &s.alt)
	s.inst = int(inst - 'A')
	if err == nil && opByName(s.op) == nil {
		err = fmt.Errorf("no operation %q", s.op)
	}
	return s, err
}

// errSkip: the step's precondition does not hold in the model now; the
// step does nothing.
var errSkip = errors.New("precondition does not hold")

// An operation is one kind of step: how often the generator draws it, and
// what it does to the fleet and to the model. run checks the step's
// precondition first and returns errSkip, having sent nothing, when it
// does not hold; it returns a *failure when the fleet broke the contract.
type operation struct {
	name   string
	weight int
	run    func(w *walker, s step) error
}

var operations []operation // set in init: the table refers to the walker's methods

func init() {
	operations = []operation{
		{"login", 8, (*walker).opLogin},
		{"rehash", 2, (*walker).opRehash},
		{"logout", 2, (*walker).opLogout},
		{"logoutall", 1, (*walker).opLogoutAll},
		{"session-delete", 2, (*walker).opSessionDelete},
		{"password", 4, (*walker).opPassword},
		{"mfa-enrol", 3, (*walker).opEnrol},
		{"mfa-confirm", 4, (*walker).opConfirm},
		{"mfa-remove", 2, (*walker).opRemove},
		{"cli-passwd", 2, cliOp("passwd")},
		{"cli-disable", 1, cliOp("disable")},
		{"cli-enable", 3, cliOp("enable")},
		{"cli-logout", 1, cliOp("logout")},
		{"cli-del", 1, cliOp("del")},
		{"cli-add", 3, cliOp("add")},
		{"cli-unlock", 1, cliOp("unlock")},
		{"cli-reset-mfa", 1, cliOp("reset-mfa")},
		{"pat-create", 4, (*walker).opPATCreate},
		{"pat-revoke", 3, (*walker).opPATRevoke},
		{"pat-use", 2, (*walker).opPATUse},
		{"pat-list", 1, (*walker).opPATList},
		{"introspect", 3, (*walker).opIntrospect},
		{"cli-token-create", 2, (*walker).opCLITokenCreate},
		{"cli-reset-link", 3, (*walker).opCLIResetLink},
		{"reset-confirm", 6, (*walker).opResetConfirm},
		{"hup", 1, (*walker).opHup},
		{"restart", 1, (*walker).opRestart},
	}
	operations = append(operations, adminOperations...) // adminops_test.go
}

func opByName(name string) *operation {
	for i := range operations {
		if operations[i].name == name {
			return &operations[i]
		}
	}
	return nil
}

// liveToken is the step's pick among the user's live tokens, or nil.
func (w *walker) liveToken(name string, pick int) *token {
	live := w.m.liveTokens(name)
	if len(live) == 0 {
		return nil
	}
	tk := live[pick%len(live)]
	w.note("with #%d", tk.id)
	return tk
}

// A code is a second-factor code the walk sends, and what the model knows
// of which versions accept it.
type code struct {
	value    string
	recovery *recoveryCode // nil for a TOTP code
	secret   string        // a TOTP code's secret
	counter  int64
}

// accepts reports whether a user in state st takes c (unspent as the
// model knows when it was drawn).
func (c code) accepts(st userState) bool {
	if c.recovery != nil {
		return st.totp != "" && st.factors == c.recovery.factors
	}
	return st.totp != "" && st.totp == c.secret
}

// describe names c without its value.
func (c code) describe() string {
	if c.recovery != nil {
		return "a recovery code"
	}
	return fmt.Sprintf("TOTP counter %d", c.counter)
}

// recoveryCode returns an unspent recovery code of the user's current
// factor set, and spends it in the model (once sent, whatever the answer,
// it is never sent again as a good code).
func (w *walker) recoveryCode(name string) (code, bool) {
	u := w.m.users[name]
	for i := range u.codes {
		rc := &u.codes[i]
		if !rc.spent && rc.factors == u.cur().factors {
			rc.spent = true
			return code{value: rc.code, recovery: rc}, true
		}
	}
	return code{}, false
}

// totpCode returns a TOTP code of secret for a counter the user has never
// sent (each works once, fleet-wide) that the servers take now and a
// moment from now (the current step's or the next), from oathtool.
func (w *walker) totpCode(name, secret string) (code, bool) {
	u := w.m.users[name]
	now := time.Now().Unix() / 30
	for _, c := range []int64{now, now + 1} {
		if c > u.lastCounter {
			u.lastCounter = c
			return code{value: mfatest.Code32(w.t, secret, time.Unix(c*30, 0)), secret: secret, counter: c}, true
		}
	}
	return code{}, false
}

// anyCode returns a code for the user's current authenticator: a recovery
// code when preferRecovery and one is left, else a TOTP code, else a
// recovery code.
func (w *walker) anyCode(name string, preferRecovery bool) (code, bool) {
	secret := w.m.users[name].cur().totp
	if secret == "" {
		return code{}, false
	}
	if preferRecovery {
		if c, ok := w.recoveryCode(name); ok {
			return c, true
		}
	}
	if c, ok := w.totpCode(name, secret); ok {
		return c, true
	}
	return w.recoveryCode(name)
}

// opLogin logs in as the user with the current password, on the step's
// instance; with a second factor, alt chooses the second step with a
// recovery code (0), with a TOTP code (1) or a one-step "otp" (2).
func (w *walker) opLogin(s step) error {
	u := w.m.users[s.user]
	if !u.cur().exists {
		return errSkip
	}
	_, err := w.login(s.inst, s.user, u.cur().password, s.alt, "login")
	return err
}

// opRehash logs in as a user whose stored hash is below the policy (the
// login rewrites it in the background) and, for even alt, changes the
// password at once with the login's token, racing the rehash's write.
func (w *walker) opRehash(s step) error {
	u := w.m.users[s.user]
	st := u.cur()
	if !u.weak || !st.exists || st.disabled {
		return errSkip
	}
	tk, err := w.login(s.inst, s.user, st.password, s.alt, "rehash login")
	if err != nil || tk == nil || tk.state != live || s.alt%2 != 0 {
		return err
	}
	return w.changePassword(s.inst, tk)
}

// login sends a login of name with pw to instance i, and its second step
// when one is asked for, checks each answer against the versions the
// instance may answer from, and returns the token it got (nil for none).
func (w *walker) login(i int, name, pw string, alt int, origin string) (*token, error) {
	u := w.m.users[name]
	now := time.Now()
	poss := w.m.possible(i, name, now)
	// A code, drawn only when some version the instance may answer from
	// has an authenticator.
	var c code
	var haveCode bool
	for _, j := range poss {
		if u.history[j].state.totp != "" && origin != "check" {
			c, haveCode = w.anyCode(name, alt%3 != 1)
			break
		}
	}
	body := map[string]string{"username": name, "password": pw}
	oneStep := alt%3 == 2 && haveCode
	if oneStep {
		body["otp"] = c.value
	}
	r, err := w.call(i, "POST", "/api/auth/login/", "", jsonBody(body))
	if err != nil {
		return nil, err
	}
	got := replyOutcome(r)
	want := map[outcome][]int{}
	for _, j := range poss {
		st := u.history[j].state
		o := loginOutcome(st, pw, body["otp"], oneStep && c.accepts(st))
		want[o] = append(want[o], j)
	}
	what := fmt.Sprintf("%s of %s on %s", origin, name, w.f.insts[i].name)
	if oneStep {
		what += " with otp (" + c.describe() + ")"
	}
	if _, ok := want[got]; !ok {
		return nil, w.fail("login", "%s = %s; want %s (versions %v)", what, r, outcomes(want), poss)
	}
	if got != refused && w.m.joined(name, want[got][0]) {
		u.weak = false // the password was checked: a rehash is on its way
	}
	switch got {
	case granted:
		tk := w.m.issue(name, r.str("token"), fmt.Sprintf("%s at step %d", what, w.stepNo), want[got], now, origin == "check")
		return tk, nil
	case mfaRequired:
		if !haveCode || origin == "check" {
			return nil, nil
		}
		return w.secondStep(i, name, r.str("mfa_token"), c, want[mfaRequired], what)
	}
	return nil, nil
}

// secondStep sends mfa_token and c to instance i: the versions in mfa
// (those that asked for the second step) decide what it may answer.
func (w *walker) secondStep(i int, name, mfaToken string, c code, mfa []int, what string) (*token, error) {
	u := w.m.users[name]
	now := time.Now()
	r, err := w.call(i, "POST", "/api/auth/login/mfa/", "", jsonBody(map[string]string{"mfa_token": mfaToken, "code": c.value}))
	if err != nil {
		return nil, err
	}
	var ok, bad []int
	for _, j := range mfa {
		if c.accepts(u.history[j].state) {
			ok = append(ok, j)
		} else {
			bad = append(bad, j)
		}
	}
	what += ", second step with " + c.describe()
	switch {
	case r.status == 200 && len(ok) > 0:
		return w.m.issue(name, r.str("token"), fmt.Sprintf("%s at step %d", what, w.stepNo), ok, now, false), nil
	case r.status == 401 && r.code() == "invalid_credentials" && len(bad) > 0:
		return nil, nil
	}
	return nil, w.fail("login", "%s = %s; want %s", what, r, map[bool]string{true: "200", false: "401 invalid_credentials"}[len(ok) > 0])
}

func replyOutcome(r reply) outcome {
	switch {
	case r.status == 200:
		return granted
	case r.status == 401 && r.code() == "mfa_required":
		return mfaRequired
	case r.status == 401 && r.code() == "invalid_credentials":
		return refused
	}
	return outcome(fmt.Sprint(r.status, " ", r.code()))
}

func outcomes(want map[outcome][]int) string {
	var s []string
	for o := range want {
		s = append(s, string(o))
	}
	slices.Sort(s)
	return strings.Join(s, " or ")
}

// opLogout revokes one live token with POST /api/auth/logout/.
func (w *walker) opLogout(s step) error {
	tk := w.liveToken(s.user, s.pick)
	if tk == nil {
		return errSkip
	}
	if err := w.want(s.inst, "POST", "/api/auth/logout/", tk, "", 204); err != nil {
		return err
	}
	w.m.kill(tk, time.Now(), s.inst)
	return nil
}

// opLogoutAll revokes every token of the user with POST /api/auth/logoutall/.
func (w *walker) opLogoutAll(s step) error {
	tk := w.liveToken(s.user, s.pick)
	if tk == nil {
		return errSkip
	}
	if err := w.want(s.inst, "POST", "/api/auth/logoutall/", tk, "", 204); err != nil {
		return err
	}
	w.m.killUser(s.user, time.Now(), s.inst, nil, false)
	return nil
}

// opSessionDelete: a live token (pick) ends another (alt) of the same
// user, maybe itself, by its session id, which the target's own listing
// marks current.
func (w *walker) opSessionDelete(s step) error {
	by, target := w.liveToken(s.user, s.pick), w.liveToken(s.user, s.alt)
	if by == nil {
		return errSkip
	}
	w.note("ending #%d", target.id)
	r, err := w.call(s.inst, "GET", "/api/auth/sessions/", target.value, "")
	if err != nil {
		return err
	}
	if r.status != 200 {
		return w.fail("live-token-refused", "GET /api/auth/sessions/ on %s with live token %s = %s; want 200", w.f.insts[s.inst].name, target, r)
	}
	var id string
	list, _ := r.body["sessions"].([]any)
	for _, e := range list {
		if e, _ := e.(map[string]any); e["current"] == true {
			id, _ = e["id"].(string)
		}
	}
	if id == "" {
		return w.fail("sessions", "GET /api/auth/sessions/ on %s with %s lists no current session: %s", w.f.insts[s.inst].name, target, r)
	}
	if err := w.want(s.inst, "DELETE", "/api/auth/sessions/"+id, by, "", 204); err != nil {
		return err
	}
	w.m.kill(target, time.Now(), s.inst)
	return nil
}

// opPassword changes the user's password with POST /api/auth/password/.
func (w *walker) opPassword(s step) error {
	tk := w.liveToken(s.user, s.pick)
	if tk == nil {
		return errSkip
	}
	return w.changePassword(s.inst, tk)
}

// changePassword changes tk's user's password on instance i: 200 with a
// new token, live everywhere at once; every other token dies.
func (w *walker) changePassword(i int, tk *token) error {
	u := w.m.users[tk.user]
	st := u.cur()
	next := u.newPassword(tk.user)
	r, err := w.call(i, "POST", "/api/auth/password/", tk.value, jsonBody(map[string]string{"current_password": st.password, "new_password": next}))
	if err != nil {
		return err
	}
	if r.status != 200 {
		return w.fail("password", "POST /api/auth/password/ on %s with live token %s and the current password = %s; want 200", w.f.insts[i].name, tk, r)
	}
	now := time.Now()
	w.m.killUser(tk.user, now, i, nil, false) // the user's own change: personal access tokens live on
	u.killLink()
	st.password = next
	w.m.change(tk.user, st, now, false, true, i)
	u.weak = false
	w.m.issue(tk.user, r.str("token"), fmt.Sprintf("password change on %s at step %d", w.f.insts[i].name, w.stepNo), []int{len(u.history) - 1}, now, false)
	return nil
}

// opEnrol starts an authenticator's enrolment: 200 with a secret, or 409
// mfa_enrolled while one is active (odd alt tries that).
func (w *walker) opEnrol(s step) error {
	u := w.m.users[s.user]
	tk := w.liveToken(s.user, s.pick)
	active := u.cur().totp != ""
	if tk == nil || (active && s.alt%2 == 0) {
		return errSkip
	}
	r, err := w.call(s.inst, "POST", "/api/auth/mfa/totp/", tk.value, jsonBody(map[string]string{"password": u.cur().password}))
	if err != nil {
		return err
	}
	if active {
		if r.status != 409 || r.code() != "mfa_enrolled" {
			return w.fail("mfa", "POST /api/auth/mfa/totp/ on %s with %s while an authenticator is active = %s; want 409 mfa_enrolled", w.f.insts[s.inst].name, tk, r)
		}
		return nil
	}
	if r.status != 200 || r.str("secret") == "" {
		return w.fail("mfa", "POST /api/auth/mfa/totp/ on %s with %s = %s; want 200 with a secret", w.f.insts[s.inst].name, tk, r)
	}
	u.pending, u.pendingBy, u.pendingAt = r.str("secret"), s.inst, time.Now()
	return nil
}

// opConfirm confirms the pending enrolment with a TOTP code: 200 with ten
// recovery codes; every other token of the user dies, the presenting one
// lives on. An instance that has not seen the enrolment (made on another
// within the directory's bound) may answer 400 or 401.
func (w *walker) opConfirm(s step) error {
	u := w.m.users[s.user]
	tk := w.liveToken(s.user, s.pick)
	if tk == nil || u.pending == "" || u.cur().totp != "" {
		return errSkip
	}
	c, ok := w.totpCode(s.user, u.pending)
	if !ok {
		return errSkip
	}
	r, err := w.call(s.inst, "POST", "/api/auth/mfa/totp/confirm/", tk.value, jsonBody(map[string]string{"code": c.value}))
	if err != nil {
		return err
	}
	now := time.Now()
	maybeUnseen := s.inst != u.pendingBy && now.Sub(u.pendingAt) < directoryBound
	if maybeUnseen && (r.status == 400 || r.status == 401) {
		return nil
	}
	list, _ := r.body["recovery_codes"].([]any)
	if r.status != 200 || len(list) != 10 {
		return w.fail("mfa", "POST /api/auth/mfa/totp/confirm/ on %s with %s and %s = %s; want 200 with 10 recovery codes", w.f.insts[s.inst].name, tk, c.describe(), r)
	}
	w.m.killUser(s.user, now, s.inst, tk, false)
	u.killLink() // the cut-off moved
	st := u.cur()
	st.totp, st.factors = u.pending, st.factors+1
	u.pending = ""
	w.m.change(s.user, st, now, false, true, s.inst)
	for _, v := range list {
		v, _ := v.(string)
		u.codes = append(u.codes, recoveryCode{code: v, factors: st.factors})
	}
	return nil
}

// opRemove removes the authenticator with the password and a code (alt:
// even for a recovery code, odd for a TOTP code): 204; every other token
// of the user dies, the presenting one lives on.
func (w *walker) opRemove(s step) error {
	u := w.m.users[s.user]
	tk := w.liveToken(s.user, s.pick)
	if tk == nil || u.cur().totp == "" {
		return errSkip
	}
	c, ok := w.anyCode(s.user, s.alt%2 == 0)
	if !ok {
		return errSkip
	}
	r, err := w.call(s.inst, "DELETE", "/api/auth/mfa/totp/", tk.value, jsonBody(map[string]string{"password": u.cur().password, "code": c.value}))
	if err != nil {
		return err
	}
	if r.status != 204 {
		return w.fail("mfa", "DELETE /api/auth/mfa/totp/ on %s with %s, the password and %s = %s; want 204", w.f.insts[s.inst].name, tk, c.describe(), r)
	}
	now := time.Now()
	w.m.killUser(s.user, now, s.inst, tk, false)
	u.killLink() // the cut-off moved
	st := u.cur()
	st.totp, st.factors = "", st.factors+1
	w.m.change(s.user, st, now, false, true, s.inst)
	return nil
}

// cliOp is the operation of `authsvc user sub`: it must exit 0, and the
// model records its change as the directory's alone (the 5 s bound).
func cliOp(sub string) func(*walker, step) error {
	return func(w *walker, s step) error {
		u := w.m.users[s.user]
		st := u.cur()
		var stdin string
		endsTokens := true // the command ends the user's sessions
		endsPATs := false  // and their personal access tokens (disable, del, passwd)
		record := true     // the command makes a version of the user
		kills := true      // tokens issued on the versions before it are not live
		switch sub {
		case "add":
			if st.exists {
				return errSkip
			}
			st = userState{exists: true, password: u.newPassword(s.user), factors: st.factors + 1}
			stdin, endsTokens = st.password, false
		case "passwd":
			if !st.exists {
				return errSkip
			}
			st.password = u.newPassword(s.user)
			stdin, endsPATs = st.password, true
		case "disable":
			if !st.exists || st.disabled {
				return errSkip
			}
			st.disabled, endsPATs = true, true
		case "enable":
			if !st.exists || !st.disabled {
				return errSkip
			}
			st.disabled, endsTokens, kills = false, false, false
		case "del":
			if !st.exists {
				return errSkip
			}
			st, endsPATs = userState{factors: st.factors + 1}, true
		case "reset-mfa":
			if !st.exists {
				return errSkip
			}
			if st.totp == "" && u.pending == "" {
				// Nothing to remove: the command changes nothing and ends
				// no token (cli.go's resetMFA, on purpose: a reset run
				// twice, or on the wrong user, ends no one's sessions).
				endsTokens, record = false, false
			}
			st.totp, st.factors = "", st.factors+1
		case "logout":
			if !st.exists {
				return errSkip
			}
			// A token issued after the cut-off, on any instance, is live.
			record = false
		case "unlock":
			if !st.exists {
				return errSkip
			}
			endsTokens, record = false, false
		}
		res := w.f.cli(stdin, sub, s.user)
		now := time.Now()
		if res.code != 0 {
			return w.fail("cli", "authsvc user %s %s = %s; want exit 0", sub, s.user, res)
		}
		switch sub {
		case "add", "passwd":
			u.weak = true
		case "del", "reset-mfa":
			u.pending = ""
		}
		if endsTokens { // the cut-off moves (logout and reset-mfa too): the reset link dies
			u.killLink()
			w.m.killUser(s.user, now, -1, nil, endsPATs)
		}
		if record {
			w.m.change(s.user, st, now, true, kills, -1)
		}
		return nil
	}
}

// opHup sends SIGHUP to the step's instance; once it has logged the reload
// it answers from the latest directory.
func (w *walker) opHup(s step) error {
	if w.f.hup(w.f.insts[s.inst]) {
		w.m.seenAll(s.inst)
	}
	return nil
}

// opRestart kills the step's instance with SIGKILL and starts it again,
// on its port (even alt) or a new one. On the memory store every session
// dies with it; on a shared store none does. Personal access tokens live
// in the directory: none dies.
func (w *walker) opRestart(s step) error {
	if err := w.f.restart(w.f.insts[s.inst], s.alt%2 == 0); err != nil {
		return &failure{kind: "restart", msg: err.Error()}
	}
	now := time.Now()
	w.m.seenAll(s.inst)
	if !w.m.sharedStore {
		for _, tk := range w.m.tokens {
			if tk.pat == nil {
				w.m.kill(tk, now, s.inst)
			}
		}
	}
	return nil
}
