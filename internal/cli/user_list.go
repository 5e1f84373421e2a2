package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"authsvc/internal/users"
)

// userListAbout is user list's --help.
const userListAbout = `Lists the users, without their hashes. MFA is the user's second factor:
totp (an authenticator), codes(N) (N unused recovery codes), both as
totp+codes(N), or - for none (an enrolment not yet confirmed is none).
With --require-mfa (as serve's), a user the policy covers who has none
shows required instead of -: their next login may only enrol one
(disabled users never show it). TOKENS counts the user's live personal
access tokens (token list shows them).`

// userList runs "authsvc user list": it prints the users as a table,
// without their hashes.
func userList(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user list", "", userListAbout)
	requireMFA := f.String("require-mfa", "none", "serve's `POLICY` of who must have a second factor: none, admins, all, or a comma list of group:NAME")
	f.fromEnv = append(f.fromEnv, "require-mfa")
	var policy users.MFAPolicy
	f.checks = append(f.checks, func() (err error) {
		policy, err = parseRequireMFA(f.Name(), *requireMFA)
		return err
	})
	if err := f.parse(e, args); err != nil {
		return err
	}
	return f.withDirectory(ctx, true, func(dir users.Directory) error {
		if err := f.noArguments(); err != nil {
			return err
		}
		list, err := dir.List(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USERNAME\tADMIN\tDISABLED\tMFA\tTOKENS\tNAME\tEMAIL\tGROUPS")
		for _, u := range list {
			// The file may be hand-edited: every field is printable, or a name
			// could clear the screen or forge a row.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", printable(u.Username), yesNo(u.Admin), yesNo(u.Disabled), factorsColumn(&u, policy),
				liveTokens(&u, now), dash(printable(u.Name)), dash(printable(u.Email)), dash(printable(strings.Join(u.Groups, ","))))
		}
		return tw.Flush()
	})
}

// factorsColumn is user list's MFA column for u: what logs u in beside
// the password. Only second factors as API.md counts them: an enrolment
// not yet confirmed logs no one in, so it shows as none: "-", or
// "required" when policy covers u (users.MFAPolicy.PendingUser), as the
// admin API's mfa_enrollment_pending does.
func factorsColumn(u *users.User, policy users.MFAPolicy) string {
	switch {
	case policy.PendingUser(u):
		return "required"
	case !u.HasSecondFactor():
		return "-"
	}
	var parts []string
	if u.MFA.TOTP != nil {
		parts = append(parts, "totp")
	}
	if n := len(u.MFA.RecoveryCodes); n > 0 {
		parts = append(parts, fmt.Sprintf("codes(%d)", n))
	}
	return strings.Join(parts, "+")
}

// liveTokens returns how many of u's personal access tokens are live at now.
func liveTokens(u *users.User, now time.Time) int {
	n := 0
	for i := range u.AccessTokens {
		if u.AccessTokens[i].Live(now) {
			n++
		}
	}
	return n
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
