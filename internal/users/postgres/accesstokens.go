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
	version int64
	// match is the token's user as that row held them, with that token
	// alone (tokenMatch): LookupKey's answer, as it is.
	match []users.Match
}

// lookupToken answers from memory while the database has answered
// within pgTrustCache, as Lookup does, a token it has found before whose
// user the cache still holds as it was then, and a digest a read found
// no token of, no change having reached the instance since, within
// pgAbsentTTL (ErrNoAccessTokenAtSource, as that read said: negcache.go);
// any other digest, or any while the cache is not trusted, is looked up
// in the database (readToken).
func (d *Directory) lookupToken(ctx context.Context, digest [sha256.Size]byte) ([]users.Match, error) {
	now := time.Now()
	d.mu.Lock()
	if e, ok := d.tokens.Get(digest); ok && d.trusted(now) {
		name := e.match[0].Account.Username()
		if r, ok := d.cache.Get(name); ok && r.user != nil && r.version == e.version {
			d.cache.Put(name, r) // most recently used, as a Lookup would
			d.tokens.Put(digest, e)
			d.mu.Unlock()
			return e.match, nil
		}
	}
	if d.trusted(now) && d.absent.has(digest, d.epoch, now) {
		d.mu.Unlock()
		return nil, users.ErrNoAccessTokenAtSource
	}
	epoch := d.epoch
	d.mu.Unlock()
	return d.readToken(ctx, digest, epoch, now)
}

// readToken reads the user holding the token of digest, never from the
// cache, and unless an invalidation came after epoch caches the user and
// the token, or that there is no token of digest. A read that fails
// caches nothing. RecheckKey reads so: it never answers from the
// digests found absent, and a token made on another instance a moment
// ago is found, whether or not the change has reached this instance.
func (d *Directory) readToken(ctx context.Context, digest [sha256.Size]byte, epoch uint64, now time.Time) ([]users.Match, error) {
	var found []users.Match
	u, x, err := d.readRow(ctx, "look up a personal access token", epoch, now,
		`where username = (select username from authsvc_access_tokens where digest = $1)`, digest[:],
		func(r row, x *users.User) {
			found = tokenMatch(r.user, x, digest)
			switch {
			case found != nil:
				d.cache.Put(r.user.Username(), r)
				d.tokens.Put(digest, tokenEntry{version: r.version, match: found})
				d.absent.remove(digest)
			default:
				d.absent.add(digest, epoch, now)
			}
		})
	if err != nil {
		return nil, err
	}
	if found == nil { // not cached: an invalidation came meanwhile
		found = tokenMatch(u, x, digest)
	}
	if found == nil {
		return nil, users.ErrNoAccessTokenAtSource // read for this call
	}
	return found, nil
}

// tokenMatch returns u, read as x, as LookupKey finds them by digest: with
// a copy of that token alone, so that the tokens cache holds no other
// token alive; nil when u is nil or has no token of digest.
func tokenMatch(u *users.Account, x *users.User, digest [sha256.Size]byte) []users.Match {
	if u == nil {
		return nil
	}
	m := users.Match{Account: u, AccessTokens: x.AccessTokens}
	t := m.AccessToken(digest)
	if t == nil {
		return nil
	}
	return []users.Match{{Account: u, AccessTokens: []users.AccessToken{*t}}}
}

// readUser reads the user named username from the database, never the
// cache, and caches them as Recheck does: KeyUsername's answer, their
// tokens included, which the cache does not hold.
func (d *Directory) readUser(ctx context.Context, username string) ([]users.Match, error) {
	if users.CheckUsername(username) != nil {
		return nil, users.ErrNotFound // no write stores such a name: spare the database
	}
	d.mu.Lock()
	epoch := d.epoch
	d.mu.Unlock()
	u, x, err := d.readRow(ctx, "look up a user", epoch, time.Now(), `where username = $1`, username, func(r row, _ *users.User) {
		d.cache.Put(username, r)
	})
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, users.ErrNotFound
	}
	if err := users.CheckAccessTokens(x.AccessTokens); err != nil {
		return nil, fmt.Errorf("user %q: %w", username, err) // a row written around authsvc
	}
	return []users.Match{{Account: u, AccessTokens: x.AccessTokens}}, nil
}

// pgAccessTokens is list as the access_tokens column's argument: NULL for
// none, else its JSON.
func pgAccessTokens(list []users.AccessToken) any {
	if len(list) == 0 {
		return nil
	}
	return list
}
