package login

import (
	"errors"
	"strconv"
	"time"
)

// The ways a login, or any other check of a password or a code, is
// refused. internal/httpapi maps each to its status and API code; none of
// them ever carries a password, a code or a token in its text.
var (
	// ErrInvalidCredentials: a wrong password or code, an unknown or
	// disabled user, or a password changed since it was checked; one
	// answer for all, in the same time.
	ErrInvalidCredentials = errors.New("login: invalid credentials")
	// ErrInvalidToken: an mfa_token that is malformed, unknown, expired,
	// out of attempts, spent, or whose user changed since.
	ErrInvalidToken = errors.New("login: invalid mfa_token")
	// ErrThrottled: the throttle refuses the attempt; a *ThrottledError
	// says for how long.
	ErrThrottled = errors.New("login: throttled")
	// ErrCodeLocked: the user's code lock holds throttle.MaxCodeFailures
	// wrong codes; every code is refused until user unlock.
	ErrCodeLocked = errors.New("login: second factor locked")
	// ErrSecondFactorRequired: the password was right, and the user has a
	// second factor; a *SecondFactorError carries the second step.
	ErrSecondFactorRequired = errors.New("login: a second factor is required")
	// ErrEnrolmentRequired: a user whom --require-mfa covers and who has
	// no second factor asks for what only a user with one may have.
	ErrEnrolmentRequired = errors.New("login: a second factor must be enrolled first")
	// ErrUnavailable: no decision in time (no hasher slot, a wait for the
	// throttle's checks in flight that ran out).
	ErrUnavailable = errors.New("login: password checking unavailable")
	// ErrSecretKey: the secret key cannot open a user's second factor (a
	// key missing, or not the one the directory's secrets were sealed
	// under). The operator must see it; the client gets 503.
	ErrSecretKey = errors.New("the secret key cannot open a second factor")
)

// A ThrottledError is ErrThrottled with what the reply and the audit line
// say of it.
type ThrottledError struct {
	RetryAfter time.Duration // until the throttle may admit the client again
	// Limits names the throttle's limits that refused the attempt
	// (throttle.Limits' String), for the audit line alone; "" when the
	// throttle cannot say.
	Limits string
}

func (e *ThrottledError) Error() string {
	return "login: throttled for " + strconv.Itoa(int(e.RetryAfter/time.Second)) + "s"
}

// Is reports whether target is ErrThrottled, so that errors.Is finds it.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// The second steps a user with a second factor may take (SecondFactorError).
const (
	// MethodCode is a code of the user's authenticator or one of their
	// recovery codes, sent with the mfa_token (or beside the password).
	MethodCode = "code"
)

// A SecondFactorError is ErrSecondFactorRequired with its second step.
type SecondFactorError struct {
	// Token is the mfa_token of the second step; "" when the code is to be
	// sent beside the password instead (a token mint). It is a secret:
	// Error never shows it.
	Token string
	// Methods are the second steps the user can take (MethodCode).
	Methods []string
}

func (e *SecondFactorError) Error() string { return ErrSecondFactorRequired.Error() }

// Is reports whether target is ErrSecondFactorRequired, so that errors.Is
// finds it.
func (e *SecondFactorError) Is(target error) bool { return target == ErrSecondFactorRequired }

// errFactorGone: the code was checked against second factors the user no
// longer has (user reset-mfa, or an admin's, between the read of the user
// and the code's check). Only a login sees it (checkOrGone), and decides
// it again on the user as the directory has them now.
var errFactorGone = errors.New("the user's second factor is gone")

// errCodeSpent: a recovery code matched, but another request spent it
// first.
var errCodeSpent = errors.New("recovery code already spent")
