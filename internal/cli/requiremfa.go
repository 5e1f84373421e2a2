package cli

import (
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
