package login

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"authsvc/internal/tokens"
	"authsvc/internal/users"
)

// Logins are the ways to log in: the password, with or without a one-step
// code beside it (Password), and the second step of an mfa_token
// (SecondStep). Each is one attempt of the guard's, and ends with a
// session (a Grant) or an error of errors.go.
type Logins struct {
	Guard   *Guard
	Users   users.Directory
	Store   tokens.Store
	Policy  SessionPolicy
	Factors SecondFactors
	Now     func() time.Time
}

// A SessionPolicy is what a login needs of the token policy: how long a
// session lives, how many a user may hold, and whom a second factor is
// required of.
type SessionPolicy struct {
	TTL        time.Duration // 0: sessions never expire
	MaxPerUser int           // 0: no limit
	// RequireMFA is --require-mfa: a login of a user it covers who has no
	// second factor gets an enrolment session (tokens.Session.Enrolment).
	RequireMFA users.MFAPolicy
}

// Supersession is what the token store is told when username's password,
// or the user, changed (tokens.Store's Supersede): the stamp of the
// password now (0 for a deleted user), the cut-off before, and how long
// the store keeps the stamp: as long as a session issued at now may live,
// for ever when sessions never expire.
func (p SessionPolicy) Supersession(username string, stamp uint64, before, now time.Time) tokens.Supersession {
	sup := tokens.Supersession{Username: username, Stamp: stamp, MaxStamp: users.MaxSessionGeneration, Before: before}
	if p.TTL > 0 {
		sup.Until = now.Add(p.TTL)
	}
	return sup
}

// A Grant is a new session: what a login, a second step or a password
// change gives.
type Grant struct {
	Token     string         // the session's token: a secret, for the reply alone
	ExpiresAt *time.Time     // nil: the session never expires
	Account   *users.Account // its user, as the session was issued on
	// Enrolment: the session may only enrol a second factor, which
	// --require-mfa requires of the user (tokens.Session.Enrolment).
	Enrolment bool
}

// Password logs username in with password and, when the client sends a
// code of the user's second factor beside it (a one-step client), code
// ("" when none). A right password of a user with a second factor and no
// code is a *SecondFactorError with the mfa_token of the second step. A
// refused code takes as long as a wrong password would: the time must not
// tell that the password was right.
func (l *Logins) Password(ctx context.Context, c Client, username, password, code string) (Grant, error) {
	started := time.Now()
	a := l.Guard.Attempt(ctx, c, l.Users, username)
	a.Hold = true
	u, err := a.Verify(password)
	if err != nil {
		return Grant{}, err
	}
	a.samePassword(password)
	l.Guard.Rehash(ctx, l.Users, u, password)
	// Of the password just checked, whatever a change writes meanwhile:
	// the store refuses it once a change superseded it.
	stamp := u.SessionGeneration()
	var g Grant
	codeSpent := false // a code was checked, and spent if right: nothing to decide again
	switch {
	case a.held && code == "":
		a.Release()
		err = l.challenge(ctx, u, stamp)
	case a.held:
		g, codeSpent, err = l.withCode(a, u, stamp, code)
		if errors.Is(err, ErrInvalidCredentials) {
			a.holdAsWrongPassword(started)
		}
	default:
		g, err = l.issue(a, u, stamp, false)
	}
	if errors.Is(err, tokens.ErrSuperseded) && !codeSpent {
		// This instance's copy of the user is behind, or the store's
		// stamp is (afresh). Nothing was spent: the login is decided
		// again on the user as the directory has them now, a second
		// factor that came or went included.
		if fresh, freshStamp, ok := l.afresh(ctx, u, stamp, a.same); ok {
			if fresh.HasSecondFactor() {
				err = l.challenge(ctx, fresh, freshStamp)
			} else {
				g, err = l.issue(a, fresh, freshStamp, false)
			}
		}
	}
	if errors.Is(err, ErrSecondFactorRequired) {
		l.Guard.metrics().SecondFactorStep("required", nil)
	}
	return g, err
}

// withCode settles the code sent beside u's right password (of stamp),
// held by a, and issues the session if it is right. Should the user's
// second factor have gone while the password was checked (neither a
// failure nor a success was recorded), the user as the directory has them
// now may need the password alone, which was right: spent is then false.
func (l *Logins) withCode(a *Attempt, u *users.Account, stamp uint64, code string) (g Grant, spent bool, err error) {
	a.CodeLock = true
	err = a.VerifyCode(func() (bool, error) { return l.Factors.checkOrGone(a.ctx, u.Username(), code) })
	if errors.Is(err, errFactorGone) {
		if fresh, freshStamp, ok := l.afresh(a.ctx, u, stamp, a.same); ok && !fresh.HasSecondFactor() {
			g, err = l.issue(a, fresh, freshStamp, false) // no code was spent: a refused stamp is decided again
			return g, false, err
		}
		return Grant{}, true, ErrInvalidCredentials
	}
	l.Guard.metrics().SecondFactorStep("code", err) // the code's verdict, whatever the issue's
	if err == nil {
		g, err = l.issue(a, u, stamp, true)
	}
	return g, true, err
}

// SecondStep is a login's second step: a code of the user's second factor
// with the mfa_token of their right password. username is the mfa_token's
// user, for the caller's audit line: "" when the token names none live.
func (l *Logins) SecondStep(ctx context.Context, c Client, mfaToken, code string) (username string, g Grant, err error) {
	u, ch, digest, err := l.Factors.takeChallenge(ctx, mfaToken)
	if err != nil {
		l.Guard.metrics().SecondFactorStep("code", err)
		return "", Grant{}, err
	}
	a := l.Guard.Attempt(ctx, c, l.Users, u.Username())
	a.CodeLock = true
	// Spent by its first success, on every instance: one token.
	err = a.VerifyCode(func() (bool, error) { return l.Factors.checkClaiming(ctx, digest, u.Username(), code) })
	l.Guard.metrics().SecondFactorStep("code", err)
	if err == nil {
		g, err = l.issue(a, u, ch.Stamp, true)
	}
	return u.Username(), g, err
}

// Issue ends a's check of u's password, of stamp, with a new session, as
// a password change does; a refused stamp is decided as a second step's.
func (l *Logins) Issue(a *Attempt, u *users.Account, stamp uint64) (Grant, error) {
	return l.issue(a, u, stamp, true)
}

// Prove checks that a's user knows password and, when they have a second
// factor, a code of it, as one attempt: the proof a personal access token
// is minted on. A user with a second factor who sends no code gets a
// *SecondFactorError without a Token (a token is never a way around the
// second factor), and the place a holds is the caller's to Release. A user
// without one whom RequireMFA covers (their factor removed since the
// request was authenticated, say) gets ErrEnrolmentRequired.
func (l *Logins) Prove(a *Attempt, password, code string) error {
	a.Hold = true
	u, err := a.Verify(password)
	switch {
	case err != nil:
		return err
	case !a.held && l.Policy.RequireMFA.Covers(u) && !u.HasSecondFactor():
		return ErrEnrolmentRequired
	case !a.held: // no second factor
		return nil
	case code == "":
		return &SecondFactorError{Methods: []string{MethodCode}}
	}
	a.CodeLock = true
	return a.VerifyCode(func() (bool, error) { return l.Factors.Check(a.ctx, u.Username(), code) })
}

// issue stores a new session of u bound to the password generation stamp.
// Never before the user's cut-off, which another instance's clock may have
// set ahead of this one's (users.NextCutoff): the session would be born
// dead. A refusal of the stamp (tokens.ErrSuperseded) is settled by the
// directory as it is now (afresh) when the user there has the same
// password, and, if withFactors (a code was checked against the factors
// as they were), a second factor as before.
func (l *Logins) issue(a *Attempt, u *users.Account, stamp uint64, withFactors bool) (Grant, error) {
	g, err := l.issueSession(a.ctx, u, stamp, a.client)
	if !errors.Is(err, tokens.ErrSuperseded) || !withFactors {
		return g, err
	}
	// The code was checked against u's factors: it stands for the fresh
	// user's if they have a factor still, and is not needed if not.
	if fresh, freshStamp, ok := l.afresh(a.ctx, u, stamp, a.same); ok && (u.HasSecondFactor() || !fresh.HasSecondFactor()) {
		return l.issueSession(a.ctx, fresh, freshStamp, a.client)
	}
	return g, err
}

// challenge stores a second step for u, whose password (of stamp) was just
// found right, and returns the *SecondFactorError that carries its token.
func (l *Logins) challenge(ctx context.Context, u *users.Account, stamp uint64) error {
	token, digest := tokens.New()
	now := l.Now()
	c := tokens.Challenge{Username: u.Username(), Stamp: stamp, ExpiresAt: now.Add(challengeTTL), Attempts: challengeAttempts}
	if err := l.Store.PutChallenge(ctx, digest, c, now); err != nil {
		return err
	}
	return &SecondFactorError{Token: token, Methods: []string{MethodCode}}
}

// afresh answers the store's refusal (tokens.ErrSuperseded) of a session
// or challenge of u issued on stamp by the directory as it is now
// (Recheck): it returns the user as the directory has them and the stamp a
// session of theirs carries now, and ok when the password checked is
// still theirs there (enabled, the same hash), so that the caller may
// decide once more on them. The directory decides
// (docs/design/tokens.md): the refusal came either from this instance's
// copy being behind (a factor change on another instance moved the stamp,
// the password unchanged) or from the store's stamp being behind (a
// change it was never told of, say while Redis was away); either way the
// store is told the directory's state. Otherwise (another password, the user
// disabled, a directory that cannot say) the refusal stands.
//
// The hash alone cannot say that the password is another: a rehash on
// login (on another instance, say) writes another hash of the same
// password, and a factor change then moves the stamp. So a fresh hash
// that differs is put to same, when given, which checks the password the
// caller checked against it; without same, the refusal stands.
func (l *Logins) afresh(ctx context.Context, u *users.Account, stamp uint64, same func(fresh *users.Account) bool) (*users.Account, uint64, bool) {
	fresh, err := l.Users.Recheck(ctx, u.Username())
	if err != nil || fresh.Disabled() || fresh.StoredHash() != u.StoredHash() && (same == nil || !same(fresh)) {
		return nil, 0, false
	}
	// The store is told the directory's state whatever stamp it holds: a
	// stamp that is neither the login's nor the directory's is one the
	// directory has left (a change the store missed), and a Supersede
	// older than one the store was told is ignored by it.
	now := fresh.SessionGeneration()
	if _, err := l.Store.Supersede(ctx, l.Policy.Supersession(u.Username(), now, fresh.TokensAfter(), l.Now())); err != nil {
		return nil, 0, false
	}
	return fresh, now, true
}

// MaxUserAgent bounds the User-Agent a session keeps (API.md: 256 bytes).
const MaxUserAgent = 256

// CutUTF8 returns s cut to at most n bytes, on a UTF-8 boundary.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// issueSession stores a new session of u, issued on password generation
// stamp (users.SessionGeneration), logged in by c, and returns its Grant.
// Never before u's cut-off (users.Later).
func (l *Logins) issueSession(ctx context.Context, u *users.Account, stamp uint64, c Client) (Grant, error) {
	now := users.Later(l.Now(), u.TokensAfter())
	token, digest := tokens.New()
	sess := tokens.Session{Username: u.Username(), Stamp: stamp, ID: tokens.NewSessionID(), Client: c.Key, UserAgent: CutUTF8(c.UserAgent, MaxUserAgent)}
	g := Grant{Token: token, Account: u}
	if !u.HasSecondFactor() && l.Policy.RequireMFA.Covers(u) {
		sess.Enrolment, g.Enrolment = true, true
	}
	if l.Policy.TTL > 0 {
		expires := now.Add(l.Policy.TTL).Truncate(time.Second).UTC()
		sess.ExpiresAt = expires
		g.ExpiresAt = &expires
	}
	evicted, err := l.Store.Issue(ctx, digest, sess, l.Policy.MaxPerUser, now)
	if err != nil {
		return Grant{}, err
	}
	l.Guard.metrics().Revoked(RevokedEviction, evicted)
	return g, nil
}
