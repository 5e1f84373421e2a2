package login

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"authsvc/internal/throttle"
	"authsvc/internal/users"
)

// A Client is who makes an attempt: what the throttle counts it under, and
// what the lines logged of it and the sessions it gets name it by.
type Client struct {
	Key       string // the throttle's key of its address (throttle.ClientKey)
	RequestID string // the request's id, for the log lines
	UserAgent string // recorded with a session it gets
}

// An Attempt is one check of one username's password or code by one
// client, settled with the throttle as one.
type Attempt struct {
	g        *Guard
	ctx      context.Context
	client   Client
	users    users.Reader
	username string
	counted  string         // the throttle's key for the user (throttleKey); set by Verify
	known    *users.Account // the user as the check looked it up (Verify, VerifyCode); nil for none
	// CodeLock marks a code of the user's second factor (a login's
	// second step or otp, and the code beside the password of a token
	// mint, a factor's removal, new recovery codes or an enrolment):
	// VerifyCode counts it on the user's code lock too
	// (throttle.MaxCodeFailures). A confirm's code, of the pending
	// authenticator, is not one.
	CodeLock bool
	// Hold asks Verify to leave the throttle's place of a right password
	// taken when the user has a second factor: the code still to come
	// settles it (VerifyCode), or nothing does and it is released. held
	// says that Verify did so. A right password alone must neither clear
	// the failures of codes guessed with it nor count as one.
	Hold, held bool
	// same checks the password this attempt found right against a fresh
	// copy of the user's hash (samePassword), for the re-decision on a
	// fresh copy (afresh); nil when the attempt checked none it can check
	// again (a second step).
	same func(fresh *users.Account) bool
}

// Attempt starts a check of username's password or code by c against dir.
func (g *Guard) Attempt(ctx context.Context, c Client, dir users.Reader, username string) *Attempt {
	return &Attempt{g: g, ctx: ctx, client: c, users: dir, username: username}
}

// Held reports whether Verify left the throttle's place of a right
// password taken (Hold) for a code to settle: the user has a second factor.
func (a *Attempt) Held() bool { return a.held }

// Verify checks password in three steps: admit (a place in the throttle,
// reserved before the compare, waiting for checks in flight if need be,
// then a hasher slot: a *ThrottledError or ErrUnavailable, held in the
// tarpit), the verdict (the password, against a dummy hash for unknown and
// disabled users: ErrInvalidCredentials for all three), and record (the
// verdict in the throttle). It returns the user on success.
func (a *Attempt) Verify(password string) (*users.Account, error) {
	g, ctx := a.g, a.ctx
	// A directory that cannot say who exists fails closed: 503, not 401.
	known, err := g.lookupAnew(ctx, a.users, a.username, a.client.Key)
	if err != nil && !errors.Is(err, users.ErrNotFound) {
		return nil, err
	}
	a.counted, a.known = throttleKey(a.username, known), known
	if err := a.reserve(); err != nil {
		return nil, err
	}
	release, err := g.Admission.Acquire(ctx)
	if err != nil {
		g.Throttle.Release(ctx, a.counted, a.client.Key)
		g.Tarpit.hold(ctx)
		return nil, ErrUnavailable
	}
	u, ok, err := users.Authenticate(ctx, a.users, a.username, password, g.verifyReleasing(release), g.dummy())
	release() // in case Authenticate returned without calling verify; a second release is harmless
	if err != nil {
		// Lost between the look-up above and the check's own: 503 like
		// any login while the directory cannot answer, and no failure
		// recorded against the user.
		g.Throttle.Release(ctx, a.counted, a.client.Key)
		return nil, err
	}
	if !ok {
		if err := g.Throttle.Failure(ctx, a.counted, a.client.Key, g.Now()); err != nil {
			return nil, err
		}
		return nil, ErrInvalidCredentials
	}
	if a.Hold && u.HasSecondFactor() {
		a.held = true
		return u, nil
	}
	if err := g.Throttle.Success(ctx, a.counted, a.client.Key, g.Now()); err != nil {
		return nil, err
	}
	return u, nil
}

// holdAsWrongPassword holds a refusal until it has taken, since started,
// as long as a wrong password's check takes (users.SlowestCheck): a code
// refused after a right password must not tell, by its time, that the
// password was right.
func (a *Attempt) holdAsWrongPassword(started time.Time) {
	users.HoldUntil(time.Duration(a.users.Slowest().Took.Load()), time.Since(started))
}

// samePassword keeps in a.same a check of whether password, which this
// attempt found right, is the password of fresh, a copy of its user read
// since: the hash's text may differ (a rehash), the password not. It
// takes a hasher slot as any check does; no slot, no verdict (false).
func (a *Attempt) samePassword(password string) {
	a.same = func(fresh *users.Account) bool {
		release, err := a.g.Admission.Acquire(a.ctx)
		if err != nil {
			return false
		}
		defer release()
		return a.g.Hasher.Verify(fresh.Hash(), []byte(password))
	}
}

// Release gives back the throttle's place Verify held, settling the
// attempt as neither a failure nor a success (a second factor required).
func (a *Attempt) Release() {
	if a.held {
		a.held = false
		a.g.Throttle.Release(a.ctx, a.counted, a.client.Key)
	}
}

// VerifyCode settles a second-factor code with the throttle as a password
// is settled: check reports whether the code is right; a wrong or reused
// one is a failure on every limit a wrong password counts on
// (ErrInvalidCredentials), a right one a success. The place is the one
// Verify held for the password just checked, or, for a code alone (the
// second step, enrolment), one reserved now (a *ThrottledError when the
// limits refuse it). A code of the user's factor (CodeLock) is counted on
// the code lock too, before it is checked: once it holds
// throttle.MaxCodeFailures wrong codes, the code is not checked and the
// answer is ErrCodeLocked until user unlock; a right one starts the count
// again.
func (a *Attempt) VerifyCode(check func() (bool, error)) error {
	g, ctx := a.g, a.ctx
	if !a.held {
		known, err := g.lookupAnew(ctx, a.users, a.username, a.client.Key)
		if err != nil && !errors.Is(err, users.ErrNotFound) {
			return err
		}
		a.counted, a.known = throttleKey(a.username, known), known
		if err := a.reserve(); err != nil {
			return err
		}
	}
	a.held = false
	counted := 0 // the code lock's count with this code; 0 when not counted
	if a.CodeLock {
		var err error
		if counted, err = a.reserveCode(); err != nil {
			g.Throttle.Release(ctx, a.counted, a.client.Key) // neither a failure nor a success
			return err
		}
	}
	ok, err := check()
	switch {
	case err != nil:
		g.Throttle.Release(ctx, a.counted, a.client.Key)
		if counted > 0 {
			g.Throttle.ReleaseCode(ctx, a.codeUser())
		}
		return err
	case !ok:
		if counted == throttle.MaxCodeFailures {
			// The lock starts now: say so once, for the operator.
			g.Log.LogAttrs(ctx, slog.LevelWarn, "second factor locked: every second step of the user is refused until authsvc user unlock",
				slog.String("username", a.codeUser()), slog.Int("wrong_codes", counted), slog.String("request_id", a.client.RequestID))
			g.metrics().MFALocked()
		}
		if err := g.Throttle.Failure(ctx, a.counted, a.client.Key, g.Now()); err != nil {
			return err
		}
		return ErrInvalidCredentials
	}
	if counted > 0 {
		if err := g.Throttle.CodeSuccess(ctx, a.codeUser()); err != nil {
			g.Throttle.Release(ctx, a.counted, a.client.Key)
			return err
		}
	}
	return g.Throttle.Success(ctx, a.counted, a.client.Key, g.Now())
}

// codeUser is the name the code lock counts the attempt's user under:
// the directory's spelling.
func (a *Attempt) codeUser() string {
	if a.known != nil {
		return a.known.Username()
	}
	return a.username
}

// reserveCode counts the attempt's code on its user's code lock, judged
// by the user's last unlock (CodesAfter: a reset confirm, which lifts the
// password lockouts, leaves it), and returns the count with it:
// ErrCodeLocked (held in the tarpit) when the lock refuses it.
func (a *Attempt) reserveCode() (int, error) {
	var after time.Time
	if a.known != nil {
		after = a.known.CodesAfter()
	}
	v, n, err := a.g.Throttle.ReserveCode(a.ctx, a.codeUser(), after, a.g.Now())
	switch {
	case err != nil:
		return 0, err // the throttle cannot decide: fail closed
	case v != throttle.Admitted:
		a.g.Tarpit.hold(a.ctx)
		return 0, ErrCodeLocked
	}
	return n, nil
}

// How often an attempt waiting for the throttle's checks in flight asks
// again: after firstPoll, then twice as long each time up to maxPoll. A
// check takes from about 20 ms (argon2id) to 250 ms (bcrypt at cost 12),
// so a waiter learns that one has settled within a fraction of a check,
// and once its pause has grown a waiter costs a throttle in Redis one round
// trip every maxPoll.
const firstPoll, maxPoll = 2 * time.Millisecond, 50 * time.Millisecond

// Reserve takes the attempt's place in the throttle under key instead of
// its user's (a reset's link or address, say), as Verify takes its own;
// Settle ends it.
func (a *Attempt) Reserve(key string) error {
	a.counted = key
	return a.reserve()
}

// An Outcome is how an attempt that Reserve admitted ended, for Settle.
type Outcome int

// The outcomes Settle records.
const (
	Neither Outcome = iota // neither a failure nor a success: the place is given back
	Failed                 // a failure of the client's
	Succeeded
)

// Settle tells the throttle how an attempt Reserve admitted ended.
func (a *Attempt) Settle(o Outcome) {
	g := a.g
	switch o {
	case Succeeded:
		g.Throttle.Success(a.ctx, a.counted, a.client.Key, g.Now())
	case Failed:
		g.Throttle.Failure(a.ctx, a.counted, a.client.Key, g.Now())
	default:
		g.Throttle.Release(a.ctx, a.counted, a.client.Key)
	}
}

// reserve takes the attempt's place in the throttle, before any password
// work. An attempt over the pair's or the user's limit only because of
// checks still in flight (on any instance sharing the throttle) is no
// failure: it waits for them, holding no hasher slot, up to the
// admission's wait, and is then decided on the failures they left (a
// *ThrottledError if they reach the limit). A wait that runs out, or that
// finds as many waiting as the admission allows, is ErrUnavailable, never
// throttled.
func (a *Attempt) reserve() error {
	g, ctx := a.g, a.ctx
	v, retryAfter, err := g.Throttle.Reserve(ctx, a.counted, a.client.Key, g.Now())
	if err == nil && v == throttle.Wait {
		v, retryAfter, err = a.awaitSettled()
	}
	switch {
	case err != nil:
		return err // the throttle cannot decide: fail closed
	case v == throttle.Admitted:
		return nil
	case v == throttle.Refused:
		limits := a.explain()
		g.Tarpit.hold(ctx)
		return &ThrottledError{RetryAfter: retryAfter, Limits: limits}
	}
	g.Tarpit.hold(ctx)
	return ErrUnavailable // still Wait: no decision in time
}

// explain names the limits that refuse the attempt, for its audit line:
// the throttle's Explain, asked only of a refused attempt, so its cost is
// off the path of the others. "" when the throttle cannot say: a refusal
// is never failed over its audit line's detail.
func (a *Attempt) explain() string {
	l, err := a.g.Throttle.Explain(a.ctx, a.counted, a.client.Key, a.g.Now())
	if err != nil {
		return ""
	}
	return l.String()
}

// awaitSettled asks the throttle again, with a growing pause, while it
// answers Wait, for at most the admission's wait or until the attempt's
// context is done; it returns the last answer. It holds no hasher slot:
// the checks it waits for may need them.
func (a *Attempt) awaitSettled() (throttle.Verdict, time.Duration, error) {
	g, ctx := a.g, a.ctx
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
		v, retryAfter, err := g.Throttle.Reserve(ctx, a.counted, a.client.Key, g.Now())
		if err != nil || v != throttle.Wait {
			return v, retryAfter, err
		}
		poll = min(2*poll, maxPoll)
		pause.Reset(poll)
	}
}
