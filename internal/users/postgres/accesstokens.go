package postgres

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"authsvc/internal/users"
)

// Personal access tokens live with their user, in the access_tokens
// column (users.User.AccessTokens as JSON, NULL for none), so that every
// write of a user writes its tokens, under the same lock and in the same
// transaction. A token is found by its digest through
// authsvc_access_tokens, one row per digest, which a trigger keeps equal
// to the digests in access_tokens at every insert, update and delete of a
// user, whoever writes it (a hand edit too): the digest is its primary
// key, so a look-up of a digest no one holds, which a flood of made-up
// tokens asks for, is one probe of a B-tree. (A GIN index on the column,
// queried with @>, needs no table, but indexes every field of every
// token, and with fastupdate has a look-up scan a pending list.) The
// key also keeps one digest from being two users' tokens: a write that
// would make it so fails.
//
// The trigger rewrites a user's index rows only when the digests change:
// recording a use (last_used_at) leaves them be.
const pgAccessTokensSchema = `alter table authsvc_users add column access_tokens jsonb;
	create table authsvc_access_tokens (
		digest   bytea primary key,
		username text not null
	);
	create index authsvc_access_tokens_username on authsvc_access_tokens (username);
	create function authsvc_index_access_tokens() returns trigger language plpgsql as $$
	declare
		digests bytea[];
	begin
		if tg_op = 'DELETE' then
			delete from authsvc_access_tokens where username = old.username;
			return null;
		end if;
		select coalesce(array_agg(distinct decode(t->>'digest', 'hex')), '{}') into digests
			from jsonb_array_elements(coalesce(new.access_tokens, '[]')) t;
		if tg_op = 'UPDATE' then
			delete from authsvc_access_tokens where username = old.username
				and (old.username <> new.username or digest <> all(digests));
		end if;
		insert into authsvc_access_tokens (digest, username)
			select d, new.username from unnest(digests) d
			where not exists (select from authsvc_access_tokens a where a.digest = d and a.username = new.username);
		return null;
	end $$;
	create trigger authsvc_access_tokens_insert after insert on authsvc_users for each row
		when (new.access_tokens is not null) execute function authsvc_index_access_tokens();
	create trigger authsvc_access_tokens_update after update on authsvc_users for each row
		when (old.username <> new.username or old.access_tokens is distinct from new.access_tokens)
		execute function authsvc_index_access_tokens();
	create trigger authsvc_access_tokens_delete after delete on authsvc_users for each row
		when (old.access_tokens is not null) execute function authsvc_index_access_tokens();`

// A tokenEntry is a personal access token found, as the tokens cache
// holds it: good while the users cache holds its user at version, the
// version of the row it was read from. Any write of the user moves the
// version, and drops the user from the cache of every instance (the
// change feed): a token revoked is never found in memory after the write
// has reached this instance, and a read of the user that finds the row
// unchanged keeps the entries good.
type tokenEntry struct {
	username string
	version  int64
	token    *users.AccessToken // its own copy: holds no other token alive
}

// AccessToken answers from memory while the database has answered within
// pgTrustCache, as Lookup does, a token it has found before whose user
// the cache still holds as it was then, and a digest a read found no
// token of, no change having reached the instance since, within
// pgAbsentTTL (ErrNoAccessTokenAtSource, as that read said: negcache.go);
// any other digest, or any while the cache is not trusted, is looked up
// in the database (RecheckAccessToken).
func (d *Directory) AccessToken(ctx context.Context, digest [sha256.Size]byte) (*users.Account, *users.AccessToken, error) {
	now := time.Now()
	d.mu.Lock()
	if e, ok := d.tokens.Get(digest); ok && d.trusted(now) {
		if r, ok := d.cache.Get(e.username); ok && r.user != nil && r.version == e.version {
			d.cache.Put(e.username, r) // most recently used, as a Lookup would
			d.tokens.Put(digest, e)
			d.mu.Unlock()
			return r.user, e.token, nil
		}
	}
	if d.trusted(now) && d.absent.has(digest, d.epoch, now) {
		d.mu.Unlock()
		return nil, nil, users.ErrNoAccessTokenAtSource
	}
	epoch := d.epoch
	d.mu.Unlock()
	return d.readToken(ctx, digest, epoch, now)
}

// RecheckAccessToken reads the token's user from the database, never from
// the cache, and caches them, as Recheck does. It never answers from the
// digests found absent (AccessToken does): a token made on another
// instance a moment ago is found here, whether or not the change has
// reached this instance.
func (d *Directory) RecheckAccessToken(ctx context.Context, digest [sha256.Size]byte) (*users.Account, *users.AccessToken, error) {
	d.mu.Lock()
	epoch := d.epoch
	d.mu.Unlock()
	return d.readToken(ctx, digest, epoch, time.Now())
}

// readToken reads the user holding the token of digest, and unless an
// invalidation came after epoch caches the user and the token, or that
// there is no token of digest. A read that fails caches nothing.
func (d *Directory) readToken(ctx context.Context, digest [sha256.Size]byte, epoch uint64, now time.Time) (*users.Account, *users.AccessToken, error) {
	var t *users.AccessToken
	u, x, err := d.readRow(ctx, "look up a personal access token", epoch, now,
		`where username = (select username from authsvc_access_tokens where digest = $1)`, digest[:],
		func(r row, x *users.User) {
			t = findToken(x.AccessTokens, digest)
			switch {
			case r.user != nil && t != nil:
				d.cache.Put(r.user.Username(), r)
				d.tokens.Put(digest, tokenEntry{username: r.user.Username(), version: r.version, token: t})
				d.absent.remove(digest)
			case t == nil:
				d.absent.add(digest, epoch, now)
			}
		})
	if err != nil {
		return nil, nil, err
	}
	if t == nil && x != nil { // not cached: an invalidation came meanwhile
		t = findToken(x.AccessTokens, digest)
	}
	if u == nil || t == nil {
		return nil, nil, users.ErrNoAccessTokenAtSource // read for this call
	}
	return u, t, nil
}

// findToken returns a copy of the token of list whose digest is digest,
// or nil.
func findToken(list []users.AccessToken, digest [sha256.Size]byte) *users.AccessToken {
	for i := range list {
		if d, ok := list[i].DigestBytes(); ok && d == digest {
			t := list[i]
			return &t
		}
	}
	return nil
}

// AccessTokens reads the user's tokens from the database, never from the
// cache, as Factors reads second factors.
func (d *Directory) AccessTokens(ctx context.Context, username string) ([]users.AccessToken, error) {
	var list []users.AccessToken
	if err := d.readColumn(ctx, "read a user's personal access tokens", "access_tokens", username, &list); err != nil {
		return nil, err
	}
	if err := users.CheckAccessTokens(list); err != nil {
		return nil, fmt.Errorf("user %q: %w", username, err) // a row written around authsvc
	}
	return list, nil
}

// pgAccessTokens is list as the access_tokens column's argument: NULL for
// none, else its JSON.
func pgAccessTokens(list []users.AccessToken) any {
	if len(list) == 0 {
		return nil
	}
	return list
}
