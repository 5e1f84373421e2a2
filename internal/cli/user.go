package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"authsvc/internal/buildinfo"
	"authsvc/internal/password"
	"authsvc/internal/tokens/redisstore"
	"authsvc/internal/users"
	"authsvc/internal/users/postgres"

	"golang.org/x/term"
)

// minSafeCost is the lowest bcrypt cost used without a warning.
const minSafeCost = 10

// passwordsHelp is what the commands that take a new password say of it.
const passwordsHelp = `The password is read from stdin: on a terminal, without echo and twice;
otherwise the first line. It is never a flag. New hashes are argon2id
(m=19 MiB, t=2, p=1) unless --hash bcrypt or --cost C (bcrypt at cost C).
A new password needs --password-min-length characters or more, and must
not be the username or a common password.`

// A userSubcommand is one of authsvc user's subcommands, for its --help,
// the user command's and authsvc's.
type userSubcommand struct {
	name    string
	args    string // what follows the flags in its synopsis
	summary string // one line for the lists of commands
	about   string // what its --help says of it
}

// userSubcommands are the user commands, in the order help lists them.
var userSubcommands = []userSubcommand{
	{"add", "USERNAME", "add a user", "Adds a user, with the password read from stdin."},
	{"passwd", "USERNAME", "set a user's password", "Sets a user's password, read from stdin, and ends every token of the user."},
	{"del", "USERNAME", "delete a user", "Deletes a user; their tokens die with them."},
	{"disable", "USERNAME", "disable a user, ending their tokens", "Disables a user: no login, and every token of the user ends."},
	{"enable", "USERNAME", "enable a disabled user", "Enables a disabled user. Tokens ended by the disable stay dead."},
	{"logout", "USERNAME", "end every token of a user", "Ends every token of a user, on every server reading the same users."},
	{"unlock", "USERNAME", "lift the login throttle's lockout of a user", `Lifts the login throttle's lockout of a user: the failed logins of that
user recorded before now no longer count, per user and per (user, client),
on every server reading the same users (within 5 s); nor do the wrong
second-factor codes that, at 100 in a row, refuse every second step of the
user until this command. A client address's own limit over all usernames
is left as it is.`},
	{"reset-mfa", "USERNAME", "remove a user's second factors, ending their tokens", `Removes a user's second factors: the authenticator, an enrolment not yet
confirmed and the recovery codes; and ends every token of the user, as
user passwd does, on every server reading the same users (within 5 s).
The user then logs in with the password alone, and may enrol again. A
user without any prints so and is left as it was.`},
	{"list", "", "list the users, without their hashes", `Lists the users, without their hashes. MFA is the user's second factor:
totp (an authenticator), codes(N) (N unused recovery codes), both as
totp+codes(N), or - for none (an enrolment not yet confirmed is none).`},
	{"import", "DUMP.json|USERS.json", "add the users of a Django dumpdata file or a users file", `Adds the users of a Django dumpdata file (--from django) or of an authsvc
users file (--from file, to move it into PostgreSQL). Users whose names are
taken are left alone, or with --update brought up to date with the dump.
A dump's DRF keys go to the token store --store names, and keep working as
tokens, never expiring unless --token-ttl says so; its confirmed
django-otp devices become the users' authenticators and recovery codes,
sealed and hashed under --secret-key-file's key. The keys and devices of
a Django user left out are left out with it. A users file's second
factors are copied only when --secret-key-file's key, the one serve is
given over --users, opens them; otherwise nothing is written. One summary
line counts what was done; every record left out is reported on stderr,
and the command then exits 1. See the README's "Moving from Django REST
Framework".`},
	{"check", "", "validate the users file or database", `Validates the users file or database as the server would load it: exit 0
or 1. Second factors that the secret key serve is given cannot open
(--secret-key-file, and --old-secret-key-file during a rotation), or that
no key file is there for, fail it with the line serve would stop with. It
writes nothing, and never creates a key file.`},
	{"rekey", "", "re-seal the authenticator secrets under a new secret key", rekeyAbout},
}

// userHelp is authsvc user --help.
func userHelp() string {
	var b strings.Builder
	b.WriteString("usage: authsvc user SUBCOMMAND [flags] [arguments]\n\nManages the users in the users file or database that --users names.\n\nsubcommands:\n")
	width := 0
	for _, c := range userSubcommands {
		width = max(width, len(c.name))
	}
	for _, c := range userSubcommands {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.name, c.summary)
	}
	b.WriteString("\nRun 'authsvc user SUBCOMMAND --help' for its flags.\n")
	return b.String()
}

// userCommand runs "authsvc user SUBCOMMAND ...": each subcommand has its
// own flags and its own --help.
func userCommand(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	var names []string
	for _, c := range userSubcommands {
		names = append(names, c.name)
	}
	if len(args) == 0 {
		return usagef("user: missing subcommand (%s)", strings.Join(names, ", "))
	}
	sub, args := args[0], args[1:]
	if isHelp(sub) {
		fmt.Fprint(stdout, userHelp())
		return nil
	}
	i := slices.IndexFunc(userSubcommands, func(c userSubcommand) bool { return c.name == sub })
	if i < 0 {
		return usagef("user: unknown subcommand %q (%s)", sub, strings.Join(names, ", "))
	}
	defer func() { err = inCommand("user "+sub, err) }()
	h := help{synopsis: "authsvc user " + sub + " [flags]", about: userSubcommands[i].about}
	if a := userSubcommands[i].args; a != "" {
		h.synopsis += " " + a
	}
	fs := flag.NewFlagSet("user "+sub, flag.ContinueOnError)
	usersPath := fs.String("users", defaultUsersPath, "the users `FILE`, or a postgres:// URL")
	fromEnv := []string{"users"}
	var (
		admin       *bool
		name, email *string
		groups      stringList
		hashing     hashFlags
		minLength   *int
		from        *string
		dryRun      *bool
		update      *bool
		keyPath     *string
		store       *string
		storePrefix *string
		tokenTTL    *time.Duration
		oldKeyPaths stringList
	)
	switch sub {
	case "add":
		admin = fs.Bool("admin", false, "make the user an admin")
		name = fs.String("name", "", "the user's full `NAME`")
		email = fs.String("email", "", "the user's email `ADDRESS`")
		fs.Var(&groups, "group", "a `GROUP` of the user; repeatable")
	case "import":
		from = fs.String("from", "", "what `KIND` of file to import: django (a dumpdata file) or file (a users file)")
		dryRun = fs.Bool("dry-run", false, "write nothing: print what the import would do, and exit as it would")
		update = fs.Bool("update", false, "bring users that exist already up to date with the dump (--from django): profile, flags, second factors and a hash changed in Django")
		keyPath = fs.String("secret-key-file", "", "the secret key `FILE` serve is given over --users: --from django fingerprints Django hashes and seals their second factors under it (created when missing; required with PostgreSQL); --from file copies second factors only when it opens them (never created); default authsvc.key beside a users file")
		store = fs.String("store", "memory", "the token `STORE` the dump's DRF keys go to, as serve's: "+storeForms+" (memory cannot keep them past the import: they are reported skipped)")
		storePrefix = fs.String("store-prefix", redisstore.DefaultPrefix, "key `PREFIX` in a shared Redis, as serve's")
		// Not from AUTHSVC_TOKEN_TTL: that is serve's lifetime of its own
		// tokens, and DRF keys never expire unless the import says so.
		tokenTTL = fs.Duration("token-ttl", 0, "imported DRF keys expire this `DURATION` after the latest import that lists them; 0 = never, as DRF's keys (not read from AUTHSVC_TOKEN_TTL, which is serve's)")
		fromEnv = append(fromEnv, "store", "store-prefix", "secret-key-file")
	case "check":
		keyPath = fs.String("secret-key-file", "", "the secret key `FILE` serve is given, checked to open every second factor; default authsvc.key beside a users file, none with PostgreSQL; never created")
		fs.Var(&oldKeyPaths, "old-secret-key-file", "a key `FILE` serve is given with --old-secret-key-file; repeatable")
		fromEnv = append(fromEnv, "secret-key-file", "old-secret-key-file")
	case "rekey":
		keyPath = fs.String("secret-key-file", "", "the new secret key `FILE`, which the secrets are sealed under from now; required")
		fs.Var(&oldKeyPaths, "old-secret-key-file", "a secret key `FILE` the secrets may be sealed under now, such as the one being replaced; repeatable")
		dryRun = fs.Bool("dry-run", false, "write nothing, the new key file included: print what the rekey would do, and exit as it would")
	}
	if sub == "add" || sub == "passwd" {
		hashing.define(fs)
		minLength = fs.Int("password-min-length", password.DefaultMinLength, "the shortest new password, in `N` characters")
		fromEnv = append(fromEnv, "password-min-length")
		h.about += "\n\n" + passwordsHelp
	}
	if err := parseFlags(fs, h, args, getenv, fromEnv, stdout); err != nil {
		return err
	}
	if minLength != nil && (*minLength < 1 || *minLength > password.MaxLen) {
		return usagef("user %s: --password-min-length %d: want 1 to %d", sub, *minLength, password.MaxLen)
	}
	if sub == "rekey" {
		// Checked before the directory is opened: a usage error connects to nothing.
		if fs.NArg() != 0 {
			return usagef("user rekey: unexpected argument %q", fs.Arg(0))
		}
		if *keyPath == "" {
			return usagef("user rekey: --secret-key-file is required: the FILE of the new secret key")
		}
	}
	if sub == "import" {
		// Checked before the directory is opened, as rekey's flags are.
		const kinds = "want --from django (a Django dumpdata file) or --from file (a users file)"
		switch *from {
		case "django", "file":
		case "":
			return usagef("user import: --from is missing: %s", kinds)
		default:
			return usagef("user import: --from %q: %s", *from, kinds)
		}
	}
	ctx := context.Background()
	dryRunning := dryRun != nil && *dryRun
	dir, done, err := openCLIDirectory(ctx, *usersPath, sub == "list" || sub == "check" || dryRunning)
	var target importTarget = dir
	if dryRunning && sub == "import" && errors.Is(err, postgres.ErrNoSchema) {
		// A database no authsvc has set up holds no users; the dry run
		// must not set it up either.
		target, done, err = noUsersYet{name: postgres.Name(*usersPath)}, func() {}, nil
	}
	if err != nil {
		return err
	}
	defer done()
	switch sub {
	case "list", "check":
		if fs.NArg() != 0 {
			return usagef("user %s: unexpected argument %q", sub, fs.Arg(0))
		}
		if sub == "check" {
			return checkUsers(ctx, dir, secretKeyFiles{cmd: "user check", usersPath: *usersPath, current: *keyPath, old: oldKeyPaths}, stdout, stderr)
		}
		return listUsers(ctx, dir, stdout)
	case "rekey":
		return rekeyUsers(ctx, dir, rekeyOptions{newKeyPath: *keyPath, oldKeyPaths: oldKeyPaths, dryRun: *dryRun}, stdout, stderr)
	case "import":
		if fs.NArg() != 1 {
			return usagef("user import: want exactly one file to import")
		}
		if *tokenTTL < 0 {
			return usagef("user import: --token-ttl %v: want 0 or more", *tokenTTL)
		}
		if *update && *from != "django" {
			return usagef("user import: --update works with --from django")
		}
		if *keyPath == "" && *from == "django" && isPostgresURL(*usersPath) {
			return usagef("user import: --secret-key-file is needed with PostgreSQL: the key that fingerprints the Django hashes and seals their second factors, the same file for every import")
		}
		if *keyPath == "" && !isPostgresURL(*usersPath) {
			*keyPath = filepath.Join(filepath.Dir(*usersPath), defaultKeyFile) // serve's
		}
		return importUsers(ctx, target, importOptions{
			from: *from, path: fs.Arg(0), dryRun: *dryRun, update: *update, keyPath: *keyPath,
			store: *store, storePrefix: *storePrefix, tokenTTL: *tokenTTL,
		}, stdout, stderr)
	}
	if fs.NArg() != 1 {
		return usagef("user %s: want exactly one USERNAME", sub)
	}
	username := users.NormalizeUsername(fs.Arg(0)) // as Django does on create
	if err := users.CheckUsername(username); err != nil {
		return usagef("user %s: %v", sub, err)
	}

	switch sub {
	case "add":
		if err := users.CheckProfile(*name, *email, groups); err != nil {
			return usagef("user add: %v", err)
		}
		hash, err := newUserPassword("user "+sub, hashing, *minLength, username, stdin, stderr)
		if err != nil {
			return err
		}
		if groups == nil {
			groups = stringList{}
		}
		// A cut-off from the start: tokens of an earlier user of that name stay dead.
		err = dir.Add(ctx, users.User{Username: username, PasswordHash: hash, Name: *name, Email: *email, Groups: groups, Admin: *admin, TokensAfter: time.Now().UTC()})
		if errors.Is(err, users.ErrExists) {
			return fmt.Errorf("user add: user %q already exists", username)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "added user %q to %s\n", username, dir) // dir names a database without its password
		return nil
	case "passwd":
		hash, err := newUserPassword("user "+sub, hashing, *minLength, username, stdin, stderr)
		if err != nil {
			return err
		}
		return userChanged(users.SetPassword(ctx, dir, username, hash), dir, sub, username, "changed the password of", stdout)
	case "del":
		if err := dir.Delete(ctx, username); err != nil {
			return userError(sub, username, err)
		}
		fmt.Fprintf(stdout, "deleted user %q from %s\n", username, dir)
		return nil
	case "disable":
		return userChanged(users.Disable(ctx, dir, username), dir, sub, username, "disabled", stdout)
	case "logout":
		return userChanged(users.Logout(ctx, dir, username), dir, sub, username, "ended every token of", stdout)
	case "unlock":
		return userChanged(users.Unlock(ctx, dir, username), dir, sub, username, "lifted the lockout of", stdout)
	case "reset-mfa":
		return resetMFA(ctx, dir, username, stdout)
	default: // enable
		return userChanged(users.Enable(ctx, dir, username), dir, sub, username, "enabled", stdout)
	}
}

// checkUsers validates the users file or database offline, as serve
// would load it, its secret-key check included: second factors that the
// key files cannot open fail it with the line serve would stop with. It
// never creates a key file.
func checkUsers(ctx context.Context, dir users.Directory, keyFiles secretKeyFiles, stdout, stderr io.Writer) error {
	list, err := dir.List(ctx)
	if err != nil {
		return err
	}
	if err := users.Validate(list); err != nil {
		return err
	}
	keys, _, err := loadSecretKeys(keyFiles) // a missing default key file is no key, as serve has before it makes one
	if err != nil {
		return err
	}
	// Loaded as serve loads it (a users file is read only): its factors are
	// the ones counted.
	if err := dir.Reload(ctx); err != nil {
		return err
	}
	if err := checkSecretKeys(ctx, dir, keys); err != nil {
		return err
	}
	warnSlowHashes("user check", list, stderr)
	fmt.Fprintf(stdout, "%s: %d users, valid\n", dir, len(list))
	return nil
}

// slowHashFactor is how many times slower than the default policy's a
// hash must check before the CLI names it: every failed login waits as
// long as a check against the slowest hash in the directory.
const slowHashFactor = 16

// warnSlowHashes names, on stderr, every user in list whose hash takes
// far longer to check than the default policy's.
func warnSlowHashes(cmd string, list []users.User, stderr io.Writer) {
	dummy, err := password.DefaultHashPolicy().Dummy()
	if err != nil {
		return
	}
	budget := dummy.Work() * slowHashFactor
	for _, u := range list {
		h, err := password.ParseHash(u.PasswordHash)
		if err != nil || h.Work() <= budget {
			continue
		}
		fmt.Fprintf(stderr, "authsvc: %s: warning: user %q: its %s hash takes about %.1f s a check, %.0f times the default policy's; every failed login waits as long until it logs in and is rehashed\n",
			cmd, printable(u.Username), h.Scheme(), h.Work(), h.Work()/dummy.Work())
	}
}

// userChanged reports the outcome err of "user sub username" on dir: done
// (what was done to the user) on stdout, or the error in one line.
func userChanged(err error, dir users.Directory, sub, username, done string, stdout io.Writer) error {
	if err != nil {
		return userError(sub, username, err)
	}
	fmt.Fprintf(stdout, "%s user %q in %s\n", done, username, dir)
	return nil
}

// resetMFA runs "user reset-mfa" (users.ResetFactors) and says what it
// removed.
func resetMFA(ctx context.Context, dir users.Directory, username string, stdout io.Writer) error {
	removed, pendingOnly, err := users.ResetFactors(ctx, dir, username)
	switch {
	case err != nil:
		return userError("reset-mfa", username, err)
	case !removed:
		fmt.Fprintf(stdout, "user %q has no second factor in %s; nothing changed\n", username, dir)
	case pendingOnly:
		fmt.Fprintf(stdout, "removed the unconfirmed enrolment of user %q in %s, and ended its tokens\n", username, dir)
	default:
		fmt.Fprintf(stdout, "removed the second factors of user %q in %s, and ended its tokens\n", username, dir)
	}
	return nil
}

// userError words a directory error of "user sub" in one line.
func userError(sub, username string, err error) error {
	if errors.Is(err, users.ErrNotFound) {
		return fmt.Errorf("user %s: no user %q", sub, username)
	}
	return err
}

// listUsers prints the users file as a table, without hashes.
func listUsers(ctx context.Context, dir users.Directory, stdout io.Writer) error {
	users, err := dir.List(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USERNAME\tADMIN\tDISABLED\tMFA\tNAME\tEMAIL\tGROUPS")
	for _, u := range users {
		// The file may be hand-edited: every field is printable, or a name
		// could clear the screen or forge a row.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", printable(u.Username), yesNo(u.Admin), yesNo(u.Disabled), factorsColumn(&u),
			dash(printable(u.Name)), dash(printable(u.Email)), dash(printable(strings.Join(u.Groups, ","))))
	}
	return tw.Flush()
}

// factorsColumn is user list's MFA column for u: what logs u in beside
// the password. Only second factors as API.md counts them: an enrolment
// not yet confirmed logs no one in, so it shows as none.
func factorsColumn(u *users.User) string {
	if !u.HasSecondFactor() {
		return "-"
	}
	var parts []string
	if u.MFA.TOTP != nil {
		parts = append(parts, "totp")
	}
	if n := len(u.MFA.RecoveryCodes); n > 0 {
		parts = append(parts, fmt.Sprintf("codes(%d)", n))
	}
	return strings.Join(parts, "+")
}

// printable returns s with every rune that is not graphic escaped as \x..,
// \u.... or \U........, and every byte of invalid UTF-8 as \x..: control
// characters (terminal escapes, line breaks, tabs) and also format ones
// such as U+202E, which reverses the text after it.
func printable(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !unicode.IsGraphic(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unicode.IsGraphic(r):
			b.WriteString(s[:size])
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		s = s[size:]
	}
	return b.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// hashCommand prints the hash of the password on stdin, under the hash policy.
func hashCommand(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hash", flag.ContinueOnError)
	var hashing hashFlags
	hashing.define(fs)
	h := help{synopsis: "authsvc hash [flags]", about: `Prints the hash of the password on stdin, for a users file written by hand
or by another tool. The password is read as by user add; the password
policy does not apply.`}
	if err := parseFlags(fs, h, args, getenv, nil, stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("hash: unexpected argument; the password is read from stdin")
	}
	policy, err := hashing.policy("hash")
	if err != nil {
		return err
	}
	password, err := readPassword(stdin, stderr)
	if err != nil {
		return err
	}
	hash, err := hashPassword(policy, password, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, hash)
	return nil
}

// newUserPassword reads the password of username from stdin, checks it
// against the password policy (at least minLength characters) and returns
// its hash under the hash policy the flags give.
func newUserPassword(cmd string, hashing hashFlags, minLength int, username string, stdin io.Reader, stderr io.Writer) (string, error) {
	policy, err := hashing.policy(cmd)
	if err != nil {
		return "", err
	}
	pw, err := readPassword(stdin, stderr)
	if err != nil {
		return "", err
	}
	if err := users.CheckNewPassword(pw); err != nil {
		return "", err
	}
	if err := (password.Policy{MinLength: minLength}).Check(username, pw); err != nil {
		return "", err
	}
	return hashPassword(policy, pw, stderr)
}

// hashPassword returns password's hash under policy, warning on stderr of
// a bcrypt cost fit only for tests.
func hashPassword(policy password.HashPolicy, pw string, stderr io.Writer) (string, error) {
	if err := users.CheckNewPassword(pw); err != nil {
		return "", err
	}
	if policy.Scheme == password.SchemeBcrypt && policy.BcryptCost < minSafeCost {
		fmt.Fprintf(stderr, "authsvc: warning: bcrypt cost %d is below %d; use it only for tests\n", policy.BcryptCost, minSafeCost)
	}
	return policy.Hash([]byte(pw))
}

// readPassword reads a password: from a terminal without echo, asking
// twice; from anything else, the first line, silently.
func readPassword(stdin io.Reader, stderr io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(stderr, "Password: ")
		first, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", err
		}
		fmt.Fprint(stderr, "Password again: ")
		second, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(stderr)
		if err != nil {
			return "", err
		}
		if string(first) != string(second) {
			return "", errors.New("the passwords differ")
		}
		return string(first), nil
	}
	// One byte more than a line may hold reveals an over-long password.
	line, err := bufio.NewReader(io.LimitReader(stdin, password.MaxLen+3)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read password: %w", err)
	}
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	return line, nil
}

// versionCommand prints the module version and VCS revision.
func versionCommand(args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	h := help{synopsis: "authsvc version", about: "Prints the version, the VCS revision and time, and the Go release it was built with."}
	if err := parseFlags(fs, h, args, getenv, nil, stdout); err != nil {
		return err
	}
	b := buildinfo.Read()
	fmt.Fprintf(stdout, "authsvc %s, revision %s, committed %s, built with %s\n", b.Version, b.Revision, b.Time, b.GoVersion)
	return nil
}
