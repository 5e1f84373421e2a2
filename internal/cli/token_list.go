package cli

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"authsvc/internal/users"
)

// tokenListAbout is token list's --help.
const tokenListAbout = `Lists the live personal access tokens of USERNAME, or of every user,
newest first; never a token, nor its digest. ID is what token revoke
takes; PREFIX is the token's first characters, for recognising it.`

// tokenList runs "authsvc token list [USERNAME]": it prints the live
// personal access tokens as a table.
func tokenList(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("token list", "[USERNAME]", tokenListAbout)
	if err := f.parse(e, args); err != nil {
		return err
	}
	return f.withDirectory(ctx, true, func(dir users.Directory) error {
		var only string
		switch f.NArg() {
		case 0:
		case 1:
			only = users.NormalizeUsername(f.Arg(0))
		default:
			return usagef("token list: unexpected argument %q; want at most one USERNAME", f.Arg(1))
		}
		list, err := dir.List(ctx)
		if err != nil {
			return err
		}
		rows, err := liveTokenRows(list, only, time.Now())
		if err != nil {
			return err
		}
		return writeTokenTable(e, rows)
	})
}

// A tokenRow is one line of token list: a token and its user.
type tokenRow struct {
	username string
	token    users.AccessToken
}

// liveTokenRows returns the tokens of list live at now, of the user only
// (every user's when only is ""), newest first: an error when only names
// no user.
func liveTokenRows(list []users.User, only string, now time.Time) ([]tokenRow, error) {
	var rows []tokenRow
	found := false
	for i := range list {
		if only != "" && list[i].Username != only {
			continue
		}
		found = true
		for _, t := range users.LiveAccessTokens(list[i].AccessTokens, now) {
			rows = append(rows, tokenRow{list[i].Username, t})
		}
	}
	if only != "" && !found {
		return nil, fmt.Errorf("token list: no user %q", only)
	}
	slices.SortStableFunc(rows, func(a, b tokenRow) int {
		return cmp.Or(b.token.CreatedAt.Compare(a.token.CreatedAt), strings.Compare(a.token.ID, b.token.ID))
	})
	return rows, nil
}

// writeTokenTable prints rows as token list's table. Every field is
// printable: the file may be hand-edited.
func writeTokenTable(e *env, rows []tokenRow) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUSER\tNAME\tSCOPES\tCREATED\tEXPIRES\tLAST USED\tPREFIX")
	for _, r := range rows {
		t := &r.token
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(t.ID), printable(r.username), printable(t.Name),
			printable(strings.Join(t.Scopes, ",")), listTime(t.CreatedAt), listTime(t.ExpiresAt), listTime(t.LastUsedAt), printable(t.Prefix))
	}
	return tw.Flush()
}

// listTime is a time as token list shows it: RFC 3339 in UTC, to the
// second, or - for none.
func listTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
