package integration

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// The walk's password reset links (API.md, "Password reset"): their
// operations and the model's rule. A user has at most one live link, the
// one `user reset-link` printed last; it dies when a newer one is made,
// when the password is set (`user passwd`, the user's own change, a
// confirm: the link is spent), when the user is disabled or deleted, and
// when it expires; a dead link stays dead (re-enabling or re-adding the
// user brings none back). A confirm reads the user's record under the
// directory's lock, so the link's state is exact on every instance at
// once: no bound applies to it. A good confirm sets the password with a
// password change's reach, and kills every session and personal access
// token of the user as `user passwd` does, but through the API of the
// instance that answered (refused there at once, within the store's
// bound where the instances share one); second factors stay.

// A resetLink is a link the CLI printed.
type resetLink struct {
	id         int // L#id in the steps' descriptions
	uid, token string
	ttl        time.Duration
	// sent and answered bound when the CLI made it: its expiry is
	// between sent+ttl and answered+ttl.
	sent, answered time.Time
}

func (l *resetLink) String() string { return fmt.Sprintf("L%d", l.id) }

// linkTTLs are the --ttl values the walk draws: "" for the default (an
// hour), and one short enough to expire within a walk.
var linkTTLs = []struct {
	flag string
	ttl  time.Duration
}{{"", time.Hour}, {"", time.Hour}, {"3s", 3 * time.Second}}

// resetURLPattern is the --reset-url the walk draws now and then.
const resetURLPattern = "https://app.example.com/reset/{uid}/{token}?from=walk"

// weakPassword is below the policy's least length: 400 weak_password.
const weakPassword = "too-short"

// killLink makes the user's live link, if any, dead.
func (u *userModel) killLink() {
	if u.link != nil {
		u.deadLinks = append(u.deadLinks, u.link)
		u.link = nil
	}
}

// expireLink makes the user's live link dead once it has surely expired
// at now.
func (u *userModel) expireLink(now time.Time) {
	if l := u.link; l != nil && now.After(l.answered.Add(l.ttl+expiryMargin)) {
		u.killLink()
	}
}

// linkSure reports whether the user's live link is surely not expired at
// now (a request sent now may be judged a moment later).
func (u *userModel) linkSure(now time.Time) bool {
	return u.link != nil && now.Add(expiryMargin).Before(u.link.sent.Add(u.link.ttl))
}

// opCLIResetLink makes a link with `authsvc user reset-link`: exit 0 and
// the link alone on stdout (--reset-url's pattern, {uid}/{token} by
// default) for a user who exists and is enabled, whose older link dies;
// exit 1 and nothing on stdout for a disabled user, a refusal for one who
// is gone (odd alt tries those).
func (w *walker) opCLIResetLink(s step) error {
	u := w.m.users[s.user]
	st := u.cur()
	able := st.exists && !st.disabled
	if !able && s.alt%2 == 0 {
		return errSkip
	}
	ttl := linkTTLs[(s.alt/2)%len(linkTTLs)]
	pattern := "{uid}/{token}"
	var args []string
	if ttl.flag != "" {
		args = append(args, "--ttl", ttl.flag)
	}
	if (s.alt/6)%3 == 2 {
		pattern = resetURLPattern
		args = append(args, "--reset-url", pattern)
	}
	args = append(args, s.user)
	sent := time.Now()
	res := w.f.cli("", "reset-link", args...)
	answered := time.Now()
	what := fmt.Sprintf("authsvc user reset-link %s", strings.Join(args, " "))
	switch {
	case !able && st.exists && (res.code != 1 || res.stdout != ""):
		return w.fail("cli", "%s of a disabled user = %s; want exit 1 and nothing on stdout", what, res)
	case !able && (res.code == 0 || res.stdout != ""):
		return w.fail("cli", "%s of a user who is gone = %s; want a refusal and nothing on stdout", what, res)
	case !able:
		return nil
	}
	l := &resetLink{id: w.m.nextID, ttl: ttl.ttl, sent: sent, answered: answered}
	w.m.nextID++
	line, ok := strings.CutSuffix(res.stdout, "\n")
	prefix, suffix, _ := strings.Cut(pattern, "{uid}/{token}")
	line, ok1 := strings.CutPrefix(line, prefix)
	line, ok2 := strings.CutSuffix(line, suffix)
	l.uid, l.token, _ = strings.Cut(line, "/")
	raw, err := base64.RawURLEncoding.DecodeString(l.token)
	if res.code != 0 || !ok || !ok1 || !ok2 || strings.Contains(line, "\n") || l.uid != base64.RawURLEncoding.EncodeToString([]byte(s.user)) || err != nil || len(raw) != 32 {
		return w.fail("cli", "%s = exit %d, stderr %q; want exit 0 and one line on stdout, %s with the username and 32 bytes in base64url", what, res.code, res.stderr, pattern)
	}
	u.killLink()
	u.link = l
	w.note("made %s", l)
	return nil
}

// opResetConfirm sends POST /api/auth/password/reset/confirm/ to the
// step's instance. alt%16 draws what: 0–9 the user's live link and a new
// password (204); 10–11 the live link and a weak password (400
// weak_password, the link lives on); 12–13 one of the user's dead links
// (400 invalid_token); 14 a token never made, with the user's uid (400
// invalid_token); 15 the live link, or a dead one of another user with
// this user's uid (400 invalid_token). Wrong links are kept rare: each
// counts against the client as a failed login does.
func (w *walker) opResetConfirm(s step) error {
	u := w.m.users[s.user]
	now := time.Now()
	u.expireLink(now)
	variant := s.alt % 16
	uid, token, password := "", "", u.newPasswordPeek(s.user)
	good := false
	switch {
	case variant < 12 || variant == 15 && s.pick%2 == 0:
		if !u.linkSure(now) {
			return errSkip
		}
		uid, token, good = u.link.uid, u.link.token, true
		if variant == 10 || variant == 11 {
			password = weakPassword
		}
		w.note("with %s, live", u.link)
	case variant < 14:
		if len(u.deadLinks) == 0 {
			return errSkip
		}
		l := u.deadLinks[len(u.deadLinks)-1-s.pick%len(u.deadLinks)]
		uid, token = l.uid, l.token
		w.note("with %s, dead", l)
	case variant == 14:
		raw := make([]byte, 32)
		for k := range raw {
			raw[k] = byte(s.pick*31 + s.alt*7 + k)
		}
		uid, token = base64.RawURLEncoding.EncodeToString([]byte(s.user)), base64.RawURLEncoding.EncodeToString(raw)
		w.note("with a token never made")
	default:
		other := w.m.users[w.m.names[s.pick%len(w.m.names)]]
		var l *resetLink
		if len(other.deadLinks) > 0 {
			l = other.deadLinks[len(other.deadLinks)-1]
		} else if other != u && other.link != nil {
			l = other.link
		}
		if l == nil {
			return errSkip
		}
		uid, token = base64.RawURLEncoding.EncodeToString([]byte(s.user)), l.token
		w.note("with the token of %s and %s's uid", l, s.user)
	}
	r, err := w.call(s.inst, "POST", "/api/auth/password/reset/confirm/", "", jsonBody(map[string]string{"uid": uid, "token": token, "new_password": password}))
	if err != nil {
		return err
	}
	what := fmt.Sprintf("POST /api/auth/password/reset/confirm/ on %s for %s", w.f.insts[s.inst].name, s.user)
	switch {
	case good && password == weakPassword:
		if r.status != 400 || r.code() != "weak_password" {
			return w.fail("reset", "%s with the live link and a weak password = %s; want 400 weak_password", what, r)
		}
		return nil
	case !good:
		if r.status != 400 || r.code() != "invalid_token" {
			return w.fail("reset", "%s with a link that is not the user's live one = %s; want 400 invalid_token", what, r)
		}
		return nil
	case r.status != 204:
		return w.fail("reset", "%s with %s, the user's live link, and a new password = %s; want 204", what, u.link, r)
	}
	w.resetDone(s.user, s.inst, time.Now())
	return nil
}

// resetDone records a good confirm on instance i at now: the link is
// spent, the password is the new one (hashed at serve's policy), and
// every session and personal access token of the user dies through i's
// API; second factors stay.
func (w *walker) resetDone(name string, i int, now time.Time) {
	u := w.m.users[name]
	u.killLink()
	w.m.killUser(name, now, i, nil, true)
	st := u.cur()
	st.password = u.newPassword(name)
	w.m.change(name, st, now, false, true, i)
	u.weak = false
}

// newPasswordPeek is the password newPassword will return next.
func (u *userModel) newPasswordPeek(name string) string {
	return passwordNo(name, u.changes+1)
}
