package postgres

import (
	"context"
	"slices"
	"strings"
	"testing"

	"authsvc/internal/users"
)

// TestPGEmailIndexMigration: a database of schema version 10, the one
// before the index of email addresses, is migrated on open; a look-up by
// address then reads that index, not every row, and a database migrated
// past what this authsvc knows is refused with one line.
func TestPGEmailIndexMigration(t *testing.T) {
	db, conn := databaseAt(t, 10)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `update authsvc_users set email = 'Alice@Example.com' where username = 'alice'`); err != nil {
		t.Fatal(err)
	}
	d := openPG(t, db, 10)
	if v := schemaVersion(t, conn); v != len(pgMigrations) {
		t.Fatalf("schema version after Open = %d; want %d", v, len(pgMigrations))
	}
	found, err := d.LookupKey(ctx, users.EmailKey("alice@EXAMPLE.com"))
	if err != nil || len(found) != 1 || found[0].Account.Username() != "alice" {
		t.Fatalf("LookupKey(alice@EXAMPLE.com) after the migration = %v, %v; want alice", found, err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `set local enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `explain select username from authsvc_users where `+pgLowerEmail+` = $1`, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if rows.Err() != nil || !slices.ContainsFunc(plan, func(l string) bool { return strings.Contains(l, "authsvc_users_email") }) {
		t.Errorf("plan of a look-up by address = %q, %v; want one that reads authsvc_users_email", plan, rows.Err())
	}
	tx.Rollback(ctx)

	if _, err := conn.Exec(ctx, `update authsvc_schema set version = $1`, len(pgMigrations)+1); err != nil {
		t.Fatal(err)
	}
	if d, err := Open(ctx, db, 10, nil); err == nil || !strings.Contains(err.Error(), "newer than this authsvc knows") {
		if d != nil {
			d.Close()
		}
		t.Errorf("Open of a database one schema version ahead = %v; want refused: newer than this authsvc knows", err)
	}
}
