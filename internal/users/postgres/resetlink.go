package postgres

import (
	"context"
	"fmt"
	"time"

	"authsvc/internal/users"

	"github.com/jackc/pgx/v5"
)

// A user's live password reset link (users.User.ResetLink: the token's
// SHA-256 in hex and its expiry, never the token) lives in the reset_link
// column as JSON, NULL for none, so that every write of a user writes it,
// under the same lock and in the same transaction: a newer link, a
// password set or a reset replaces or clears it in the write that makes
// the older one dead. No index: a link is confirmed by its user's name
// (the uid), inside Update, which reads the row locked. JSON keeps
// expires_at to the nanosecond, as the users file does.
const pgResetLinkSchema = `alter table authsvc_users add column reset_link jsonb;`

// pgResetLink is l as the reset_link column's argument: NULL for none,
// else its JSON.
func pgResetLink(l *users.ResetLink) any {
	if l == nil {
		return nil
	}
	return l
}

// pgCodesAndMailsSchema adds codes_after (users.User.CodesAfter: user
// unlock lifts the code lock, a reset confirm does not) and reset_mails
// (users.User.ResetMails: when reset links were mailed within the hour, as
// JSON, NULL for none), apart from reset_link, so that neither a confirm
// nor a newer link resets the count. Neither is copied from an older
// column: failures_after was moved by confirms too, and the count in
// reset_link's "mailed" is still read (users.ResetLink.Mailed).
const pgCodesAndMailsSchema = `alter table authsvc_users add column codes_after timestamptz;
	alter table authsvc_users add column reset_mails jsonb;`

// pgResetMails is at as the reset_mails column's argument: NULL for none,
// else its JSON.
func pgResetMails(at []time.Time) any {
	if len(at) == 0 {
		return nil
	}
	return at
}

// updateResetLink is UpdateAll's with users.ResetLinkOnly: change sees the user as the
// row holds them now, locked, and the row keeps what change leaves in
// ResetLink and ResetMails alone. A reset request, which anyone may send,
// writes through it: it moves no generation and records no change, so no
// other instance drops its cache or counts a reload for it (API.md: no
// metric tells whether a user exists). Nothing cached elsewhere holds a
// link (users.Account has none): a confirm, and the mail count, read the
// row locked, through UpdateAll. changeErr is change's error, or the
// user's absence; err the write's.
func (d *Directory) updateResetLink(ctx context.Context, username string, change func(*users.User) error) (changeErr, err error) {
	ctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		found, err := fetchUsers(ctx, tx, []string{username}, " for update")
		if err != nil {
			return err
		}
		u := found[username]
		if u == nil {
			changeErr = fmt.Errorf("user %q: %w", username, users.ErrNotFound)
			return changeErr
		}
		if changeErr = change(u); changeErr != nil {
			return changeErr
		}
		if err := users.CheckResetLink(u.ResetLink); err != nil {
			changeErr = err
			return err
		}
		_, err = tx.Exec(ctx, `update authsvc_users set reset_link = $2, reset_mails = $3 where username = $1`,
			username, pgResetLink(u.ResetLink), pgResetMails(u.ResetMails))
		return err
	})
	switch {
	case changeErr != nil:
		return changeErr, nil
	case err != nil:
		return nil, d.fail(ctx, "keep a reset link", err)
	}
	d.contact()
	return nil, nil
}
