package postgres

import (
	"time"

	"authsvc/internal/users"
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
