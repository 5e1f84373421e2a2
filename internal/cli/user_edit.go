package cli

import (
	"context"
	"errors"
	"flag"

	"authsvc/internal/users"
)

// userEditAbout is user edit's --help.
const userEditAbout = `Changes a user's profile: only what a flag is given for changes.
--group replaces the user's groups with those given; --no-groups removes
every one. --admin=false makes an admin a user again, ending their
personal access tokens with the admin scope. user disable and user
enable change whether the user may log in.`

// userEdit runs "authsvc user edit USERNAME": it changes a user's profile
// through users.Edit, as the admin API's PATCH does.
func userEdit(ctx context.Context, e *env, args []string) error {
	f := newUserFlags("user edit", "USERNAME", userEditAbout)
	name := f.String("name", "", "the user's full `NAME`; \"\" removes it")
	email := f.String("email", "", "the user's email `ADDRESS`; \"\" removes it")
	var groups stringList
	f.Var(&groups, "group", "a `GROUP` of the user, in place of their groups; repeatable")
	noGroups := f.Bool("no-groups", false, "remove the user from every group")
	admin := f.Bool("admin", false, "make the user an admin; --admin=false, no longer one")
	var c users.Change
	f.checks = append(f.checks, func() (err error) {
		c, err = editChange(f.FlagSet, *name, *email, groups, *noGroups, *admin)
		return err
	})
	return f.withUser(ctx, e, args, func(dir users.Directory, username string) error {
		_, err := users.Edit(ctx, dir, username, c)
		if errors.Is(err, users.ErrInvalid) {
			return usagef("user edit: %v", err) // checked already; the rules are the users package's
		}
		return userChanged(err, dir, f.Name(), username, "edited", e.stdout)
	})
}

// editChange returns the change the flags of user edit set in fs ask
// for, given their values: a field no flag was given for is left as it
// is. No change at all, --group beside --no-groups, or a profile the
// rules refuse is a usage error.
func editChange(fs *flag.FlagSet, name, email string, groups []string, noGroups, admin bool) (users.Change, error) {
	var c users.Change
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "name":
			c.Name = &name
		case "email":
			c.Email = &email
		case "group":
			c.Groups = &groups
		case "admin":
			c.Admin = &admin
		}
	})
	switch {
	case noGroups && c.Groups != nil:
		return c, usagef("user edit: --group and --no-groups do not go together")
	case noGroups:
		c.Groups = &[]string{}
	case c.Name == nil && c.Email == nil && c.Groups == nil && c.Admin == nil:
		return c, usagef("user edit: nothing to change; give --name, --email, --group, --no-groups or --admin")
	}
	// Only what is given is checked here; what is kept passed these
	// rules when it was set, and users.Edit checks the whole again.
	if err := users.CheckProfile(name, email, groups); err != nil {
		return c, usagef("user edit: %v", err)
	}
	return c, nil
}
