package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"authsvc/integration/harness"
	"authsvc/internal/mfa"
	"authsvc/internal/secret"
	"authsvc/internal/servertest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// The CLI/API parity test (issue 32): API.md says each admin API action
// "does exactly what the matching `authsvc user` command does (same
// checks, same deaths, same records)". Two equal users files, each served
// by its own `authsvc serve`; each action goes to one through `authsvc
// user …` and to the other through the admin API, and the two directories,
// token stores and logins afterwards must tell the same story.

// parityTargets are the users whose tokens every row makes and checks:
// alice has a second factor (recovery codes), bob is plain, carol is
// disabled, root is the admin who calls the API, adam another admin.
var parityTargets = []string{"root", "adam", "alice", "bob", "carol"}

// parityPassword is name's password in the parity users files: long
// enough for the default policy (12 characters), which both the CLI and
// the servers apply here.
func parityPassword(name string) string { return name + "-long-password-1" }

// parityNewPassword is the password the rows that set one set.
const parityNewPassword = "a fresh parity passphrase"

// parityEnv is the CLI's environment: the servers' default policy,
// not the harness's 1.
var parityEnv = map[string]string{"AUTHSVC_PASSWORD_MIN_LENGTH": "12"}

// parityFixture is what both sides start from: the users file's bytes,
// its secret key, and alice's recovery codes in clear.
type parityFixture struct {
	data  []byte
	key   secret.Key
	codes []string
}

// newParityFixture makes the users and encodes them once, so that both
// sides start from the same bytes.
func newParityFixture(t *testing.T) parityFixture {
	t.Helper()
	key, err := secret.Generate()
	if err != nil {
		t.Fatal(err)
	}
	codes, err := mfa.NewRecoveryCodes(8)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([]string, len(codes))
	for i, c := range codes {
		if hashes[i], err = mfa.HashRecoveryCode(key, c); err != nil {
			t.Fatal(err)
		}
	}
	hash := func(name string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(parityPassword(name)), 4)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	list := []users.User{
		{Username: "root", PasswordHash: hash("root"), Name: "Root", Groups: []string{}, Admin: true},
		{Username: "adam", PasswordHash: hash("adam"), Name: "Adam", Groups: []string{"ops"}, Admin: true},
		{Username: "alice", PasswordHash: hash("alice"), Name: "Alice", Email: "alice@example.com", Groups: []string{"dev", "ops"},
			MFA: &users.Factors{RecoveryCodes: hashes, RecoveryKeyID: key.ID()}},
		{Username: "bob", PasswordHash: hash("bob"), Name: "Bob", Groups: []string{}},
		{Username: "carol", PasswordHash: hash("carol"), Groups: []string{"dev"}, Disabled: true},
	}
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, list); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parityFixture{data: data, key: key, codes: codes}
}

// A paritySide is one users file and the server reading it: the CLI's
// side or the API's.
type paritySide struct {
	name   string // "CLI" or "API"
	path   string
	base   string
	log    *servertest.LineLog
	codes  []string          // alice's recovery codes not spent on this side, in order
	tokens map[string]string // "user/session", "user/pat" or "user/adminpat" -> the token
	admin  string            // root's session
	link   string            // a reset link a row's prepare made
}

// startParitySide writes f to a directory of its own and serves it.
func startParitySide(t *testing.T, name string, f parityFixture) *paritySide {
	t.Helper()
	dir := t.TempDir()
	s := &paritySide{name: name, path: filepath.Join(dir, "users.json"), codes: slices.Clone(f.codes), tokens: map[string]string{}}
	if err := os.WriteFile(s.path, f.data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := secret.Write(filepath.Join(dir, "authsvc.key"), f.key); err != nil {
		t.Fatal(err)
	}
	s.base, s.log, _ = harness.ServeBinary(t, nil, "--users", s.path, "--cost", "4", "--reload-interval", "100ms",
		"--user-failures", "3", "--login-rate", "1000", "--login-burst", "1000")
	return s
}

// otp returns the next unspent recovery code of alice on s, and "" for
// anyone else.
func (s *paritySide) otp(t *testing.T, user string) string {
	t.Helper()
	if user != "alice" {
		return ""
	}
	if len(s.codes) == 0 {
		t.Fatal("alice's recovery codes are all spent")
	}
	c := s.codes[0]
	s.codes = s.codes[1:]
	return c
}

// login logs user in on s with password, and alice's next code.
func (s *paritySide) login(t *testing.T, user, password string) harness.Reply {
	t.Helper()
	body := map[string]string{"username": user, "password": password}
	if c := s.otp(t, user); c != "" {
		body["otp"] = c
	}
	return harness.Do(t, "POST", s.base+"/api/auth/login/", "", jsonText(t, body))
}

// issue logs each target in on s and mints them a personal access
// token; carol, disabled, gets neither.
func (s *paritySide) issue(t *testing.T) {
	t.Helper()
	for _, user := range parityTargets {
		r := s.login(t, user, parityPassword(user))
		if user == "carol" {
			if r.Status != 401 {
				t.Fatalf("%s: login(carol, disabled) = %v; want 401", s.name, r)
			}
			continue
		}
		session := harness.TokenOf(t, s.name+": login("+user+")", r)
		s.tokens[user+"/session"] = session
		s.tokens[user+"/pat"] = s.mint(t, user, session, "parity", "info")
		if user == "root" || user == "adam" {
			s.tokens[user+"/adminpat"] = s.mint(t, user, session, "parity-admin", "info", "admin")
		}
	}
	s.admin = s.tokens["root/session"]
}

// mint makes user a personal access token of scopes on s with their
// session, and returns it.
func (s *paritySide) mint(t *testing.T, user, session, name string, scopes ...string) string {
	t.Helper()
	body := map[string]any{"name": name, "scopes": scopes, "password": parityPassword(user)}
	if c := s.otp(t, user); c != "" {
		body["code"] = c
	}
	r := harness.Do(t, "POST", s.base+"/api/auth/tokens/", session, jsonText(t, body))
	var pat struct{ Token string }
	if r.Status != 201 || json.Unmarshal([]byte(r.Body), &pat) != nil || pat.Token == "" {
		t.Fatalf("%s: POST /api/auth/tokens/ as %s = %v; want 201 with a token", s.name, user, r)
	}
	return pat.Token
}

// verdicts returns, for each token s issued, the status info answers it.
func (s *paritySide) verdicts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for k, tok := range s.tokens {
		out[k] = harness.Do(t, "GET", s.base+"/api/auth/info", tok, "").Status
	}
	return out
}

// reloads is how many times s's server has logged a reload of its file.
func (s *paritySide) reloads() int {
	return strings.Count(s.log.String(), "msg=\"users file reloaded\"")
}

// jsonText is v in JSON.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A userView is what the parity test compares of one user's record: the
// fields as they are, and what must differ between two directories
// (times, hashes, digests, ids) as how they moved since before the action.
type userView struct {
	Exists              bool
	Name, Email         string
	Groups              []string
	Admin, Disabled     bool
	Password            string // same or changed, usable or not, and the hash's scheme
	PasswordGeneration  uint64 // since before
	TokensAfter         string
	FailuresAfter       string
	MFA                 string
	AccessTokens        []string // name, scopes, kept or new
	ResetLink           string
	DjangoHashUnchanged bool
}

// viewOf returns after's view relative to before; nil for a user absent.
func viewOf(before, after *users.User) userView {
	if after == nil {
		return userView{}
	}
	if before == nil {
		before = &users.User{}
	}
	v := userView{Exists: true, Name: after.Name, Email: after.Email, Groups: after.Groups, Admin: after.Admin, Disabled: after.Disabled,
		PasswordGeneration: after.PasswordGeneration - before.PasswordGeneration,
		TokensAfter:        moved(before.TokensAfter, after.TokensAfter), FailuresAfter: moved(before.FailuresAfter, after.FailuresAfter),
		DjangoHashUnchanged: before.DjangoHash == after.DjangoHash}
	v.Password = fmt.Sprintf("changed=%v usable=%v scheme=%s", before.PasswordHash != after.PasswordHash, usable(after.PasswordHash), scheme(after.PasswordHash))
	if f := after.MFA; f != nil {
		v.MFA = fmt.Sprintf("totp=%v pending=%v codes=%d", f.TOTP != nil, f.PendingTOTP != nil, len(f.RecoveryCodes))
	}
	v.MFA += fmt.Sprintf(" changed=%v", !reflect.DeepEqual(before.MFA, after.MFA))
	kept := map[string]bool{}
	for _, a := range before.AccessTokens {
		kept[a.ID] = true
	}
	for _, a := range after.AccessTokens {
		v.AccessTokens = append(v.AccessTokens, fmt.Sprintf("%s %v kept=%v", a.Name, a.Scopes, kept[a.ID]))
	}
	slices.Sort(v.AccessTokens)
	switch l, was := after.ResetLink, before.ResetLink; {
	case l == nil:
		v.ResetLink = "none"
	case was != nil && was.Digest == l.Digest:
		v.ResetLink = fmt.Sprintf("same, mailed %d", len(l.Mailed))
	default:
		v.ResetLink = fmt.Sprintf("new, expiry %s, mailed %d", moved(time.Now(), l.ExpiresAt), len(l.Mailed))
	}
	return v
}

// moved says how the time after stands to before: "zero", "same",
// "later" or "earlier".
func moved(before, after time.Time) string {
	switch {
	case after.IsZero():
		return "zero"
	case after.Equal(before):
		return "same"
	case after.After(before):
		return "later"
	}
	return "earlier"
}

// usable reports whether hash is a password hash a login may match:
// Django's unusable passwords start with "!".
func usable(hash string) bool { return hash != "" && !strings.HasPrefix(hash, "!") }

// scheme is hash's algorithm and parameters without its salt and digest:
// "2a$04" for bcrypt at cost 4, "!" for an unusable password.
func scheme(hash string) string {
	if !usable(hash) {
		return "!"
	}
	f := strings.Split(strings.TrimPrefix(hash, "$"), "$")
	if len(f) < 2 {
		return "?"
	}
	return f[0] + "$" + f[1]
}

// compareDirectories fails t where the two sides' files, each relative to
// its own before, tell different stories.
func compareDirectories(t *testing.T, what string, cliBefore, cliAfter, apiBefore, apiAfter map[string]users.User) {
	t.Helper()
	names := map[string]bool{}
	for _, m := range []map[string]users.User{cliBefore, cliAfter, apiBefore, apiAfter} {
		for n := range m {
			names[n] = true
		}
	}
	ptr := func(m map[string]users.User, n string) *users.User {
		if u, ok := m[n]; ok {
			return &u
		}
		return nil
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		c, a := viewOf(ptr(cliBefore, n), ptr(cliAfter, n)), viewOf(ptr(apiBefore, n), ptr(apiAfter, n))
		if !reflect.DeepEqual(c, a) {
			t.Errorf("%s: user %q in the files: by the CLI %+v; by the API %+v", what, n, c, a)
		}
	}
}

// A parityRow is one action done both ways. cli is `authsvc user …`'s
// arguments after "user", with USERS for the users file; api is the
// request on the admin API. An action that succeeds has wantExit 0 and
// its wantStatus; after it, the target's tokens answer wantTokens on
// info, and the target's login with password answers wantLogin.
type parityRow struct {
	name       string
	target     string
	cli        []string
	stdin      string
	method     string
	path       string // under /api/admin/users/
	body       string
	wantExit   int
	wantStatus int
	prepare    func(t *testing.T, s *paritySide) // before the snapshot, on each side
	wantTokens map[string]int                    // "session"/"pat" of the target -> info's status after
	password   string                            // the target's password after ("" for theirs)
	wantLogin  int
	// writesNothing: the command leaves the file as it was (reset-mfa of
	// a user without any; a reset link, kept in USERS.resets beside it),
	// so there is no reload to wait for.
	writesNothing bool
}

func TestCLIAPIParity(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	harness.RequireBinary(t)
	f := newParityFixture(t)
	live := map[string]int{"session": 200, "pat": 200}
	dead := map[string]int{"session": 401, "pat": 401}
	sessionsDead := map[string]int{"session": 401, "pat": 200}
	adminPATsDead := map[string]int{"session": 200, "pat": 200, "adminpat": 401}
	lockBob := func(t *testing.T, s *paritySide) {
		for i := range 3 {
			if r := s.login(t, "bob", "wrong password"); r.Status != 401 {
				t.Fatalf("%s: wrong password %d for bob = %v; want 401", s.name, i+1, r)
			}
		}
		if r := s.login(t, "bob", parityPassword("bob")); r.Status != 429 {
			t.Fatalf("%s: bob's right password after 3 failures = %v; want 429 (locked)", s.name, r)
		}
	}
	linkFor := func(user string) func(t *testing.T, s *paritySide) {
		return func(t *testing.T, s *paritySide) { s.makeLink(t, user) }
	}
	rows := []parityRow{
		{name: "add with a password", target: "dave",
			cli:   []string{"add", "--users", "USERS", "--cost", "4", "--name", "Dave", "--email", "dave@example.com", "--group", "dev", "--group", "ops", "--admin", "dave"},
			stdin: "dave-long-password-1\n", method: "POST", path: "",
			body:     `{"username":"dave","password":"dave-long-password-1","name":"Dave","email":"dave@example.com","groups":["dev","ops"],"admin":true}`,
			password: "dave-long-password-1", wantStatus: 201, wantLogin: 200},
		{name: "add of a name in another Unicode form", target: "frank",
			cli: []string{"add", "--users", "USERS", "--cost", "4", "ｆｒａｎｋ"}, stdin: "frank-long-password-1\n", method: "POST",
			body: `{"username":"ｆｒａｎｋ","password":"frank-long-password-1"}`, password: "frank-long-password-1", wantStatus: 201, wantLogin: 200},
		{name: "add without a password", target: "erin",
			cli: []string{"add", "--users", "USERS", "--no-password", "--name", "Erin", "erin"}, method: "POST", path: "",
			body: `{"username":"erin","name":"Erin"}`, password: "erin-long-password-1", wantStatus: 201, wantLogin: 401},
		{name: "edit the profile", target: "alice",
			cli:    []string{"edit", "--users", "USERS", "--name", "Alice B.", "--email", "ab@example.com", "--group", "qa", "alice"},
			method: "PATCH", path: "alice", body: `{"name":"Alice B.","email":"ab@example.com","groups":["qa"]}`,
			wantStatus: 200, wantTokens: live, wantLogin: 200},
		{name: "edit: clear the name, email and groups", target: "alice",
			cli:    []string{"edit", "--users", "USERS", "--name", "", "--email", "", "--no-groups", "alice"},
			method: "PATCH", path: "alice", body: `{"name":"","email":"","groups":[]}`,
			wantStatus: 200, wantTokens: live, wantLogin: 200},
		{name: "edit: promote", target: "bob", cli: []string{"edit", "--users", "USERS", "--admin", "bob"},
			method: "PATCH", path: "bob", body: `{"admin":true}`, wantStatus: 200, wantTokens: live, wantLogin: 200},
		{name: "edit: demote", target: "adam", cli: []string{"edit", "--users", "USERS", "--admin=false", "adam"},
			method: "PATCH", path: "adam", body: `{"admin":false}`, wantStatus: 200, wantTokens: adminPATsDead, wantLogin: 200},
		{name: "edit: nothing changes", target: "bob", cli: []string{"edit", "--users", "USERS", "--name", "Bob", "bob"},
			method: "PATCH", path: "bob", body: `{"name":"Bob"}`, wantStatus: 200, wantTokens: live, wantLogin: 200},
		{name: "disable", target: "alice", cli: []string{"disable", "--users", "USERS", "alice"},
			method: "PATCH", path: "alice", body: `{"disabled":true}`, wantStatus: 200, wantTokens: dead, wantLogin: 401},
		{name: "disable with a live reset link", target: "bob", cli: []string{"disable", "--users", "USERS", "bob"}, prepare: linkFor("bob"),
			method: "PATCH", path: "bob", body: `{"disabled":true}`, wantStatus: 200, wantTokens: dead, wantLogin: 401},
		{name: "disable of a disabled user", target: "carol", cli: []string{"disable", "--users", "USERS", "carol"}, writesNothing: true,
			method: "PATCH", path: "carol", body: `{"disabled":true}`, wantStatus: 200, wantLogin: 401},
		{name: "enable of an enabled user", target: "bob", cli: []string{"enable", "--users", "USERS", "bob"}, writesNothing: true,
			method: "PATCH", path: "bob", body: `{"disabled":false}`, wantStatus: 200, wantTokens: live, wantLogin: 200},
		{name: "enable", target: "carol", cli: []string{"enable", "--users", "USERS", "carol"},
			method: "PATCH", path: "carol", body: `{"disabled":false}`, wantStatus: 200, wantLogin: 200},
		{name: "del", target: "bob", cli: []string{"del", "--users", "USERS", "bob"},
			method: "DELETE", path: "bob", wantStatus: 204, wantTokens: dead, wantLogin: 401},
		{name: "passwd", target: "bob", cli: []string{"passwd", "--users", "USERS", "--cost", "4", "bob"}, stdin: parityNewPassword + "\n",
			method: "POST", path: "bob/password", body: `{"new_password":"` + parityNewPassword + `"}`,
			wantStatus: 204, wantTokens: dead, password: parityNewPassword, wantLogin: 200},
		{name: "passwd with a live reset link", target: "bob", cli: []string{"passwd", "--users", "USERS", "--cost", "4", "bob"}, stdin: parityNewPassword + "\n",
			method: "POST", path: "bob/password", body: `{"new_password":"` + parityNewPassword + `"}`, prepare: linkFor("bob"),
			wantStatus: 204, wantTokens: dead, password: parityNewPassword, wantLogin: 200},
		{name: "passwd of the user with a second factor", target: "alice", cli: []string{"passwd", "--users", "USERS", "--cost", "4", "alice"}, stdin: parityNewPassword + "\n",
			method: "POST", path: "alice/password", body: `{"new_password":"` + parityNewPassword + `"}`,
			wantStatus: 204, wantTokens: dead, password: parityNewPassword, wantLogin: 200},
		{name: "logout", target: "alice", cli: []string{"logout", "--users", "USERS", "alice"},
			method: "POST", path: "alice/logout", wantStatus: 204, wantTokens: sessionsDead, wantLogin: 200},
		{name: "unlock", target: "bob", cli: []string{"unlock", "--users", "USERS", "bob"}, prepare: lockBob,
			method: "POST", path: "bob/unlock", wantStatus: 204, wantTokens: live, wantLogin: 200},
		{name: "reset-mfa", target: "alice", cli: []string{"reset-mfa", "--users", "USERS", "alice"},
			// Her login right after: a password and a recovery code of
			// the factor removed, also on an instance that has not loaded
			// the removal yet (TestLoginAfterFactorsRemovedElsewhere).
			method: "POST", path: "alice/reset-mfa", wantStatus: 204, wantTokens: sessionsDead, wantLogin: 200},
		{name: "reset-mfa of a user without any", target: "bob", cli: []string{"reset-mfa", "--users", "USERS", "bob"}, writesNothing: true,
			method: "POST", path: "bob/reset-mfa", wantStatus: 204, wantTokens: live, wantLogin: 200},
		{name: "reset-link", target: "bob", cli: []string{"reset-link", "--users", "USERS", "bob"}, writesNothing: true,
			method: "POST", path: "bob/reset-link", wantStatus: 200, wantTokens: live, wantLogin: 200},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			testParityRow(t, f, row)
		})
	}
	t.Run("refusals", func(t *testing.T) {
		t.Parallel()
		testParityRefusals(t, f)
	})
}

// runParityCLI runs row's command on s's file.
func runParityCLI(t *testing.T, s *paritySide, row parityRow) (code int, stdout, stderr string) {
	t.Helper()
	args := []string{"user"}
	for _, a := range row.cli {
		if a == "USERS" {
			a = s.path
		}
		args = append(args, a)
	}
	return harness.RunBinary(t, row.stdin, parityEnv, args...)
}

// testParityRow does row's action on a fresh pair of sides, the CLI's
// and the API's, and compares them.
func testParityRow(t *testing.T, f parityFixture, row parityRow) {
	cli, api := startParitySide(t, "CLI", f), startParitySide(t, "API", f)
	for _, s := range []*paritySide{cli, api} {
		s.issue(t)
		if row.prepare != nil {
			row.prepare(t, s)
		}
	}
	cliBefore, apiBefore := harness.MustReadUsers(t, cli.path), harness.MustReadUsers(t, api.path)
	verdictsBefore := cli.verdicts(t)

	reloads := cli.reloads()
	code, stdout, stderr := runParityCLI(t, cli, row)
	if code != row.wantExit {
		t.Fatalf("authsvc user %s = exit %d, stderr %q; want exit %d", strings.Join(row.cli, " "), code, stderr, row.wantExit)
	}
	r := harness.Do(t, row.method, api.base+"/api/admin/users/"+row.path, api.admin, row.body)
	if r.Status != row.wantStatus {
		t.Fatalf("%s /api/admin/users/%s = %v; want %d", row.method, row.path, r, row.wantStatus)
	}
	if row.writesNothing {
		time.Sleep(paritySettle) // a reload the command should not have caused would have come
	} else {
		waitReload(t, cli, reloads)
	}
	cliVerdicts, apiVerdicts := settledVerdicts(t, cli, api)
	compareDirectories(t, row.name, cliBefore, harness.MustReadUsers(t, cli.path), apiBefore, harness.MustReadUsers(t, api.path))
	compareVerdicts(t, row.name, verdictsBefore, cliVerdicts, apiVerdicts)
	for kind, want := range row.wantTokens {
		if got := apiVerdicts[row.target+"/"+kind]; got != want {
			t.Errorf("%s: info with %s's %s after the action = %d; want %d", row.name, row.target, kind, got, want)
		}
	}
	password := row.password
	if password == "" {
		password = parityPassword(row.target)
	}
	if differ := compareLogins(t, row.name, cli, api, row.target, password, row.wantLogin); differ != "" {
		t.Error(differ)
	}
	if cli.link != "" {
		c, a := cli.confirm(t, cli.link), api.confirm(t, api.link)
		if c.Status != a.Status || c.Code() != a.Code() || a.Status != 400 {
			t.Errorf("%s: confirming the reset link made before = %v on the CLI's side; %v on the API's; want 400 invalid_token on both", row.name, c, a)
		}
	}
	if row.name == "reset-link" {
		testParityResetLink(t, cli, api, stdout, r)
	}
}

// paritySettle is three of the servers' reload intervals: after it, a
// reload of a file the CLI changed when it should not have has come.
const paritySettle = 300 * time.Millisecond

// waitReload waits, up to API.md's 5 s, until s's server has reloaded
// its file since it had reloaded it before times, and then until its
// reloads have stopped for paritySettle.
func waitReload(t *testing.T, s *paritySide, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.reloads() <= before {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the server did not reload its users file within 5 s of the command", s.name)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Then until the reloads stop: a reload that began while the command
	// held the file's lock left its pending cut-off records out (an
	// enable's, say: the user still disabled), and the command's last
	// append brings one more within --reload-interval.
	for n := s.reloads(); ; n = s.reloads() {
		time.Sleep(paritySettle)
		if s.reloads() == n {
			return
		}
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("%s: the server still reloads its users file 10 s after the command", s.name)
		}
	}
}

// settledVerdicts returns both sides' verdicts on their tokens once they
// agree, or as they are after 2 s: the CLI side's server ends the tokens
// the reload it logged found dead a moment after logging it.
func settledVerdicts(t *testing.T, cli, api *paritySide) (map[string]int, map[string]int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, a := cli.verdicts(t), api.verdicts(t)
		if maps.Equal(c, a) || time.Now().After(deadline) {
			return c, a
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// compareVerdicts fails t where a token of one side answers info other
// than its counterpart of the other side.
func compareVerdicts(t *testing.T, what string, before, cli, api map[string]int) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if cli[k] != api[k] {
			t.Errorf("%s: info with %s (%d before) = %d on the CLI's side; %d on the API's", what, k, before[k], cli[k], api[k])
		}
	}
}

// compareLogins logs user in with password on both sides; both must
// answer want, with the same error code. It returns how the two sides
// differ, "" when they do not.
func compareLogins(t *testing.T, what string, cli, api *paritySide, user, password string, want int) (differ string) {
	t.Helper()
	c, a := cli.login(t, user, password), api.login(t, user, password)
	if a.Status != want {
		t.Errorf("%s: login(%s) on the API's side = %v; want %d", what, user, a, want)
	}
	if c.Status != a.Status || c.Code() != a.Code() {
		return fmt.Sprintf("%s: login(%s) = %v on the CLI's side; %v on the API's; the CLI side's server log ends:\n%s", what, user, c, a, harness.Tail(cli.log.String(), 12))
	}
	return ""
}

// resetLinkRE matches a link under the default --reset-url: {uid}/{token}.
var resetLinkRE = regexp.MustCompile(`^([A-Za-z0-9_-]+)/([A-Za-z0-9_-]{43})$`)

// testParityResetLink confirms each side's link on its own server: both
// work, and leave the directories and tokens alike.
func testParityResetLink(t *testing.T, cli, api *paritySide, stdout string, r harness.Reply) {
	t.Helper()
	var reply struct{ URL string }
	if err := json.Unmarshal([]byte(r.Body), &reply); err != nil {
		t.Fatalf("reset-link reply %v: %v", r, err)
	}
	cliBefore, apiBefore := harness.MustReadUsers(t, cli.path), harness.MustReadUsers(t, api.path)
	verdictsBefore := cli.verdicts(t)
	for _, link := range []struct {
		s    *paritySide
		link string
	}{{cli, strings.TrimSuffix(stdout, "\n")}, {api, reply.URL}} {
		if r := link.s.confirm(t, link.link); r.Status != 204 {
			t.Fatalf("%s: confirming its reset link = %v; want 204", link.s.name, r)
		}
	}
	cliVerdicts, apiVerdicts := settledVerdicts(t, cli, api)
	compareDirectories(t, "reset-link confirmed", cliBefore, harness.MustReadUsers(t, cli.path), apiBefore, harness.MustReadUsers(t, api.path))
	compareVerdicts(t, "reset-link confirmed", verdictsBefore, cliVerdicts, apiVerdicts)
	for _, kind := range []string{"session", "pat"} {
		if got := apiVerdicts["bob/"+kind]; got != 401 {
			t.Errorf("info with bob's %s after the reset = %d; want 401", kind, got)
		}
	}
	if differ := compareLogins(t, "reset-link confirmed", cli, api, "bob", parityNewPassword, 200); differ != "" {
		t.Error(differ)
	}
}

// makeLink makes a reset link of user on s's file with the CLI. No reload
// is waited for: the link goes to USERS.resets, which s's server reads
// when a change or a confirm needs it, under the file's lock.
func (s *paritySide) makeLink(t *testing.T, user string) {
	t.Helper()
	code, stdout, stderr := harness.RunBinary(t, "", parityEnv, "user", "reset-link", "--users", s.path, user)
	if code != 0 {
		t.Fatalf("%s: authsvc user reset-link %s = exit %d, stderr %q; want exit 0", s.name, user, code, stderr)
	}
	s.link = strings.TrimSuffix(stdout, "\n")
}

// confirm sets parityNewPassword with link, a reset link under the
// default --reset-url, on s's server.
func (s *paritySide) confirm(t *testing.T, link string) harness.Reply {
	t.Helper()
	m := resetLinkRE.FindStringSubmatch(link)
	if m == nil {
		t.Fatalf("%s: reset link %q; want {uid}/{token}", s.name, link)
	}
	body := jsonText(t, map[string]string{"uid": m[1], "token": m[2], "new_password": parityNewPassword})
	return harness.Do(t, "POST", s.base+"/api/auth/password/reset/confirm/", "", body)
}

// testParityRefusals sends what both ways must refuse, alike, to one
// pair of sides, and checks that neither file changed.
func testParityRefusals(t *testing.T, f parityFixture) {
	cli, api := startParitySide(t, "CLI", f), startParitySide(t, "API", f)
	for _, s := range []*paritySide{cli, api} {
		s.issue(t)
	}
	cliBefore, apiBefore := harness.MustReadUsers(t, cli.path), harness.MustReadUsers(t, api.path)
	verdictsBefore := cli.verdicts(t)
	for _, row := range []struct {
		parityRow
		stderr, code string // what the CLI's stderr holds; the API's error code
	}{
		{parityRow{name: "disable of an unknown user", cli: []string{"disable", "--users", "USERS", "nobody"},
			method: "PATCH", path: "nobody", body: `{"disabled":true}`, wantExit: 1, wantStatus: 404}, `no user "nobody"`, "not_found"},
		{parityRow{name: "del of an unknown user", cli: []string{"del", "--users", "USERS", "nobody"},
			method: "DELETE", path: "nobody", wantExit: 1, wantStatus: 404}, `no user "nobody"`, "not_found"},
		{parityRow{name: "passwd of an unknown user", cli: []string{"passwd", "--users", "USERS", "--cost", "4", "nobody"}, stdin: parityNewPassword + "\n",
			method: "POST", path: "nobody/password", body: `{"new_password":"` + parityNewPassword + `"}`, wantExit: 1, wantStatus: 404}, `no user "nobody"`, "not_found"},
		{parityRow{name: "logout of an unknown user", cli: []string{"logout", "--users", "USERS", "nobody"},
			method: "POST", path: "nobody/logout", wantExit: 1, wantStatus: 404}, `no user "nobody"`, "not_found"},
		{parityRow{name: "reset-link of an unknown user", cli: []string{"reset-link", "--users", "USERS", "nobody"},
			method: "POST", path: "nobody/reset-link", wantExit: 1, wantStatus: 404}, `no user "nobody"`, "not_found"},
		{parityRow{name: "reset-link of a disabled user", cli: []string{"reset-link", "--users", "USERS", "carol"},
			method: "POST", path: "carol/reset-link", wantExit: 1, wantStatus: 409}, "disabled", "conflict"},
		{parityRow{name: "edit of an unknown user", cli: []string{"edit", "--users", "USERS", "--name", "X", "nobody"},
			method: "PATCH", path: "nobody", body: `{"name":"X"}`, wantExit: 1, wantStatus: 404}, `no user "nobody"`, "not_found"},
		{parityRow{name: "edit with an empty group", cli: []string{"edit", "--users", "USERS", "--group", "", "alice"},
			method: "PATCH", path: "alice", body: `{"groups":[""]}`, wantExit: 2, wantStatus: 400}, "", "invalid_request"},
		{parityRow{name: "add with an empty group", cli: []string{"add", "--users", "USERS", "--cost", "4", "--group", "", "dave"}, stdin: "dave-long-password-1\n",
			method: "POST", body: `{"username":"dave","password":"dave-long-password-1","groups":[""]}`, wantExit: 2, wantStatus: 400}, "", "invalid_request"},
		{parityRow{name: "duplicate add", cli: []string{"add", "--users", "USERS", "--cost", "4", "bob"}, stdin: "bob-other-password-1\n",
			method: "POST", body: `{"username":"bob","password":"bob-other-password-1"}`, wantExit: 1, wantStatus: 409}, "already exists", "conflict"},
		{parityRow{name: "add of a bad username", cli: []string{"add", "--users", "USERS", "--cost", "4", "bad name!"}, stdin: "bad-long-password-1\n",
			method: "POST", body: `{"username":"bad name!","password":"bad-long-password-1"}`, wantExit: 2, wantStatus: 400}, "", "invalid_request"},
		{parityRow{name: "add with a weak password", cli: []string{"add", "--users", "USERS", "--cost", "4", "dave"}, stdin: "short\n",
			method: "POST", body: `{"username":"dave","password":"short"}`, wantExit: 1, wantStatus: 400}, "", "weak_password"},
		{parityRow{name: "passwd with a weak password", cli: []string{"passwd", "--users", "USERS", "--cost", "4", "bob"}, stdin: "short\n",
			method: "POST", path: "bob/password", body: `{"new_password":"short"}`, wantExit: 1, wantStatus: 400}, "", "weak_password"},
		{parityRow{name: "add of a bad username with a weak password", cli: []string{"add", "--users", "USERS", "--cost", "4", "bad name!"}, stdin: "short\n",
			method: "POST", body: `{"username":"bad name!","password":"short"}`, wantExit: 2, wantStatus: 400}, "", "invalid_request"},
	} {
		t.Run(row.name, func(t *testing.T) {
			code, stdout, stderr := runParityCLI(t, cli, row.parityRow)
			if code != row.wantExit || stdout != "" || !strings.Contains(stderr, row.stderr) {
				t.Errorf("authsvc user %s = exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, %q on stderr",
					strings.Join(row.cli, " "), code, stdout, stderr, row.wantExit, row.stderr)
			}
			r := harness.Do(t, row.method, api.base+"/api/admin/users/"+row.path, api.admin, row.body)
			compareDirectories(t, row.name, cliBefore, harness.MustReadUsers(t, cli.path), apiBefore, harness.MustReadUsers(t, api.path))
			wantUnchanged(t, row.name, cli, cliBefore)
			wantUnchanged(t, row.name, api, apiBefore)
			switch {
			case r.Status == row.wantStatus && r.Code() == row.code:
			default:
				t.Errorf("%s /api/admin/users/%s = %v; want %d %s", row.method, row.path, r, row.wantStatus, row.code)
			}
		})
	}
	time.Sleep(paritySettle) // a reload the CLI should not have caused would have come
	cliVerdicts, apiVerdicts := cli.verdicts(t), api.verdicts(t)
	compareVerdicts(t, "after the refusals", verdictsBefore, cliVerdicts, apiVerdicts)
	if !maps.Equal(cliVerdicts, verdictsBefore) {
		t.Errorf("info with each token after the refusals, on the CLI's side: %v; want %v as before", cliVerdicts, verdictsBefore)
	}
}

// wantUnchanged fails t unless every user in s's file is as in before,
// in everything userView shows (a last use of a token may move).
func wantUnchanged(t *testing.T, what string, s *paritySide, before map[string]users.User) {
	t.Helper()
	after := harness.MustReadUsers(t, s.path)
	for _, name := range slices.Sorted(maps.Keys(after)) {
		a, b := after[name], before[name]
		if _, ok := before[name]; !ok {
			t.Errorf("%s: user %q appeared in the %s side's file", what, name, s.name)
			continue
		}
		if v, w := viewOf(&b, &a), viewOf(&b, &b); !reflect.DeepEqual(v, w) {
			t.Errorf("%s: user %q in the %s side's file changed: %+v; want %+v", what, name, s.name, v, w)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%s: the %s side's file has %d users; want %d as before", what, s.name, len(after), len(before))
	}
}
