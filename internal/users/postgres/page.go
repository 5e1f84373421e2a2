package postgres

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"authsvc/internal/users"

	"github.com/jackc/pgx/v5"
)

// pgByteOrder is a query answering whether the username column sorts in
// byte order by itself: its collation is "C" or "POSIX", or the database's
// default and that is libc's "C" or "POSIX". Any other collation (ICU, a
// libc locale, even C.UTF-8, whose order is the platform's) is taken as
// not byte order: then Page says COLLATE "C" and migration v9 made an
// index for it. It reads pg_database through to_jsonb, which holds
// datlocprovider from PostgreSQL 15 on and lacks it (libc only) before.
// Migration v9 runs it: never change it, write a new one.
const pgByteOrder = `select a.attcollation in (950, 951) -- C_COLLATION_OID, POSIX_COLLATION_OID
		or (a.attcollation = 100 -- DEFAULT_COLLATION_OID
			and coalesce(db.j->>'datlocprovider', 'c') = 'c' and db.j->>'datcollate' in ('C', 'POSIX'))
	from pg_attribute a, (select to_jsonb(d) j from pg_database d where d.datname = current_database()) db
	where a.attrelid = 'authsvc_users'::regclass and a.attname = 'username'`

// pgUsernameIndex is migration v9: an index in byte order on the
// usernames, for Page's keyset, where the primary key's is another order.
const pgUsernameIndex = `do $$ begin
	if not (` + pgByteOrder + `) then
		create index authsvc_users_username_c on authsvc_users (username collate "C");
	end if;
end $$;`

// pgHasSecondFactor is users.User.HasSecondFactor on the mfa column as
// pgFactors stores it: an active authenticator (an object under "totp") or
// at least one unused recovery code; a pending enrolment alone is none.
const pgHasSecondFactor = `coalesce(jsonb_typeof(mfa->'totp') = 'object'
	or (jsonb_typeof(mfa->'recovery_codes') = 'array' and mfa->'recovery_codes' <> '[]'::jsonb), false)`

// Page returns the users f matches whose usernames sort after after in
// byte order, at most limit, in one statement on the database (never the
// cache): keyset pagination on the username index.
func (d *Directory) Page(ctx context.Context, after string, limit int, f users.Filter) ([]users.User, error) {
	sql, args, ok := d.pageSQL(after, limit, f)
	if !ok {
		return nil, nil
	}
	return d.scanUsers(ctx, "page through users", sql, args...)
}

// scanUsers returns the users the query sql selects (pgUserColumns),
// within scanTimeout; what names the read in errors.
func (d *Directory) scanUsers(ctx context.Context, what, sql string, args ...any) ([]users.User, error) {
	ctx, cancel := context.WithTimeout(ctx, d.scanTimeout())
	defer cancel()
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, d.fail(ctx, what, err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (users.User, error) { return scanUser(row) })
	if err != nil {
		return nil, d.fail(ctx, what, err)
	}
	d.contact()
	return list, nil
}

// pageSQL returns Page's statement and its arguments, and false when the
// page is empty whatever the database holds.
func (d *Directory) pageSQL(after string, limit int, f users.Filter) (string, []any, bool) {
	q, ok := d.filterSQL(f)
	if !ok || limit <= 0 {
		return "", nil, false
	}
	switch bound, inclusive, ok := afterBound(after); {
	case !ok:
		return "", nil, false // no username sorts after after
	case inclusive:
		q.where("username"+d.collate+" >= ", bound)
	default:
		q.where("username"+d.collate+" > ", bound)
	}
	return `select ` + pgUserColumns + ` from authsvc_users` + q.clause() +
		` order by username` + d.collate + ` limit ` + strconv.Itoa(limit), q.args, true
}

// Count returns how many users f matches, in one statement on the
// database.
func (d *Directory) Count(ctx context.Context, f users.Filter) (int, error) {
	q, ok := d.filterSQL(f)
	if !ok {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.scanTimeout())
	defer cancel()
	var n int
	if err := d.pool.QueryRow(ctx, `select count(*) from authsvc_users`+q.clause(), q.args...).Scan(&n); err != nil {
		return 0, d.fail(ctx, "count users", err)
	}
	d.contact()
	return n, nil
}

// scanTimeout is the time allowed a statement that may read every row.
func (d *Directory) scanTimeout() time.Duration {
	return pgQueryTimeout + time.Duration(d.Len())*10*time.Microsecond
}

// A conditions is a where clause being built, with its arguments.
type conditions struct {
	conds []string
	args  []any
}

// where adds the condition expr followed by the next argument, arg.
func (c *conditions) where(expr string, arg any) {
	c.args = append(c.args, arg)
	c.conds = append(c.conds, expr+"$"+strconv.Itoa(len(c.args)))
}

// clause is " where" and the conditions, or "" for none.
func (c *conditions) clause() string {
	if len(c.conds) == 0 {
		return ""
	}
	return " where " + strings.Join(c.conds, " and ")
}

// filterSQL returns f's conditions, and false when no user can match f:
// its Prefix, or every one of its Groups, is not valid UTF-8 or holds a
// NUL, as no stored name does. Only the
// conditions f sets are written, so that each shape of filter gets a plan
// of its own rather than a generic one.
func (d *Directory) filterSQL(f users.Filter) (conditions, bool) {
	var c conditions
	if f.Prefix != "" {
		if !storable(f.Prefix) {
			return c, false
		}
		// A range on the index rather than LIKE: no escaping, and the
		// bounds are byte order's.
		c.where("username"+d.collate+" >= ", f.Prefix)
		if hi, ok := prefixEnd(f.Prefix); ok {
			c.where("username"+d.collate+" < ", hi)
		}
	}
	if len(f.Groups) > 0 {
		// A group no stored one can be would be refused as an argument.
		groups := slices.DeleteFunc(slices.Clone(f.Groups), func(g string) bool { return !storable(g) })
		if len(groups) == 0 {
			return c, false
		}
		c.where("groups && ", groups)
	}
	if f.Email != "" {
		if !storable(f.Email) {
			return c, false
		}
		// ASCII letters alone, as users.SameEmail: lower() would follow
		// the database's collation. pgEmailIndex indexes it.
		c.where(pgLowerEmail+" = ", users.LowerASCII(f.Email))
	}
	for _, w := range []struct {
		want users.Want
		expr string
	}{{f.Admin, "admin"}, {f.Disabled, "disabled"}, {f.MFA, pgHasSecondFactor}} {
		switch w.want {
		case users.Yes:
			c.conds = append(c.conds, w.expr)
		case users.No:
			c.conds = append(c.conds, "not "+w.expr)
		}
	}
	return c, true
}

// storable reports whether s can be a text argument: valid UTF-8 without
// NUL, as every stored username is.
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// prefixEnd returns the least string in byte order above every string
// that starts with prefix (valid UTF-8): prefix with its trailing
// U+10FFFF dropped and its last rune then incremented; false when there
// is none (nothing but U+10FFFF). A string starts with prefix exactly when
// it sorts from prefix (inclusive) to that (exclusive).
func prefixEnd(prefix string) (string, bool) {
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		if r == utf8.MaxRune {
			continue
		}
		r++
		if r == 0xD800 { // surrogates are no runes
			r = 0xE000
		}
		return prefix + string(r), true
	}
	return "", false
}

// afterBound returns the keyset bound of after: the users after it are
// those above bound, or from bound on when inclusive; false when no valid
// username can sort after it. A valid after is its own bound. Otherwise,
// with v its longest valid start (no NUL) and x the rest: a username
// after it is one starting with v and then a rune whose encoding is above
// x (from the least such rune on), or one above every string that starts
// with v (from prefixEnd(v) on).
func afterBound(after string) (bound string, inclusive, ok bool) {
	if storable(after) {
		return after, false, true
	}
	v := validStart(after)
	x := after[len(v):]
	// Runes in order, surrogates left out, as an index: UTF-8's byte
	// order is the runes' order, so the first whose encoding is above x
	// is found by binary search.
	const runes = utf8.MaxRune + 1 - (0xE000 - 0xD800)
	nth := func(i int) string {
		if i >= 0xD800 {
			i += 0xE000 - 0xD800
		}
		return string(rune(i))
	}
	if i := sort.Search(runes, func(i int) bool { return nth(i) > x }); i < runes {
		return v + nth(i), true, true
	}
	end, ok := prefixEnd(v)
	return end, true, ok
}

// validStart returns the longest start of s, whole runes, that is
// storable.
func validStart(s string) string {
	for i, r := range s {
		if r == 0 || r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)) {
			return s[:i]
		}
	}
	return s
}
