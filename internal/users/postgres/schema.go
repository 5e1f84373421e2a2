package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The schema: its versions (pgMigrations) and the migration that brings
// a database to the last of them.

// ErrNoSchema: OpenExisting found a database no authsvc has set up (a
// command that writes, or serve, creates the schema).
var ErrNoSchema = errors.New("no authsvc schema yet (a command that writes, or serve, creates it)")

// pgMigrations are the schema's versions: pgMigrations[i] takes it from
// version i to i+1. Published ones never change; a new version appends.
var pgMigrations = []string{
	`create table authsvc_users (
		id            bigint generated always as identity,
		username      text primary key,
		password_hash text not null,
		hash_work     double precision not null, -- seconds a check takes (passwordHash.work); 0: unusable
		name          text not null default '',
		email         text not null default '',
		groups        text[] not null default '{}',
		admin         boolean not null default false,
		disabled      boolean not null default false,
		tokens_after  timestamptz,
		updated_at    timestamptz not null default now(),
		version       bigint not null -- the generation that wrote the row
	);
	create index authsvc_users_hash_work on authsvc_users (hash_work desc);
	create table authsvc_users_state (
		id         boolean primary key default true check (id),
		generation bigint not null,
		users      bigint not null
	);
	insert into authsvc_users_state (generation, users) values (0, 0);
	create table authsvc_user_changes (
		generation bigint not null,
		username   text not null,
		primary key (generation, username)
	);`,
	// users.User.PasswordGeneration: sessions die with the password they were issued on.
	`alter table authsvc_users add column password_generation bigint not null default 0;`,
	// A deleted user's cut-off, which a user added later under the name keeps.
	`create table authsvc_tombstones (
		username     text primary key,
		tokens_after timestamptz not null
	);`,
	// users.User.FailuresAfter: user unlock.
	`alter table authsvc_users add column failures_after timestamptz;`,
	// users.User.DjangoHash: user import --update.
	`alter table authsvc_users add column django_hash text not null default '';`,
	// users.User.MFA: second factors, NULL for none.
	`alter table authsvc_users add column mfa jsonb;`,
	pgAccessTokensSchema,
	// users.User.ResetLink: password reset links.
	pgResetLinkSchema,
	// Directory.Page: keyset pagination in byte order.
	pgUsernameIndex,
	// users.User.CodesAfter, the code lock's epoch apart from a reset's,
	// and users.User.ResetMails, counted apart from the link (resetlink.go).
	pgCodesAndMailsSchema,
	// Directory.LookupKey of an email address: an index, not a scan (keys.go).
	pgEmailIndex,
}

// migrate brings the schema to the last of pgMigrations, in one
// transaction under an advisory lock, so that instances starting at once
// migrate one after the other and the later ones find nothing to do.
func (d *Directory) migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock($1)`, int64(pgMigrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `create table if not exists authsvc_schema (version integer not null)`); err != nil {
			return err
		}
		var version int
		err := tx.QueryRow(ctx, `select version from authsvc_schema`).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			_, err = tx.Exec(ctx, `insert into authsvc_schema (version) values (0)`)
		}
		if err != nil {
			return err
		}
		if version > len(pgMigrations) {
			// A newer authsvc migrated it: this one would misread the tables.
			return keep(fmt.Errorf("schema version %d is newer than this authsvc knows (%d)", version, len(pgMigrations)))
		}
		for v := version; v < len(pgMigrations); v++ {
			if _, err := tx.Exec(ctx, pgMigrations[v]); err != nil {
				return fmt.Errorf("schema version %d: %w", v+1, err)
			}
		}
		_, err = tx.Exec(ctx, `update authsvc_schema set version = $1`, len(pgMigrations))
		return err
	})
}
