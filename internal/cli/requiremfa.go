package cli

import (
	"context"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/tick"
	"authsvc/internal/users"
)

// requireMFAHelp is what --require-mfa says of itself, on serve and user list.
const requireMFAHelp = "who must have a second factor: none, admins, all, or a comma list of group:NAME; a user it covers who has none logs in only to enrol one"

// parseRequireMFA returns the policy --require-mfa (or AUTHSVC_REQUIRE_MFA)
// spells s; a value it does not spell is a usage error of cmd.
func parseRequireMFA(cmd, s string) (users.MFAPolicy, error) {
	p, err := users.ParseMFAPolicy(s)
	if err != nil {
		return p, usagef("%s: --require-mfa %v", cmd, err)
	}
	return p, nil
}

// keepEnrolmentPending keeps authsvc_mfa_enrollment_pending current until
// ctx is done: it counts in the directory the users deps.RequireMFA
// covers who have no second factor (users.MFAPolicy.Pending), at once and
// then every interval, the directory's own reload interval, so that the
// gauge follows the users as the server does. A policy that covers no one
// leaves the gauge at 0 and counts nothing.
func keepEnrolmentPending(ctx context.Context, interval time.Duration, deps httpapi.Deps) {
	filter, ok := deps.RequireMFA.Pending()
	if !ok {
		return
	}
	deps.Log.Info("second factor required", "require_mfa", deps.RequireMFA.String())
	failing := false // a directory that does not answer is told once, not every interval
	count := func() {
		n, err := deps.Users.Count(ctx, filter)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			deps.Log.Warn("could not count the users who must enrol a second factor; the gauge keeps its last value", "err", err)
		case err == nil:
			deps.Metrics.SetEnrolmentPending(n)
		}
		failing = err != nil
	}
	count()
	tick.Every(ctx, interval, func(time.Time) { count() })
}
