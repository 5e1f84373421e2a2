package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"authsvc/internal/password"
	"authsvc/internal/throttle"
	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// A LoginGuard stands between a password and the hasher, for login and for
// any other request that checks a password: the throttle refuses guessing,
// the admission bounds the CPU spent on passwords, the tarpit slows
// refused clients down, and one audit line records each attempt's outcome.
type LoginGuard struct {
	Throttle  throttle.Throttle
	Admission *Admission
	Hasher    *password.Pool // nil: compare on the caller's goroutine
	Tarpit    *Tarpit        // nil: refusals are immediate
	Trusted   []netip.Prefix // proxies whose X-Forwarded-For is believed
	Log       *slog.Logger   // for the audit lines
	Now       func() time.Time
	Policy    password.HashPolicy // a hash outside it is rehashed after a successful login
	Metrics   *Metrics
	// A rehash on login is written at most RehashDelay after the first
	// one waiting, or once RehashBatch are waiting (zero: 1 s and 256;
	// rehash.go). Call CloseRehashes at shutdown.
	RehashDelay time.Duration
	RehashBatch int

	dummyOnce sync.Once
	dummyHash *password.Hash // Policy's dummy (dummy); set once
	rehashes  rehashQueue
	unknown   unknownRechecks // which logins of unknown users recheck the directory
}

// dummy returns the hash an unknown or disabled user's password is checked
// against: one at the hash policy's cost, so that the check holds a slot no
// longer than a new user's login would; nil, if the policy cannot make one,
// means the slowest hash in the directory.
func (g *LoginGuard) dummy() *password.Hash {
	g.dummyOnce.Do(func() {
		h, err := g.Policy.Dummy()
		if err != nil {
			if g.Log != nil {
				g.Log.Warn("cannot make the hash policy's dummy hash; unknown users are checked against the slowest hash", "err", err)
			}
			return
		}
		g.dummyHash = h
	})
	return g.dummyHash
}

// atCapacity reports whether a password check would be refused at once,
// and if so holds the caller in the tarpit: a login at capacity is refused
// before its body is decoded, the cheapest 503.
func (g *LoginGuard) atCapacity(ctx context.Context) bool {
	if !g.Admission.full() {
		return false
	}
	g.Tarpit.hold(ctx)
	return true
}

// A loginAttempt is one password check of one username by one client.
type loginAttempt struct {
	g        *LoginGuard
	w        http.ResponseWriter // names the request id in the audit line
	r        *http.Request
	username string
	counted  string // the throttle's key for the user (throttleKey); set by verify
	client   string // the throttle's key for the client
	users    users.Reader
	known    *users.Account // the user as the check looked it up (verify, verifyCode); nil for none
	event    string         // the audit line's message: "login", or what else checks a password
	// codeLock marks a code of the user's second factor (a login's
	// second step or otp, and the code beside the password of a token
	// mint, a factor's removal, new recovery codes or an enrolment):
	// verifyCode counts it on the user's code lock too
	// (throttle.MaxCodeFailures). A confirm's code, of the pending
	// authenticator, is not one.
	codeLock bool
	// hold asks verify to leave the throttle's place of a right password
	// taken when the user has a second factor: the code still to come
	// settles it (verifyCode), or nothing does and it is released. held
	// says that verify did so. A right password alone must neither clear
	// the failures of codes guessed with it nor count as one.
	hold, held bool
	// attrs are what the audit line adds after the usual ones (a
	// minted token's id, say); never a secret.
	attrs []slog.Attr
	// same checks the password this attempt found right against a fresh
	// copy of the user's hash (samePassword), for issue's afresh; nil
	// when the attempt checked none it can check again (a second step).
	same func(fresh *users.Account) bool
}

// attempt starts a password check of username from r's client against users.
func (g *LoginGuard) attempt(w http.ResponseWriter, r *http.Request, users users.Reader, username string) *loginAttempt {
	return &loginAttempt{g: g, w: w, r: r, users: users, username: username, client: throttle.ClientKey(ClientIP(r, g.Trusted)), event: "login"}
}

// verify checks password in three steps: admit (a place in the throttle,
// reserved before the compare, waiting for checks in flight if need be,
// then a hasher slot: 429 or 503, held in the tarpit), the verdict (the
// password, against a dummy hash for unknown and disabled users: 401 for
// all three), and record (the verdict in the throttle). It returns the user
// on success.
func (a *loginAttempt) verify(password string) (*users.Account, error) {
	g, ctx := a.g, a.r.Context()
	// A directory that cannot say who exists fails closed: 503, not 401.
	known, err := g.lookupAnew(ctx, a.users, a.username, a.client)
	if err != nil && !errors.Is(err, users.ErrNotFound) {
		return nil, err
	}
	a.counted, a.known = throttleKey(a.username, known), known
	if err := a.reserve(ctx); err != nil {
		return nil, err
	}
	release, err := g.Admission.Acquire(ctx)
	if err != nil {
		g.Throttle.Release(ctx, a.counted, a.client)
		g.Tarpit.hold(ctx)
		return nil, errUnavailable
	}
	u, ok, err := users.Authenticate(ctx, a.users, a.username, password, g.verifyReleasing(release), g.dummy())
	release() // in case Authenticate returned without calling verify; a second release is harmless
	if err != nil {
		// Lost between the look-up above and the check's own: 503 like
		// any login while the directory cannot answer, and no failure
		// recorded against the user.
		g.Throttle.Release(ctx, a.counted, a.client)
		return nil, err
	}
	if !ok {
		if err := g.Throttle.Failure(ctx, a.counted, a.client, g.Now()); err != nil {
			return nil, err
		}
		return nil, errInvalidCredentials
	}
	if a.hold && u.HasSecondFactor() {
		a.held = true
		return u, nil
	}
	if err := g.Throttle.Success(ctx, a.counted, a.client, g.Now()); err != nil {
		return nil, err
	}
	return u, nil
}

// samePassword keeps in a.same a check of whether password, which this
// attempt found right, is the password of fresh, a copy of its user read
// since: the hash's text may differ (a rehash), the password not. It
// takes a hasher slot as any check does; no slot, no verdict (false).
func (a *loginAttempt) samePassword(password string) {
	a.same = func(fresh *users.Account) bool {
		release, err := a.g.Admission.Acquire(a.r.Context())
		if err != nil {
			return false
		}
		defer release()
		return a.g.Hasher.Verify(fresh.Hash(), []byte(password))
	}
}

// release gives back the throttle's place verify held, settling the
// attempt as neither a failure nor a success (mfa_required).
func (a *loginAttempt) release() {
	if a.held {
		a.held = false
		a.g.Throttle.Release(a.r.Context(), a.counted, a.client)
	}
}

// verifyCode settles a second-factor code with the throttle as a password
// is settled: check reports whether the code is right; a wrong or reused
// one is a failure on every limit a wrong password counts on (401
// invalid_credentials), a right one a success. The place is the one verify
// held for the password just checked, or, for a code alone (the second
// step, enrolment), one reserved now (429 when the limits refuse it). A
// code of the user's factor (codeLock) is counted on the code lock too, before
// it is checked: once it holds throttle.MaxCodeFailures wrong codes, the
// code is not checked and the answer is 429 (errCodeLocked) until user
// unlock; a right one starts the count again.
func (a *loginAttempt) verifyCode(check func() (bool, error)) error {
	g, ctx := a.g, a.r.Context()
	if !a.held {
		known, err := g.lookupAnew(ctx, a.users, a.username, a.client)
		if err != nil && !errors.Is(err, users.ErrNotFound) {
			return err
		}
		a.counted, a.known = throttleKey(a.username, known), known
		if err := a.reserve(ctx); err != nil {
			return err
		}
	}
	a.held = false
	counted := 0 // the code lock's count with this code; 0 when not counted
	if a.codeLock {
		var err error
		if counted, err = a.reserveCode(ctx); err != nil {
			g.Throttle.Release(ctx, a.counted, a.client) // neither a failure nor a success
			return err
		}
	}
	ok, err := check()
	switch {
	case err != nil:
		g.Throttle.Release(ctx, a.counted, a.client)
		if counted > 0 {
			g.Throttle.ReleaseCode(ctx, a.codeUser())
		}
		return err
	case !ok:
		if counted == throttle.MaxCodeFailures {
			// The lock starts now: say so once, for the operator.
			g.Log.LogAttrs(ctx, slog.LevelWarn, "second factor locked: every second step of the user is refused until authsvc user unlock",
				slog.String("username", a.codeUser()), slog.Int("wrong_codes", counted), slog.String("request_id", requestID(a.w)))
			g.Metrics.mfaLocked()
		}
		if err := g.Throttle.Failure(ctx, a.counted, a.client, g.Now()); err != nil {
			return err
		}
		return errInvalidCredentials
	}
	if counted > 0 {
		if err := g.Throttle.CodeSuccess(ctx, a.codeUser()); err != nil {
			g.Throttle.Release(ctx, a.counted, a.client)
			return err
		}
	}
	return g.Throttle.Success(ctx, a.counted, a.client, g.Now())
}

// codeUser is the name the code lock counts the attempt's user under:
// the directory's spelling.
func (a *loginAttempt) codeUser() string {
	if a.known != nil {
		return a.known.Username()
	}
	return a.username
}

// reserveCode counts the attempt's code on its user's code lock, judged
// by the user's last unlock (CodesAfter: a reset confirm, which lifts the
// password lockouts, leaves it), and returns the count with it: errCodeLocked
// (held in the tarpit) when the lock refuses it.
func (a *loginAttempt) reserveCode(ctx context.Context) (int, error) {
	var after time.Time
	if a.known != nil {
		after = a.known.CodesAfter()
	}
	v, n, err := a.g.Throttle.ReserveCode(ctx, a.codeUser(), after, a.g.Now())
	switch {
	case err != nil:
		return 0, err // the throttle cannot decide: fail closed
	case v != throttle.Admitted:
		a.g.Tarpit.hold(ctx)
		return 0, errCodeLocked
	}
	return n, nil
}

// throttleKey returns the name the throttle counts username's failures
// under: the name itself, or, once the user has been unlocked (user
// unlock), the name and the moment of the unlock, so that the failures
// counted before it are under another key, which no attempt touches again
// and which expires with its window. Every instance derives the same key
// once its directory has the unlock (within 5 s), so a shared throttle
// needs no reset; a failure an instance counts under the old key before it
// sees the unlock is forgiven with the rest. A request that names
// "alice\x00unlocked …" itself names no user, and its failures count
// only as alice's own would: it gains nothing.
func throttleKey(username string, u *users.Account) string {
	if u == nil {
		return username
	}
	at := u.FailuresAfter()
	if at.IsZero() {
		return username
	}
	return username + "\x00unlocked " + strconv.FormatInt(at.UnixNano(), 10)
}

// verifyReleasing returns a check with the hasher that gives back the
// caller's slot as soon as the check ends: a failed login is then held
// (Authenticate pads it up to the slowest check's time) with no slot, so
// the padding of one costs no other login its turn.
func (g *LoginGuard) verifyReleasing(release func()) func(*password.Hash, []byte) bool {
	return func(h *password.Hash, pw []byte) bool {
		defer release()
		return g.Hasher.Verify(h, pw)
	}
}

// How often a login waiting for the throttle's checks in flight asks
// again: after firstPoll, then twice as long each time up to maxPoll. A
// check takes from about 20 ms (argon2id) to 250 ms (bcrypt at cost 12),
// so a waiter learns that one has settled within a fraction of a check,
// and once its pause has grown a waiter costs a throttle in Redis one round
// trip every maxPoll.
const firstPoll, maxPoll = 2 * time.Millisecond, 50 * time.Millisecond

// reserve takes the attempt's place in the throttle, before any password
// work. An attempt over the pair's or the user's limit only because of
// checks still in flight (on any instance sharing the throttle) is no
// failure: it waits for them, holding no hasher slot, up to the
// admission's wait, and is then decided on the failures they left (429 if
// they reach the limit). A wait that runs out, or that finds as many
// waiting as the admission allows, is 503 unavailable, never 429.
func (a *loginAttempt) reserve(ctx context.Context) error {
	g := a.g
	v, retryAfter, err := g.Throttle.Reserve(ctx, a.counted, a.client, g.Now())
	if err == nil && v == throttle.Wait {
		v, retryAfter, err = a.awaitSettled(ctx)
	}
	switch {
	case err != nil:
		return err // the throttle cannot decide: fail closed
	case v == throttle.Admitted:
		return nil
	case v == throttle.Refused:
		limits := a.explain(ctx)
		g.Tarpit.hold(ctx)
		return throttled(int(retryAfter/time.Second), limits)
	}
	g.Tarpit.hold(ctx)
	return errUnavailable // still Wait: no decision in time
}

// explain names the limits that refuse the attempt, for its audit line:
// the throttle's Explain, asked only of a refused attempt, so its cost is
// off the path of the others. "" when the throttle cannot say: a refusal
// is never failed over its audit line's detail.
func (a *loginAttempt) explain(ctx context.Context) string {
	l, err := a.g.Throttle.Explain(ctx, a.counted, a.client, a.g.Now())
	if err != nil {
		return ""
	}
	return l.String()
}

// awaitSettled asks the throttle again, with a growing pause, while it
// answers Wait, for at most the admission's wait or until ctx is done; it
// returns the last answer. It holds no hasher slot: the checks it waits for
// may need them.
func (a *loginAttempt) awaitSettled(ctx context.Context) (throttle.Verdict, time.Duration, error) {
	g := a.g
	done, ok := g.Admission.startSettling()
	if !ok {
		return throttle.Wait, 0, nil
	}
	defer done()
	deadline := time.NewTimer(g.Admission.wait)
	defer deadline.Stop()
	poll := firstPoll
	pause := time.NewTimer(poll)
	defer pause.Stop()
	for {
		select {
		case <-deadline.C:
			return throttle.Wait, 0, nil
		case <-ctx.Done():
			return throttle.Wait, 0, nil
		case <-pause.C:
		}
		v, retryAfter, err := g.Throttle.Reserve(ctx, a.counted, a.client, g.Now())
		if err != nil || v != throttle.Wait {
			return v, retryAfter, err
		}
		poll = min(2*poll, maxPoll)
		pause.Reset(poll)
	}
}

// audit logs the attempt's outcome, err being what the request ends with:
// one line per attempt. A username that names no user is not logged:
// people type passwords into username fields.
func (a *loginAttempt) audit(err error) {
	username := a.username
	if _, lookupErr := a.users.Lookup(a.r.Context(), username); lookupErr != nil {
		username = "(unknown)"
	}
	attrs := []slog.Attr{slog.String("outcome", outcomeName(err)), slog.String("username", username),
		slog.String("client", a.client), slog.String("request_id", requestID(a.w))}
	if e, ok := err.(*apiError); ok {
		if e.limit != "" {
			attrs = append(attrs, slog.String("limit", e.limit))
		}
		if e.note != "" {
			attrs = append(attrs, slog.String("note", e.note))
		}
	}
	a.g.Log.LogAttrs(a.r.Context(), slog.LevelInfo, a.event, append(attrs, a.attrs...)...)
}

// auditRefused writes the audit line of a request refused before any
// password was checked (400, 413, 415, a capacity 503, a dead token), so
// that every request to these endpoints has one; or, with a nil err, of
// one that checks none (GET /api/auth/mfa/). username is "" when the
// request names no user it can be trusted with: a login's username is not
// logged before it is known to name a user (people type passwords there).
func (g *LoginGuard) auditRefused(w http.ResponseWriter, r *http.Request, event, username string, err error) {
	if username == "" {
		username = "(unknown)"
	}
	g.Log.LogAttrs(r.Context(), slog.LevelInfo, event, slog.String("outcome", outcomeName(err)), slog.String("username", username),
		slog.String("client", throttle.ClientKey(ClientIP(r, g.Trusted))), slog.String("request_id", requestID(w)))
}

// outcomeName is the audit line's name for a request that ends with err:
// "success", or the code of the error reply it gets.
func outcomeName(err error) string {
	if err == nil {
		return "success"
	}
	e, _ := errorReply(err)
	return e.code
}

// LoginRequest is the login body. OTP is a one-step client's
// second-factor code, sent beside the password; "" when none.
type LoginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
	OTP      string `json:"otp"`
}

// LoginReply is the 200 login body; ExpiresAt is null for tokens that never expire.
type LoginReply struct {
	Token     string     `json:"token"`
	ExpiresAt *time.Time `json:"expires_at"`
	User      users.Info `json:"user"`
	// MFAEnrollmentRequired: the token may only enrol a second factor,
	// which --require-mfa requires of the user (tokens.Session.Enrolment).
	MFAEnrollmentRequired bool `json:"mfa_enrollment_required,omitempty"`
}

// decodeLogin parses a login body: one JSON object, with username and
// password non-empty strings within API.md's limits. Its errors never quote
// the body, which holds a password.
func decodeLogin(body []byte) (LoginRequest, error) {
	var req LoginRequest
	if err := decodeObject(body, &req); err != nil {
		return LoginRequest{}, err
	}
	if err := missingField(bodyField{"username", req.Username}, bodyField{"password", req.Password}); err != nil {
		return LoginRequest{}, err
	}
	switch {
	case utf8.RuneCountInString(req.Username) > users.MaxUsernameLen:
		return LoginRequest{}, invalidRequest("username is longer than 150 characters.")
	case len(req.Password) > password.MaxLen:
		return LoginRequest{}, invalidRequest("password is longer than 1024 bytes.")
	case len(req.OTP) > maxCodeLen:
		return LoginRequest{}, invalidRequest("otp is too long.")
	}
	// API.md: every request's username is matched, and throttled, in its NFKC form.
	req.Username = users.NormalizeUsername(req.Username)
	return req, nil
}

// A bodyField is a string field of a request body, by its JSON name.
type bodyField struct{ name, value string }

// missingField returns 400 invalid_request naming the first of fields
// that is empty, or nil.
func missingField(fields ...bodyField) error {
	for _, f := range fields {
		if f.value == "" {
			return invalidRequest(f.name + " is required.")
		}
	}
	return nil
}

// passwordTooLong returns 400 invalid_request naming the first of fields
// longer than a password may be (password.MaxLen bytes), or nil.
func passwordTooLong(fields ...bodyField) error {
	for _, f := range fields {
		if len(f.value) > password.MaxLen {
			return invalidRequest(f.name + " is longer than 1024 bytes.")
		}
	}
	return nil
}

// handleLogin exchanges a username and password for a new token, in
// API.md's order of checks.
func handleLogin(log *slog.Logger, tc tokenCheck, guard *LoginGuard, sf secondFactors) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The media type (415) and size (413). The body is read even at
		// capacity: net/http would close a connection that left it.
		body, err := readJSONBody(w, r)
		if err == nil && guard.atCapacity(r.Context()) {
			err = errUnavailable // before decoding: the cheapest refusal
		}
		// The body's shape and field limits (400).
		var req LoginRequest
		if err == nil {
			req, err = decodeLogin(body)
		}
		if err != nil {
			guard.auditRefused(w, r, "login", "", err)
			writeError(w, r, log, err)
			return
		}
		// The throttle (429), a hasher slot (503), the password (401).
		started := time.Now()
		attempt := guard.attempt(w, r, tc.users, req.Username)
		attempt.hold = true
		u, err := attempt.verify(req.Password)
		if err == nil {
			attempt.samePassword(req.Password)
			guard.Rehash(r.Context(), tc.users, u, req.Password)
		}
		var stamp uint64
		if err == nil {
			// Of the password just checked, whatever a change writes
			// meanwhile: the store refuses it once a change superseded it.
			stamp = u.SessionGeneration()
		}
		var reply LoginReply
		codeSent := attempt.held && req.OTP != "" // a code is checked, and spent if right
		switch {
		case err != nil:
		case attempt.held && req.OTP == "":
			attempt.release()
			err = sf.challenge(r.Context(), u, stamp)
		case codeSent:
			// A second factor: the code sent beside the password.
			attempt.codeLock = true
			err = attempt.verifyCode(func() (bool, error) { return sf.checkOrGone(r.Context(), u.Username(), req.OTP) })
			if !errors.Is(err, errFactorGone) {
				tc.metrics.secondFactorStep("code", err)
			}
			switch {
			case errors.Is(err, errFactorGone):
				// Her second factor went while the password was checked
				// (neither a failure nor a success was recorded): the
				// user as the directory has them now may need the
				// password alone, which was right.
				err = errInvalidCredentials
				if fresh, freshStamp, ok := tc.afresh(r.Context(), u, stamp, attempt.same); ok && !fresh.HasSecondFactor() {
					codeSent = false // no code was spent: a refused stamp is decided again below
					reply, err = attempt.issue(tc, fresh, freshStamp, false)
				}
			case err == nil:
				reply, err = attempt.issue(tc, u, stamp, true)
			}
			if errors.Is(err, errInvalidCredentials) {
				// As long as a wrong password takes: the time must not
				// tell that the password was right.
				users.HoldUntil(time.Duration(tc.users.Slowest().Took.Load()), time.Since(started))
			}
		default:
			reply, err = attempt.issue(tc, u, stamp, false)
		}
		if errors.Is(err, tokens.ErrSuperseded) && !codeSent {
			// This instance's copy of the user is behind, or the store's
			// stamp is (tokenCheck.afresh). Nothing was spent: the login
			// is decided again on the user as the directory has them
			// now, a second factor that came or went included.
			if fresh, freshStamp, ok := tc.afresh(r.Context(), u, stamp, attempt.same); ok {
				if fresh.HasSecondFactor() {
					err = sf.challenge(r.Context(), fresh, freshStamp)
				} else {
					reply, err = attempt.issue(tc, fresh, freshStamp, false)
				}
			}
		}
		if e, ok := err.(*apiError); ok && e.code == "mfa_required" {
			tc.metrics.secondFactorStep("required", nil)
		}
		attempt.finish(log, reply, err)
	})
}

// grant ends an attempt: unless err stopped it, a new token of u bound to
// the password generation stamp (503 when the store cannot keep it); the
// audit line; then the login reply, or err's. A password change and a
// login's second step end so.
func (a *loginAttempt) grant(log *slog.Logger, tc tokenCheck, u *users.Account, stamp uint64, err error) {
	var reply LoginReply
	if err == nil {
		reply, err = a.issue(tc, u, stamp, true)
		if errors.Is(err, tokens.ErrSuperseded) && a.event == "password change" {
			// The change has just told the store this stamp; only a
			// later change can have moved it on since. The password did
			// change: never 401, as if current_password were wrong.
			err = errUnavailable
		}
	}
	a.finish(log, reply, err)
}

// issue stores a new token of u bound to the password generation stamp.
// Never before the user's cut-off, which another instance's clock may have
// set ahead of this one's (users.NextCutoff): the token would be born
// dead. A refusal of the stamp (tokens.ErrSuperseded) is settled by the
// directory as it is now (tokenCheck.afresh) when the user there has the
// same password, and, if withFactors (a code was checked against the
// factors as they were), a second factor as before.
func (a *loginAttempt) issue(tc tokenCheck, u *users.Account, stamp uint64, withFactors bool) (LoginReply, error) {
	ctx := a.r.Context()
	reply, err := issueToken(ctx, tc.store, tc.policy, tc.metrics, u, stamp, users.Later(tc.now(), u.TokensAfter()), a.client, a.r.UserAgent())
	if !errors.Is(err, tokens.ErrSuperseded) || !withFactors {
		return reply, err
	}
	// The code was checked against u's factors: it stands for the fresh
	// user's if they have a factor still, and is not needed if not.
	if fresh, freshStamp, ok := tc.afresh(ctx, u, stamp, a.same); ok && (u.HasSecondFactor() || !fresh.HasSecondFactor()) {
		return issueToken(ctx, tc.store, tc.policy, tc.metrics, fresh, freshStamp, users.Later(tc.now(), fresh.TokensAfter()), a.client, a.r.UserAgent())
	}
	return reply, err
}

// finish ends an attempt: the audit line, then the login reply, or err's.
func (a *loginAttempt) finish(log *slog.Logger, reply LoginReply, err error) {
	a.audit(err)
	if err != nil {
		writeError(a.w, a.r, log, err)
		return
	}
	a.w.Header().Set("Cache-Control", "no-store")
	encode(a.w, http.StatusOK, reply)
}

// issueToken stores a new session of u, issued on password generation
// stamp (users.SessionGeneration), logged in from client with userAgent,
// and returns the login reply with its token.
func issueToken(ctx context.Context, store tokens.Store, policy TokenPolicy, m *Metrics, u *users.Account, stamp uint64, now time.Time, client, userAgent string) (LoginReply, error) {
	token, digest := tokens.New()
	sess := tokens.Session{Username: u.Username(), Stamp: stamp, ID: tokens.NewSessionID(), Client: client, UserAgent: CutUTF8(userAgent, MaxUserAgent)}
	reply := LoginReply{Token: token, User: u.Info()}
	if !u.HasSecondFactor() && policy.RequireMFA.Covers(u) {
		sess.Enrolment, reply.MFAEnrollmentRequired = true, true
	}
	if policy.TTL > 0 {
		expires := now.Add(policy.TTL).Truncate(time.Second).UTC()
		sess.ExpiresAt = expires
		reply.ExpiresAt = &expires
	}
	evicted, err := store.Issue(ctx, digest, sess, policy.MaxPerUser, now)
	if err != nil {
		return LoginReply{}, err
	}
	m.Revoked(revokedEviction, evicted)
	return reply, nil
}
