package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/users"
)

// tokenCreateAbout is token create's --help.
const tokenCreateAbout = `Creates a personal access token of USERNAME and prints it on stdout, alone
on one line, this once: only its SHA-256 is kept, and no command shows it
again. No password is asked (for service accounts); the user must be
enabled. One line on stderr gives the token's id (for token revoke), its
scopes and when it expires.

Scopes: info (GET /api/auth/info), introspect (POST /api/auth/introspect/)
and admin (the admin API; only an admin user's token may have it).`

// patFlags are token create's flags but --users: the token asked for.
type patFlags struct {
	name    *string
	scopes  stringList
	expires *string
	maxTTL  shortDurationFlag

	// Set by the flags' check, before the directory is opened.
	createdAt, expiresAt time.Time
}

// tokenCreate runs "authsvc token create USERNAME": it adds a personal
// access token to the user and prints it, this once.
func tokenCreate(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("token create", "USERNAME", tokenCreateAbout)
	p := newPATFlags(f)
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		tok, t := users.MintAccessToken(*p.name, p.scopes, p.createdAt, p.expiresAt)
		if err := users.CreateAccessToken(ctx, dir, username, t); err != nil {
			return tokenCreateError(username, err)
		}
		fmt.Fprintln(e.stdout, tok)
		fmt.Fprintf(e.stderr, "created personal access token %s (%q) of user %q in %s: scopes %s; expires %s\n",
			t.ID, t.Name, username, dir, strings.Join(t.Scopes, ","), t.ExpiresAt.Format(time.RFC3339))
		return nil
	})
}

// newPATFlags adds token create's flags to f, and their check.
func newPATFlags(f *userFlags) *patFlags {
	p := &patFlags{maxTTL: shortDurationFlag(httpapi.DefaultPATMaxTTL)}
	p.name = f.String("name", "", "the token's `NAME`, unique among the user's live tokens (required)")
	f.Var(&p.scopes, "scope", "a `SCOPE` of the token: info, introspect or admin; repeatable (default info)")
	p.expires = f.String("expires", "", "when the token expires: a `DURATION` from now (720h) or an RFC 3339 time (2027-03-01T00:00:00Z) (default 720h, or --pat-max-ttl when shorter)")
	f.Var(&p.maxTTL, "pat-max-ttl", "the longest `DURATION` a token may live, as serve's")
	f.fromEnv = append(f.fromEnv, "pat-max-ttl")
	f.checks = append(f.checks, p.check)
	return p
}

// check checks the flags, and sets when the token is made and expires.
func (p *patFlags) check() error {
	if err := users.CheckAccessTokenName(*p.name); err != nil {
		return usagef("token create: --name: %v", err)
	}
	if p.scopes == nil {
		p.scopes = stringList{users.ScopeInfo}
	}
	if err := users.CheckScopes(p.scopes); err != nil {
		return usagef("token create: --scope: %v", err)
	}
	if p.maxTTL <= 0 {
		return usagef("token create: --pat-max-ttl %s: want a duration above 0; a token always expires", p.maxTTL.String())
	}
	p.createdAt = time.Now().UTC()
	at, err := p.expiry(p.createdAt)
	p.expiresAt = at
	return err
}

// expiry returns when a token made at now expires, as --expires says:
// a duration from now, or an RFC 3339 time. As POST /api/auth/tokens/
// does, it keeps whole seconds.
func (p *patFlags) expiry(now time.Time) (time.Time, error) {
	maxTTL := time.Duration(p.maxTTL)
	at := now.Add(min(users.DefaultAccessTokenTTL, maxTTL))
	if *p.expires != "" {
		if d, err := time.ParseDuration(*p.expires); err == nil {
			at = now.Add(d)
		} else if at, err = time.Parse(time.RFC3339, *p.expires); err != nil {
			return time.Time{}, usagef("token create: --expires %q: want a duration such as 720h or an RFC 3339 time such as 2027-03-01T00:00:00Z", *p.expires)
		}
	}
	at = at.UTC().Truncate(time.Second)
	switch {
	case !at.After(now):
		return time.Time{}, usagef("token create: --expires %q: not in the future", *p.expires)
	case at.Sub(now) > maxTTL:
		return time.Time{}, usagef("token create: --expires %q: more than --pat-max-ttl %s from now", *p.expires, p.maxTTL.String())
	}
	return at, nil
}

// tokenCreateError words an error of CreateAccessToken in one line.
func tokenCreateError(username string, err error) error {
	switch {
	case errors.Is(err, users.ErrAccessTokenName):
		return fmt.Errorf("token create: user %q has a live personal access token of that name", username)
	case errors.Is(err, users.ErrDisabled):
		return fmt.Errorf("token create: user %q is disabled", username)
	case errors.Is(err, users.ErrAdminScope):
		return fmt.Errorf("token create: scope admin: %q is not an admin", username)
	case errors.Is(err, users.ErrTooManyAccessTokens):
		return fmt.Errorf("token create: user %q: %v", username, err)
	}
	return userError("token create", username, err)
}

// A shortDurationFlag is a duration flag whose default --help shows as a
// person writes it: 8784h, not 8784h0m0s.
type shortDurationFlag time.Duration

func (d *shortDurationFlag) String() string { return shortDuration(time.Duration(*d)) }
func (d *shortDurationFlag) Get() any       { return time.Duration(*d) }

func (d *shortDurationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	*d = shortDurationFlag(v)
	return err
}
