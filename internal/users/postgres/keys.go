package postgres

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"authsvc/internal/users"
)

// The keys LookupKey finds users by are indexes of authsvc_users: the
// username its primary key, a personal access token's digest the table
// authsvc_access_tokens (accesstokens.go), an email address
// pgEmailIndex. A kind more is an index more (and a case below), never a
// method.

// pgEmailIndex indexes the email addresses with their ASCII letters in
// lower case, the expression LookupKey of an address and Page's
// Filter.Email compare (users.SameEmail: lower() would follow the
// collation, and fold other letters too), so that a reset request finds
// the address's users in one probe rather than a scan of every row.
const pgEmailIndex = `create index authsvc_users_email on authsvc_users (` + pgLowerEmail + `);`

// pgLowerEmail is the email column with its ASCII letters in lower case.
const pgLowerEmail = `translate(email, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')`

// LookupKey answers a personal access token's digest from memory while
// it can (lookupToken), as Lookup answers; a username or an email address
// from the database, as Factors does: the cache holds neither the users'
// tokens nor their addresses.
func (d *Directory) LookupKey(ctx context.Context, k users.Key) ([]users.Match, error) {
	if k.Kind == users.KeyAccessToken {
		var digest [sha256.Size]byte
		if len(k.Value) != sha256.Size {
			return nil, users.ErrNotFound
		}
		copy(digest[:], k.Value)
		return d.lookupToken(ctx, digest)
	}
	return d.RecheckKey(ctx, k)
}

// RecheckKey reads the users k finds from the database, never the
// cache, and caches them, as Recheck does.
func (d *Directory) RecheckKey(ctx context.Context, k users.Key) ([]users.Match, error) {
	switch k.Kind {
	case users.KeyAccessToken:
		var digest [sha256.Size]byte
		if len(k.Value) != sha256.Size {
			return nil, users.ErrNotFound
		}
		copy(digest[:], k.Value)
		d.mu.Lock()
		epoch := d.epoch
		d.mu.Unlock()
		return d.readToken(ctx, digest, epoch, time.Now())
	case users.KeyUsername:
		return d.readUser(ctx, k.Value)
	case users.KeyEmail:
		return d.readEmail(ctx, k.Value)
	}
	return nil, fmt.Errorf("key kind %d: %w", k.Kind, users.ErrKeyKind)
}

// readEmail reads the users whose address is email (users.SameEmail),
// in byte order of their usernames, from pgEmailIndex, and caches them
// unless an invalidation came meanwhile: ErrNotFound when none. It
// admits, times out and fails as every look-up does.
func (d *Directory) readEmail(ctx context.Context, email string) ([]users.Match, error) {
	if email == "" || !storable(email) {
		return nil, users.ErrNotFound // no address, or one no row can hold
	}
	now := time.Now()
	d.mu.Lock()
	epoch := d.epoch
	d.mu.Unlock()
	release, err := d.admit(now)
	if err != nil {
		return nil, err
	}
	defer release()
	qctx, cancel := context.WithTimeout(ctx, pgQueryTimeout)
	defer cancel()
	const op = "look up users by email address"
	rows, err := d.pool.Query(qctx, `select version, `+pgUserColumns+` from authsvc_users where `+pgLowerEmail+` = $1 order by username`+d.collate, users.LowerASCII(email))
	if err != nil {
		return nil, d.fail(qctx, op, err)
	}
	defer rows.Close()
	var found []users.Match
	var read []row
	for rows.Next() {
		var r row
		u, err := scanUser(rows, &r.version)
		if err != nil {
			return nil, d.fail(qctx, op, err)
		}
		if r.user, err = users.NewAccount(&u); err != nil {
			return nil, err // a row written around authsvc; List shows it
		}
		found = append(found, users.Match{Account: r.user, AccessTokens: u.AccessTokens})
		read = append(read, r)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(qctx, op, err)
	}
	d.contact()
	d.mu.Lock()
	if d.epoch == epoch {
		for _, r := range read {
			d.cache.Put(r.user.Username(), r)
		}
	}
	d.mu.Unlock()
	if len(found) == 0 {
		return nil, users.ErrNotFound
	}
	return found, nil
}
