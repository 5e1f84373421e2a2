package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/secret"
	"authsvc/internal/testservers"
	"authsvc/internal/users"
	"authsvc/internal/users/userstest"
)

// stored returns the user named name as d's List has them.
func stored(t testing.TB, d users.Directory, name string) users.User {
	t.Helper()
	list, err := d.List(context.Background())
	if err != nil {
		t.Fatalf("List() = %v", err)
	}
	for _, u := range list {
		if u.Username == name {
			return u
		}
	}
	t.Fatalf("List() has no %s", name)
	return users.User{}
}

// linkDigest returns the digest a record keeps of a reset token as a
// link carries it.
func linkDigest(t testing.TB, token string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatalf("reset token %d characters: not base64url: %v", len(token), err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// resetLinkIsNull reports whether the column of the user named name is
// SQL NULL (not JSON null), as a user without a link is written.
func resetLinkIsNull(t testing.TB, d *Directory, name string) bool {
	t.Helper()
	var null bool
	if err := d.pool.QueryRow(context.Background(), `select reset_link is null from authsvc_users where username = $1`, name).Scan(&null); err != nil {
		t.Fatal(err)
	}
	return null
}

// newLink makes a reset link for username through d, live for ttl from
// at, and returns its token.
func newLink(t testing.TB, d users.Directory, username string, ttl time.Duration, at time.Time) string {
	t.Helper()
	uid, token, err := users.NewResetLink(context.Background(), d, username, ttl, at)
	if err != nil {
		t.Fatalf("NewResetLink(%s) = %v", username, err)
	}
	if got, err := users.ParseResetUID(uid); err != nil || got != username {
		t.Fatalf("ParseResetUID(NewResetLink(%s)'s uid) = %q, %v; want %q", username, got, err, username)
	}
	return token
}

// TestPGResetLinkTwoInstances: a link made on one instance is stored as
// its digest and expiry, and confirmed on another: the password is the
// new one, the link spent (a second confirm, on either, is refused), the
// personal access tokens gone, the lockout lifted, the second factors
// kept.
func TestPGResetLinkTwoInstances(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	alice := users.User{Username: "alice", PasswordHash: passwordtest.MustHash(t, "old-pw", passwordtest.Cost), Groups: []string{},
		MFA: userstest.SealedFactors(t, "alice", key, secret.Key{}, key)}
	if err := a.Add(ctx, alice); err != nil {
		t.Fatal(err)
	}
	pat, _ := createPAT(t, a, "alice", "ci")
	before := stored(t, b, "alice")

	made := time.Now()
	token := newLink(t, a, "alice", users.DefaultResetTTL, made)
	got := stored(t, b, "alice")
	if got.ResetLink == nil || got.ResetLink.Digest != linkDigest(t, token) || !got.ResetLink.ExpiresAt.Equal(made.Add(users.DefaultResetTTL)) {
		t.Fatalf("b's record of alice's link = %+v; want the token's SHA-256 and expiry %v", got.ResetLink, made.Add(users.DefaultResetTTL))
	}
	var leaks int
	if err := a.pool.QueryRow(ctx, `select count(*) from authsvc_users u where strpos(row_to_json(u)::text, $1) > 0`, token).Scan(&leaks); err != nil || leaks != 0 {
		t.Errorf("rows holding the reset token itself = %d, %v; want 0 (only its digest is stored)", leaks, err)
	}

	newHash := passwordtest.MustHash(t, "new-pw", passwordtest.Cost)
	confirmed := time.Now()
	if err := users.ConfirmReset(ctx, b, "alice", token, newHash, confirmed); err != nil {
		t.Fatalf("ConfirmReset on b of a's link = %v; want nil", err)
	}
	got = stored(t, a, "alice")
	if got.PasswordHash != newHash || got.PasswordGeneration != before.PasswordGeneration+1 {
		t.Errorf("alice after the reset: new password %v, generation %d; want true, %d", got.PasswordHash == newHash, got.PasswordGeneration, before.PasswordGeneration+1)
	}
	if got.ResetLink != nil || !resetLinkIsNull(t, a, "alice") {
		t.Errorf("alice's link after the reset = %+v; want none (SQL NULL)", got.ResetLink)
	}
	if len(got.AccessTokens) != 0 {
		t.Errorf("alice's personal access tokens after the reset = %d; want none", len(got.AccessTokens))
	}
	if _, _, err := users.RecheckAccessToken(ctx, a, pat); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("RecheckAccessToken(alice's token) after the reset = %v; want users.ErrNotFound", err)
	}
	if want := *pgTime(confirmed); !got.FailuresAfter.Equal(want) {
		t.Errorf("alice's FailuresAfter after the reset = %v; want %v (the lockout lifted)", got.FailuresAfter, want)
	}
	if got.TokensAfter.Before(confirmed.Truncate(time.Millisecond)) {
		t.Errorf("alice's TokensAfter after the reset = %v; want no earlier than %v", got.TokensAfter, confirmed)
	}
	if !sameJSON(got.MFA, alice.MFA) {
		t.Errorf("alice's second factors after the reset changed; want them kept")
	}

	for name, d := range map[string]*Directory{"a": a, "b": b} {
		if err := users.ConfirmReset(ctx, d, "alice", token, passwordtest.MustHash(t, "third-pw", passwordtest.Cost), time.Now()); !errors.Is(err, users.ErrBadResetLink) {
			t.Errorf("a second ConfirmReset on %s = %v; want users.ErrBadResetLink", name, err)
		}
	}
	if again := stored(t, b, "alice"); again.PasswordHash != newHash || again.PasswordGeneration != got.PasswordGeneration {
		t.Errorf("alice after the refused confirms: password kept %v, generation %d; want true, %d", again.PasswordHash == newHash, again.PasswordGeneration, got.PasswordGeneration)
	}
}

// TestPGResetLinkDeadLinks: a link is refused, with nothing written, once
// a newer one is made, once the password is set (users.SetPassword), at
// and after its expiry (to the nanosecond), and when its user is
// disabled or unknown; a disabled user gets no link at all.
func TestPGResetLinkDeadLinks(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	d := openPG(t, testservers.NewDatabase(t, url), 100)
	ctx := context.Background()
	for _, name := range []string{"alice", "bob", "carol", "dave"} {
		addUser(t, d, name)
	}
	// refused confirms token for username at now, and checks that the
	// user's password and link are as they were.
	refused := func(what, username, token string, now time.Time) {
		t.Helper()
		was := stored(t, d, username)
		err := users.ConfirmReset(ctx, d, username, token, passwordtest.MustHash(t, "other-pw", passwordtest.Cost), now)
		if !errors.Is(err, users.ErrBadResetLink) {
			t.Errorf("ConfirmReset(%s) = %v; want users.ErrBadResetLink", what, err)
		}
		if is := stored(t, d, username); is.PasswordHash != was.PasswordHash || !sameJSON(is.ResetLink, was.ResetLink) {
			t.Errorf("after ConfirmReset(%s): password kept %v, link %+v; want both as they were (%+v)", what, is.PasswordHash == was.PasswordHash, is.ResetLink, was.ResetLink)
		}
	}
	hash := passwordtest.MustHash(t, "new-pw", passwordtest.Cost)

	older := newLink(t, d, "alice", time.Hour, time.Now())
	newer := newLink(t, d, "alice", time.Hour, time.Now())
	refused("alice's older link", "alice", older, time.Now())
	if err := users.ConfirmReset(ctx, d, "alice", newer, hash, time.Now()); err != nil {
		t.Errorf("ConfirmReset(alice's newer link) = %v; want nil", err)
	}

	token := newLink(t, d, "bob", time.Hour, time.Now())
	if err := users.SetPassword(ctx, d, "bob", hash); err != nil {
		t.Fatal(err)
	}
	if u := stored(t, d, "bob"); u.ResetLink != nil || !resetLinkIsNull(t, d, "bob") {
		t.Errorf("bob's link after SetPassword = %+v; want none", u.ResetLink)
	}
	refused("bob's link after SetPassword", "bob", token, time.Now())

	made := time.Now()
	token = newLink(t, d, "carol", time.Minute, made)
	refused("carol's link at its expiry", "carol", token, made.Add(time.Minute))
	refused("carol's link after its expiry", "carol", token, made.Add(time.Hour))
	if err := users.ConfirmReset(ctx, d, "carol", token, hash, made.Add(time.Minute-time.Nanosecond)); err != nil {
		t.Errorf("ConfirmReset(carol's link a nanosecond before its expiry) = %v; want nil", err)
	}

	token = newLink(t, d, "dave", time.Hour, time.Now())
	if err := users.Disable(ctx, d, "dave"); err != nil {
		t.Fatal(err)
	}
	refused("disabled dave's link", "dave", token, time.Now())
	if _, _, err := users.NewResetLink(ctx, d, "dave", time.Hour, time.Now()); !errors.Is(err, users.ErrDisabled) {
		t.Errorf("NewResetLink(disabled dave) = %v; want users.ErrDisabled", err)
	}
	if u := stored(t, d, "dave"); u.ResetLink != nil {
		t.Errorf("dave's link after the disable and the refused NewResetLink = %+v; want none: a disable ends it, a refusal writes none", u.ResetLink)
	}
	if _, _, err := users.NewResetLink(ctx, d, "nobody", time.Hour, time.Now()); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("NewResetLink(nobody) = %v; want users.ErrNotFound", err)
	}
	if err := users.ConfirmReset(ctx, d, "nobody", token, hash, time.Now()); !errors.Is(err, users.ErrBadResetLink) {
		t.Errorf("ConfirmReset(nobody) = %v; want users.ErrBadResetLink", err)
	}
}

// TestPGResetLinkWrites: every write stores the link it is given, to the
// nanosecond, as a second instance reads it: Bootstrap, Add, AddAll, and
// Update setting, replacing and clearing it (SQL NULL); a malformed link
// is refused with nothing written.
func TestPGResetLinkWrites(t *testing.T) {
	t.Parallel()
	url := testservers.SharedPostgres(t)
	db := testservers.NewDatabase(t, url)
	a, b := openPG(t, db, 100), openPG(t, db, 100)
	ctx := context.Background()
	link := func(fill byte, expires time.Time) *users.ResetLink {
		return &users.ResetLink{Digest: strings.Repeat(hex.EncodeToString([]byte{fill}), sha256.Size), ExpiresAt: expires}
	}
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)
	user := func(name string, l *users.ResetLink) users.User {
		return users.User{Username: name, PasswordHash: passwordtest.MustHash(t, name+"-pw", passwordtest.Cost), Groups: []string{}, ResetLink: l}
	}
	want := map[string]*users.ResetLink{"root": link(1, at), "bob": link(2, at.Add(time.Nanosecond)), "carol": link(3, at), "dave": nil}
	if ok, err := a.Bootstrap(ctx, user("root", want["root"])); !ok || err != nil {
		t.Fatalf("Bootstrap(root) = %v, %v; want true, nil", ok, err)
	}
	if err := a.Add(ctx, user("bob", want["bob"])); err != nil {
		t.Fatal(err)
	}
	if existing, err := a.AddAll(ctx, []users.User{user("carol", want["carol"]), user("dave", nil)}); err != nil || len(existing) != 0 {
		t.Fatalf("AddAll(carol, dave) = %v, %v; want none existing", existing, err)
	}
	check := func(when string) {
		t.Helper()
		for name, l := range want {
			if got := stored(t, b, name).ResetLink; !sameJSON(got, l) || (l != nil && !got.ExpiresAt.Equal(l.ExpiresAt)) {
				t.Errorf("%s: %s's link = %+v; want %+v", when, name, got, l)
			}
			if null := resetLinkIsNull(t, b, name); null != (l == nil) {
				t.Errorf("%s: %s's reset_link is NULL = %v; want %v", when, name, null, l == nil)
			}
		}
	}
	check("after the additions")

	set := func(name string, l *users.ResetLink) error {
		return a.Update(ctx, name, func(u *users.User) error { u.ResetLink = l; return nil })
	}
	for _, step := range []struct {
		name string
		link *users.ResetLink
	}{{"dave", link(4, at)}, {"bob", link(5, at.Add(time.Hour))}, {"carol", nil}} {
		if err := set(step.name, step.link); err != nil {
			t.Fatalf("Update(%s's link to %+v) = %v", step.name, step.link, err)
		}
		want[step.name] = step.link
	}
	check("after Update set, replaced and cleared links")

	bad := map[string]*users.ResetLink{
		"a short digest":   {Digest: "abcd", ExpiresAt: at},
		"a digest not hex": {Digest: strings.Repeat("zz", sha256.Size), ExpiresAt: at},
		"no expiry":        link(6, time.Time{}),
	}
	for what, l := range bad {
		if err := a.Add(ctx, user("erin", l)); err == nil || !strings.Contains(err.Error(), "reset_link") {
			t.Errorf("Add(erin with %s) = %v; want a reset_link error", what, err)
		}
		if err := set("bob", l); err == nil || !strings.Contains(err.Error(), "reset_link") {
			t.Errorf("Update(bob's link to %s) = %v; want a reset_link error", what, err)
		}
	}
	if list, err := b.List(ctx); err != nil || len(list) != len(want) {
		t.Errorf("List() after the refused writes = %d users, %v; want %d", len(list), err, len(want))
	}
	check("after the refused writes")
}

// TestPGResetLinkMigration: a database of schema version 7, the one
// before reset links, with a user, is migrated on open: the user stays,
// without a link, and a link made on one instance is confirmed on
// another.
func TestPGResetLinkMigration(t *testing.T) {
	t.Parallel()
	db, conn := databaseAt(t, 7)
	a, b := openPG(t, db, 10), openPG(t, db, 10)
	if v := schemaVersion(t, conn); v != len(pgMigrations) {
		t.Fatalf("schema version after Open = %d; want %d", v, len(pgMigrations))
	}
	if got := stored(t, a, "alice"); got.Name != "Alice" || got.ResetLink != nil || a.Len() != 1 {
		t.Fatalf("alice after the migration: name %q, link %+v, %d users; want Alice, none, 1", got.Name, got.ResetLink, a.Len())
	}
	token := newLink(t, a, "alice", time.Hour, time.Now())
	hash := passwordtest.MustHash(t, "new-pw", passwordtest.Cost)
	if err := users.ConfirmReset(context.Background(), b, "alice", token, hash, time.Now()); err != nil {
		t.Errorf("ConfirmReset on b after the migration = %v; want nil", err)
	}
	if got := stored(t, a, "alice"); got.PasswordHash != hash || got.Name != "Alice" {
		t.Errorf("alice after the reset: new password %v, name %q; want true, Alice", got.PasswordHash == hash, got.Name)
	}
}

// TestPGCodesAndMailsMigration: a database of schema version 9, the one
// before codes_after and reset_mails, whose user has a link that an older
// version mailed three times this hour and a lockout lifted, is migrated
// on open: the user has no code unlock (a confirm moved failures_after
// too, so it is not copied) and the link's mails still count, on another
// instance too.
func TestPGCodesAndMailsMigration(t *testing.T) {
	t.Parallel()
	db, conn := databaseAt(t, 9)
	now := time.Now().UTC().Truncate(time.Microsecond)
	old := `{"digest":"` + strings.Repeat("ab", 32) + `","expires_at":"` + now.Add(time.Hour).Format(time.RFC3339Nano) + `","mailed":["` +
		now.Add(-3*time.Minute).Format(time.RFC3339Nano) + `","` + now.Add(-2*time.Minute).Format(time.RFC3339Nano) + `","` +
		now.Add(-time.Minute).Format(time.RFC3339Nano) + `"]}`
	if _, err := conn.Exec(context.Background(), `update authsvc_users set reset_link = $1, failures_after = $2 where username = 'alice'`, old, now); err != nil {
		t.Fatal(err)
	}
	a, b := openPG(t, db, 10), openPG(t, db, 10)
	if v := schemaVersion(t, conn); v != len(pgMigrations) {
		t.Fatalf("schema version after Open = %d; want %d", v, len(pgMigrations))
	}
	got := stored(t, a, "alice")
	if !got.CodesAfter.IsZero() || got.ResetMails != nil || !got.FailuresAfter.Equal(now) || got.ResetLink == nil || len(got.ResetLink.Mailed) != 3 {
		t.Fatalf("alice after the migration: codes_after %v, reset_mails %v, failures_after %v, link %+v; want zero, none, %v, the old link",
			got.CodesAfter, got.ResetMails, got.FailuresAfter, got.ResetLink, now)
	}
	if err := a.Update(context.Background(), "alice", func(u *users.User) error { u.Email = "alice@example.com"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := users.NewMailedResetLink(context.Background(), b, "alice", time.Hour, now); !errors.Is(err, users.ErrResetMailLimit) {
		t.Errorf("NewMailedResetLink on b after the migration = %v; want ErrResetMailLimit: the older version's mails count", err)
	}
	if _, _, err := users.NewMailedResetLink(context.Background(), a, "alice", time.Hour, now.Add(time.Hour)); err != nil {
		t.Fatalf("NewMailedResetLink an hour later = %v; want nil", err)
	}
	if got := stored(t, b, "alice"); len(got.ResetMails) != 1 || !got.ResetMails[0].Equal(now.Add(time.Hour)) || got.ResetLink == nil || got.ResetLink.Mailed != nil {
		t.Errorf("alice after a new mail: reset_mails %v, link %+v; want [%v] in reset_mails, none in the link", got.ResetMails, got.ResetLink, now.Add(time.Hour))
	}
}

// TestPGResetRequestRecordsNoChange: a mailed reset link, what an
// anonymous reset request makes, is kept in the row without a change
// record: the generation stays, so no other instance drops its cache or
// counts a reload for it (API.md: no metric tells whether a user exists).
// The other instance still confirms the link, and the hourly mail count
// still holds.
func TestPGResetRequestRecordsNoChange(t *testing.T) {
	t.Parallel()
	a, b := twoInstances(t)
	ctx := context.Background()
	alice := users.User{Username: "alice", Email: "alice@example.com", PasswordHash: passwordtest.MustHash(t, "old-pw", passwordtest.Cost), Groups: []string{}}
	if err := a.Add(ctx, alice); err != nil {
		t.Fatal(err)
	}
	generation := func() int64 {
		var gen int64
		if err := a.pool.QueryRow(ctx, `select generation from authsvc_users_state`).Scan(&gen); err != nil {
			t.Fatal(err)
		}
		return gen
	}
	before := generation()
	now := time.Now()
	var token string
	for i := range users.MaxResetMails {
		var err error
		if _, token, err = users.NewMailedResetLink(ctx, a, "alice", time.Hour, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatalf("NewMailedResetLink %d = %v; want nil", i+1, err)
		}
	}
	if got := generation(); got != before {
		t.Errorf("generation after %d mailed links = %d; want %d: a reset request records no change", users.MaxResetMails, got, before)
	}
	if _, _, err := users.NewMailedResetLink(ctx, a, "alice", time.Hour, now.Add(time.Minute)); !errors.Is(err, users.ErrResetMailLimit) {
		t.Errorf("NewMailedResetLink %d within the hour = %v; want ErrResetMailLimit", users.MaxResetMails+1, err)
	}
	if _, _, err := users.NewMailedResetLink(ctx, a, "nobody", time.Hour, now); !errors.Is(err, users.ErrNotFound) {
		t.Errorf("NewMailedResetLink(nobody) = %v; want ErrNotFound", err)
	}
	if err := users.ConfirmReset(ctx, b, "alice", token, passwordtest.MustHash(t, "new-pw", passwordtest.Cost), time.Now()); err != nil {
		t.Errorf("ConfirmReset on b of the last link mailed on a = %v; want nil", err)
	}
}
