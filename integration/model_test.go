package integration

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The contract's bounds (API.md, Operations and Users) and how long past
// each the walk polls before it calls a token's answer wrong: the grace
// keeps the test from flaking on a loaded machine; the latencies seen are
// reported against the bounds themselves.
const (
	storeBound     = 100 * time.Millisecond // a revocation in the shared token store
	directoryBound = 5 * time.Second        // a change recorded only in the directory (the CLI)
	grace          = time.Second
)

// A userState is what the directory holds of one user at one time, as far
// as logins and tokens care.
type userState struct {
	exists   bool
	disabled bool
	password string
	totp     string // the active authenticator's base32 secret; "" for none
	factors  int    // the factor set's generation: recovery codes belong to one
	// name and groups (comma-joined) are the profile the admin API sets
	// (adminops_test.go); a new user of the name starts with none.
	name, groups string
}

// A version is one state of a user in the directory, and the change that
// made it.
type version struct {
	at    time.Time // when the change answered (the command exited)
	cli   bool      // recorded only in the directory, by a user command
	kills bool      // the change ended the user's tokens (or made the state before it one a token may not be issued on)
	state userState
}

// A userModel is one user's history in the directory and what the model
// knows beside it.
type userModel struct {
	history []version
	old     []string // passwords the user had, oldest first
	// pending is the secret of an enrolment not yet confirmed ("" none),
	// with the instance that made it and when.
	pending     string
	pendingBy   int
	pendingAt   time.Time
	codes       []recoveryCode // of every factor set, spent or not
	lastCounter int64          // the highest TOTP counter ever sent for the user
	weak        bool           // the stored hash is below serve's policy (the CLI wrote it)
	changes     int            // how many passwords were made for the user
	// link is the user's live password reset link (nil for none), and
	// deadLinks the links made for the user that died since, oldest
	// first (resetops_test.go).
	link      *resetLink
	deadLinks []*resetLink
}

// A recoveryCode is one of the codes a confirm handed out.
type recoveryCode struct {
	code    string
	factors int  // the factor set it belongs to
	spent   bool // accepted once, or its fate is unknown: never sent again as a good code
}

func (u *userModel) cur() userState { return u.history[len(u.history)-1].state }

// A tokenState is what the contract says of a token.
type tokenState int

const (
	live      tokenState = iota // accepted by every instance, every time
	dying                       // killed: refused everywhere from deadline on
	doomed                      // issued on a state the directory had left: refused from deadline on
	uncertain                   // may be either: the first answer after deadline decides, for good
)

func (s tokenState) String() string {
	return [...]string{"live", "dying", "doomed", "uncertain"}[s]
}

// A token is one token the walk holds: a session, or a personal access
// token (pat set).
type token struct {
	id     int    // #id in the steps' descriptions
	user   string // whose
	value  string
	origin string // how it was issued, for failures
	state  tokenState
	// pat is what the walk knows of a personal access token; nil for a
	// session.
	pat *patInfo
	// actor is the instance that revoked a dying token through the API,
	// which must refuse it at once; -1 for none.
	actor     int
	killedAt  time.Time
	deadline  time.Time // dying, doomed, uncertain: every instance refuses it from then on (decides, for uncertain)
	refusedAt time.Time // the first 401 seen anywhere; zero for none
	checked   bool      // dying: the checks after its death have begun
	settled   int       // checks since its deadline that found it refused everywhere
	fromCheck bool      // issued by a check's login: may be forgotten when the user has many
}

func (tk *token) String() string {
	kind := ""
	if tk.pat != nil {
		kind = "personal access token " + tk.pat.name + " [" + strings.Join(tk.pat.scopes, " ") + "], "
	}
	return fmt.Sprintf("#%d (%s%s's, %s, %s)", tk.id, kind, tk.user, tk.origin, tk.state)
}

// A patInfo is what the walk knows of a personal access token beside what
// every token has.
type patInfo struct {
	id        string // the token's id; "" until the walk learns it (the CLI prints only the token)
	name      string
	scopes    []string
	expiresAt time.Time
	createdOn int       // the instance whose API made it; -1 for the CLI
	createdAt time.Time // when the request was sent
	// exactExpiry: expiresAt is the server's (the API's reply), not the
	// walk's estimate of the CLI's.
	exactExpiry bool
	// refusedOn are the instances that have refused it: a personal access
	// token dies in the directory, not in a shared store, so an instance
	// that has not reloaded may accept it within the directory's bound
	// after another refused it, but no instance accepts it again once it
	// has refused it itself.
	refusedOn map[int]bool
}

// has reports whether the token carries scope.
func (p *patInfo) has(scope string) bool { return slices.Contains(p.scopes, scope) }

// A model is the reference: what API.md says the fleet holds.
type model struct {
	n      int // instances
	names  []string
	users  map[string]*userModel
	tokens []*token
	nextID int
	// floor[i][name] is the index in the user's history that instance i
	// has surely seen: it made that change, or it started or reloaded
	// since.
	floor []map[string]int
	// sharedStore: the instances share one token store (else there is one
	// instance, on the memory store, whose restart loses every token).
	sharedStore bool
	// admin is the walk's admin (adminops_test.go): a user of the model
	// beside names, whom no step draws, so that no operation but the
	// admin's own attempts on themselves ever targets them.
	admin string
}

// initialUsers are the users of a fresh fleet; spare is added later by
// `user add`.
var (
	initialUsers = []string{"alice", "bob", "carol"}
	spareUser    = "dave"
)

func newModel(n int, sharedStore bool, start time.Time) *model {
	m := &model{n: n, users: map[string]*userModel{}, sharedStore: sharedStore}
	for _, name := range append(slices.Clone(initialUsers), spareUser) {
		u := &userModel{}
		st := userState{}
		if name != spareUser {
			st = userState{exists: true, password: u.newPassword(name)}
			u.weak = true
		}
		u.history = []version{{at: start, state: st}}
		m.users[name] = u
		m.names = append(m.names, name)
	}
	m.admin = adminName
	m.users[adminName] = &userModel{history: []version{{at: start, state: userState{exists: true, password: passwordNo(adminName, 1)}}}, changes: 1, weak: true}
	for range n {
		floor := map[string]int{}
		for _, name := range m.everyone() {
			floor[name] = 0
		}
		m.floor = append(m.floor, floor)
	}
	return m
}

// everyone returns the users the checks log in: names and the admin.
func (m *model) everyone() []string {
	return append(slices.Clone(m.names), m.admin)
}

// newPassword returns a password the user never had, within the policy.
func (u *userModel) newPassword(name string) string {
	u.changes++
	return passwordNo(name, u.changes)
}

// passwordNo is the nth password newPassword makes for user name.
func passwordNo(name string, n int) string {
	return fmt.Sprintf("%s-walks-%d-correct-horse", name, n)
}

// change records a new state of user name, made at at by the CLI or by
// instance actor's API.
func (m *model) change(name string, st userState, at time.Time, cli, kills bool, actor int) {
	u := m.users[name]
	if p := u.cur().password; p != "" && p != st.password {
		u.old = append(u.old, p)
	}
	u.history = append(u.history, version{at: at, cli: cli, kills: kills, state: st})
	if !cli {
		m.floor[actor][name] = len(u.history) - 1
	}
}

// seenAll records that instance i has seen every change (it started, or
// reloaded the directory).
func (m *model) seenAll(i int) {
	for _, name := range m.everyone() {
		m.floor[i][name] = len(m.users[name].history) - 1
	}
}

// possible returns the indices of the user's versions instance i may be
// answering from at now: from the newest of those it has surely seen
// (its floor, or the last one older than the directory's bound) to the
// latest.
func (m *model) possible(i int, name string, now time.Time) []int {
	u := m.users[name]
	from := m.floor[i][name]
	for j := len(u.history) - 1; j > from; j-- {
		if !u.history[j].at.After(now.Add(-directoryBound)) {
			from = j
			break
		}
	}
	var idx []int
	for j := from; j < len(u.history); j++ {
		idx = append(idx, j)
	}
	return idx
}

// settled reports whether instance i surely answers from the user's
// latest version.
func (m *model) settled(i int, name string, now time.Time) bool {
	return len(m.possible(i, name, now)) == 1
}

// issue adds a token that instance i handed out at now for user name,
// issued on one of the versions in ok (those that would have handed it
// out): live when every such version is the latest or joined to it by
// changes that kill nothing; doomed when the latest would not have handed
// it out; uncertain otherwise.
func (m *model) issue(name, value, origin string, ok []int, now time.Time, fromCheck bool) *token {
	u := m.users[name]
	last := len(u.history) - 1
	tk := &token{id: m.nextID, user: name, value: value, origin: origin, actor: -1, fromCheck: fromCheck}
	m.nextID++
	switch {
	case !slices.Contains(ok, last):
		tk.state = doomed
	case m.joined(name, ok[0]):
		tk.state = live
	default:
		tk.state = uncertain
	}
	if tk.state != live {
		tk.deadline = m.deathDeadline(name, now)
	}
	m.tokens = append(m.tokens, tk)
	m.forgetChecks(name)
	return tk
}

// joined reports whether no change after version j killed tokens.
func (m *model) joined(name string, j int) bool {
	for _, v := range m.users[name].history[j+1:] {
		if v.kills {
			return false
		}
	}
	return true
}

// deathDeadline is when a token issued at now on a state that the changes
// still within the directory's bound may have left must be refused
// everywhere: a change through the API reaches the fleet through the
// store (storeBound from now), the CLI's within directoryBound of its
// exit.
func (m *model) deathDeadline(name string, now time.Time) time.Time {
	d := now.Add(storeBound)
	for _, v := range m.users[name].history {
		if v.cli && v.at.Add(directoryBound).After(d) {
			d = v.at.Add(directoryBound)
		}
	}
	return d
}

// maxLiveChecks is how many live tokens a check's logins keep per user:
// the older ones are forgotten (they stay in the store, untested) so that
// each step's checks stay quick.
const maxLiveChecks = 4

func (m *model) forgetChecks(name string) {
	var n int
	for i := len(m.tokens) - 1; i >= 0; i-- {
		tk := m.tokens[i]
		if tk.user == name && tk.fromCheck && tk.state == live {
			n++
			if n > maxLiveChecks {
				m.tokens = slices.Delete(m.tokens, i, i+1)
			}
		}
	}
}

// kill records that tk died at now: through instance actor's API (the
// store's bound), or through the CLI (actor -1, the directory's bound).
// A personal access token lives in the directory alone: the instance that
// revoked it refuses it at once, the instances sharing its token store
// within the store's bound (it tells them through the store), every other
// within the directory's bound.
func (m *model) kill(tk *token, now time.Time, actor int) {
	deadline := now.Add(directoryBound)
	if actor >= 0 && (tk.pat == nil || m.sharedStore) {
		deadline = now.Add(storeBound)
	}
	if tk.state == dying && !tk.deadline.After(deadline) {
		return
	}
	if tk.state == dying && tk.actor >= 0 && actor < 0 {
		return
	}
	tk.state, tk.actor, tk.killedAt, tk.deadline, tk.checked = dying, actor, now, deadline, false
}

// killUser kills every session of user name except keep (nil for none)
// and, when pats, every personal access token of the user too.
func (m *model) killUser(name string, now time.Time, actor int, keep *token, pats bool) {
	for _, tk := range m.tokens {
		if tk.user == name && tk != keep && (tk.pat == nil || pats) {
			m.kill(tk, now, actor)
		}
	}
}

// liveTokens returns the user's live sessions, oldest first.
func (m *model) liveTokens(name string) []*token {
	var out []*token
	for _, tk := range m.tokens {
		if tk.user == name && tk.state == live && tk.pat == nil {
			out = append(out, tk)
		}
	}
	return out
}

// An outcome is what a login answers.
type outcome string

const (
	granted     outcome = "200"
	mfaRequired outcome = "mfa_required"
	refused     outcome = "invalid_credentials"
)

// loginOutcome is what a login of st with pw (and, when otp is not "",
// that one-step code, valid for the versions codeOK accepts) answers.
func loginOutcome(st userState, pw, otp string, codeOK bool) outcome {
	switch {
	case !st.exists || st.disabled || st.password != pw:
		return refused
	case st.totp == "":
		return granted
	case otp == "":
		return mfaRequired
	case codeOK:
		return granted
	}
	return refused
}
