package main

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors of the Store contract; callers test them with errors.Is.
var (
	// errTokenNotFound: no live session under that digest (never issued,
	// revoked, evicted or expired). The caller answers 401 invalid_token.
	errTokenNotFound = errors.New("token not found")
	// errStoreUnavailable: the store could not answer in time or at all.
	// The caller fails closed and answers 503 unavailable.
	errStoreUnavailable = errors.New("token store unavailable")
)

// A Session is what a token stands for. The token itself is never stored:
// the store keys sessions by the token's SHA-256 digest.
type Session struct {
	Username string
	// Stamp is the passwordStamp of the user's hash when the token was
	// issued; a token whose stamp no longer matches is dead.
	Stamp uint64
	// ExpiresAt is when the session stops being valid; zero means never.
	ExpiresAt time.Time
	// IssuedAt is when the token was issued: the now of Issue, which sets
	// it. A token issued before its user's cut-off is dead.
	IssuedAt time.Time
}

// A Store keeps sessions keyed by token digest.
//
// The contract every implementation meets, checked by testStoreConformance:
//   - Issue stores s under d. If the user then holds more than limit
//     sessions (limit > 0), the oldest are revoked until limit remain.
//     Issuing an existing digest is not expected (tokens are 160 random bits).
//   - Lookup returns the session under d, or errTokenNotFound if there is
//     none or it expired at or before now.
//   - Revoke removes the session under d; revoking an unknown digest is not
//     an error (logout is idempotent).
//   - RevokeUser removes every session of username and reports how many.
//   - RevokeUserBefore removes the sessions of username issued before
//     before (to the store's precision, erring towards removal) and
//     reports how many.
//   - Lookup returns a session's IssuedAt: the now Issue was called with,
//     rounded down at most to the millisecond (and, for logins of one user
//     in one millisecond, at most a millisecond per login later).
//   - Ping reports whether the store can serve requests now.
//   - Any failure to reach the backing service wraps errStoreUnavailable;
//     no method ever returns a session it could not confirm (fail closed).
//   - All methods are safe for concurrent use; ctx bounds each call.
//   - No method stores or logs a usable token: only digests reach the store.
type Store interface {
	Issue(ctx context.Context, d tokenDigest, s Session, limit int, now time.Time) error
	Lookup(ctx context.Context, d tokenDigest, now time.Time) (Session, error)
	Revoke(ctx context.Context, d tokenDigest) error
	RevokeUser(ctx context.Context, username string) (int, error)
	RevokeUserBefore(ctx context.Context, username string, before time.Time) (int, error)
	Ping(ctx context.Context) error
	Close() error
}
