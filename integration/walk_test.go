package integration

import (
	"authsvc/integration/harness"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestModelFleet drives real fleets of authsvc (processes, on each
// topology) through random, seeded walks of operations, and after every
// step checks every token the walk holds and every password it knows, on
// every instance, against a small model of API.md (Tokens, password
// change, Sessions, Two-factor, Personal access tokens, introspection,
// Password reset, Command line, Operations, Users) and
// docs/design/tokens.md: a live
// token, session or personal access token, is never refused anywhere, a
// dead one is refused at once by the instance that revoked it, within the
// store's bound by the others and within the directory's bound after a
// user or token command (patops_test.go has the personal access tokens'
// rule, resetops_test.go the reset links'); the same for the changes an
// admin makes through the admin API (adminops_test.go), within the
// store's bound; no answer is a 5xx.
// A failure is shrunk to the shortest step list that still fails the same
// way, and printed with its seed and a command that replays it.
//
// The environment chooses the walks (make model sets them):
// AUTHSVC_MODEL_SEED (first seed; default 1), AUTHSVC_MODEL_SEEDS (seeds
// per topology; default 2), AUTHSVC_MODEL_STEPS (steps per walk; default
// 25), AUTHSVC_MODEL_TOPOLOGY (one topology's name), AUTHSVC_MODEL_REPLAY
// (a step list, one step per line or ';'-separated, replayed instead of a
// walk), AUTHSVC_MODEL_SHRINK (how long shrinking may take; default 30s)
// and AUTHSVC_MODEL_WITHOUT (operations never drawn, comma-separated: to
// look past a known bug).
func TestModelFleet(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	harness.RequireBinary(t)
	cfg := readConfig(t)
	for _, topo := range topologies {
		if cfg.topology != "" && cfg.topology != topo.name {
			continue
		}
		t.Run(topo.name, func(t *testing.T) {
			t.Parallel()
			makeDir := topo.prepare(t)
			var lags, patLags []time.Duration
			seeds := cfg.seeds
			if topo.seeds > 0 && !cfg.seedsGiven {
				seeds = topo.seeds
			}
			for k := range seeds {
				seed := cfg.seed + uint64(k)
				res := walk(t, topo, makeDir, seed, cfg.replay, cfg.steps)
				lags = append(lags, res.lags...)
				patLags = append(patLags, res.patLags...)
				if res.failure == nil {
					t.Logf("seed %d: %d steps (%d instances, reload %s) passed in %v", seed, len(res.steps), topo.n(seed), reloadText(topo, seed), res.took.Round(time.Millisecond))
					if testing.Verbose() {
						t.Logf("seed %d's steps:\n  %s", seed, strings.Join(res.trace, "\n  "))
					}
					continue
				}
				if res.failure.kind == "setup" {
					t.Fatalf("seed %d: %s", seed, res.failure.msg)
				}
				small := shrink(t, topo, makeDir, seed, res, cfg.shrinkFor)
				t.Errorf("%s", report(topo, seed, res, small))
			}
			if len(lags) > 0 {
				slices.Sort(lags)
				t.Logf("revocations through the API reached the other instances within max %v, p99 %v (%d seen; the contract's bound: %v p99)",
					lags[len(lags)-1].Round(time.Microsecond), lags[(len(lags)*99)/100].Round(time.Microsecond), len(lags), storeBound)
			}
			if len(patLags) > 0 {
				slices.Sort(patLags)
				t.Logf("personal access tokens revoked through the API reached the other instances within max %v, p99 %v (%d seen; the contract's bound: %v p99)",
					patLags[len(patLags)-1].Round(time.Microsecond), patLags[(len(patLags)*99)/100].Round(time.Microsecond), len(patLags), storeBound)
			}
		})
	}
}

// The admin's operations join the table after ops_test.go's init has set
// it: a package's files initialise in the order of their names, and
// readConfig fails the test should that ever change.
// A config is the walks a run makes.
type config struct {
	seed  uint64
	seeds int
	// seedsGiven: seeds is the environment's, which every topology walks
	// (make model); otherwise a topology may walk fewer (topology.seeds).
	seedsGiven bool
	steps      int
	topology   string
	replay     []step
	shrinkFor  time.Duration
}

func readConfig(t *testing.T) config {
	cfg := config{seed: 1, seeds: 2, steps: 25, shrinkFor: 30 * time.Second}
	env := func(name string, parse func(string) error) {
		if v := os.Getenv(name); v != "" {
			if err := parse(v); err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
		}
	}
	env("AUTHSVC_MODEL_SEED", func(v string) (err error) { cfg.seed, err = strconv.ParseUint(v, 10, 64); return })
	env("AUTHSVC_MODEL_SEEDS", func(v string) (err error) { cfg.seeds, err = strconv.Atoi(v); cfg.seedsGiven = true; return })
	env("AUTHSVC_MODEL_STEPS", func(v string) (err error) { cfg.steps, err = strconv.Atoi(v); return })
	env("AUTHSVC_MODEL_SHRINK", func(v string) (err error) { cfg.shrinkFor, err = time.ParseDuration(v); return })
	env("AUTHSVC_MODEL_WITHOUT", func(v string) error {
		for _, name := range strings.Split(v, ",") {
			op := opByName(strings.TrimSpace(name))
			if op == nil {
				return fmt.Errorf("no operation %q", name)
			}
			op.weight = 0
		}
		return nil
	})
	env("AUTHSVC_MODEL_TOPOLOGY", func(v string) error {
		for _, topo := range topologies {
			if topo.name == v {
				cfg.topology = v
				return nil
			}
		}
		return fmt.Errorf("no such topology")
	})
	env("AUTHSVC_MODEL_REPLAY", func(v string) error {
		for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == '\n' }) {
			if strings.TrimSpace(line) == "" {
				continue
			}
			s, err := parseStep(line)
			if err != nil {
				return fmt.Errorf("step %q: %v", line, err)
			}
			cfg.replay = append(cfg.replay, s)
		}
		cfg.seeds = 1
		return nil
	})
	return cfg
}

// A failure is a step whose answer, or whose check, broke the contract.
type failure struct {
	step int    // 1-based, in the steps the walk ran
	kind string // what broke: a failure shrinks to one of the same kind
	msg  string
}

func (f *failure) Error() string { return fmt.Sprintf("step %d: %s: %s", f.step, f.kind, f.msg) }

// A result is one walk: the steps it ran, what each did, and how it ended.
type result struct {
	steps   []step
	trace   []string // per step: the step and what it did to the model
	failure *failure
	logs    string // the instances' logs, when it failed
	lags    []time.Duration
	patLags []time.Duration
	took    time.Duration
}

// A walker runs one walk on one fleet.
type walker struct {
	t      *testing.T
	f      *fleet
	m      *model
	stepNo int
	notes  []string        // what the current step chose: tokens, codes
	lags   []time.Duration // how long revocations through the API took to reach the other instances
	// patLags: how long after a revocation of a personal access token
	// through the API another instance sharing the store refused it.
	patLags []time.Duration
	// adminSession and adminPAT are the admin's credentials
	// (adminops_test.go), made on first use; resetURL is serve's
	// --reset-url, the pattern of the admin API's links.
	adminSession, adminPAT *token
	resetURL               string
}

// note records what the current step chose, for its line in a report.
func (w *walker) note(format string, args ...any) {
	w.notes = append(w.notes, fmt.Sprintf(format, args...))
}

func (w *walker) fail(kind, format string, args ...any) *failure {
	return &failure{step: w.stepNo, kind: kind, msg: fmt.Sprintf(format, args...)}
}

// walk runs steps (or, when steps is nil, n steps drawn from seed) on a
// fresh fleet of topo, checking after each.
func walk(t *testing.T, topo topology, makeDir func(*testing.T, string) (string, []string), seed uint64, steps []step, n int) result {
	start := time.Now()
	m := newModel(topo.n(seed), topo.sharedStore, start)
	withAdmin, resetURL, addErr := adminFleet(makeDir, m, seed)
	f, err := startFleet(t, topo, withAdmin, topo.n(seed), seed, m)
	if err == nil && *addErr != nil {
		f.close()
		err = *addErr
	}
	if err != nil {
		return result{failure: &failure{kind: "setup", msg: err.Error()}}
	}
	defer f.close()
	for i := range f.insts {
		m.seenAll(i)
	}
	w := &walker{t: t, f: f, m: m, resetURL: resetURL}
	var res result
	// Step 0, a check alone: its logins give every user live tokens.
	if err := w.check(); err != nil {
		res.failure = asFailure(w, err)
		res.failure.msg += " (in the check before the first step)"
		res.logs = f.logs()
		return res
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for k := 0; steps == nil && k < n || steps != nil && k < len(steps); k++ {
		w.stepNo = len(res.steps) + 1
		before := w.snapshot()
		w.notes = nil
		var s step
		var err error
		if steps != nil {
			s = steps[k]
			if s.inst >= len(f.insts) {
				continue
			}
			if err = opByName(s.op).run(w, s); err == errSkip {
				continue
			}
		} else {
			for range 100 {
				w.notes = nil
				s = draw(rng, len(f.insts), m.names)
				if err = opByName(s.op).run(w, s); err != errSkip {
					break
				}
			}
			if err == errSkip {
				continue
			}
		}
		res.steps = append(res.steps, s)
		if err == nil {
			err = w.check()
		}
		res.trace = append(res.trace, s.String()+"  — "+strings.Join(append(w.notes, w.diff(before)), "; "))
		if err != nil {
			res.failure = asFailure(w, err)
			break
		}
	}
	if res.failure == nil {
		// Every death still within its bound must happen: wait for the
		// last deadline, then check once more.
		var last time.Time
		for _, tk := range m.tokens {
			if tk.state != live && tk.deadline.After(last) {
				last = tk.deadline
			}
		}
		time.Sleep(time.Until(last))
		w.stepNo = len(res.steps)
		if err := w.check(); err != nil {
			res.failure = asFailure(w, err)
			res.failure.msg += " (in the final check, once every bound had passed)"
		}
	}
	if res.failure != nil {
		res.logs = f.logs()
	}
	res.lags, res.patLags, res.took = w.lags, w.patLags, time.Since(start)
	return res
}

func asFailure(w *walker, err error) *failure {
	if f, ok := err.(*failure); ok {
		if f.step == 0 {
			f.step = w.stepNo
		}
		return f
	}
	return w.fail("error", "%v", err)
}

// draw draws a step: an operation by weight, an instance, a user, and the
// numbers that choose a token, code or variant when it runs.
func draw(rng *rand.Rand, n int, names []string) step {
	total := 0
	for _, op := range operations {
		total += op.weight
	}
	r := rng.IntN(total)
	var name string
	for _, op := range operations {
		if r < op.weight {
			name = op.name
			break
		}
		r -= op.weight
	}
	return step{op: name, inst: rng.IntN(n), user: names[rng.IntN(len(names))], pick: rng.IntN(1000), alt: rng.IntN(1000)}
}

// snapshot records each token's state, for diff.
func (w *walker) snapshot() map[int]tokenState {
	s := map[int]tokenState{}
	for _, tk := range w.m.tokens {
		s[tk.id] = tk.state
	}
	return s
}

// diff says what the last step did to the tokens.
func (w *walker) diff(before map[int]tokenState) string {
	var out []string
	for _, tk := range w.m.tokens {
		was, ok := before[tk.id]
		switch {
		case !ok && !tk.fromCheck:
			out = append(out, fmt.Sprintf("issued #%d %s (%s)", tk.id, tk.state, tk.origin))
		case !ok && tk.state != live: // a check's live tokens are many, and no news
			out = append(out, fmt.Sprintf("#%d %s from the %s", tk.id, tk.state, tk.origin))
		case was != tk.state:
			out = append(out, fmt.Sprintf("#%d %s→%s", tk.id, was, tk.state))
		}
	}
	if len(out) == 0 {
		return "no token changed"
	}
	return strings.Join(out, "; ")
}

// call sends one request; a transport error or a 5xx is a failure (every
// server is up whenever the walk sends one).
func (w *walker) call(i int, method, path, token, body string) (reply, error) {
	return w.callAs(i, method, path, token, "application/json", body)
}

// callAs is call with a body of media type ctype.
func (w *walker) callAs(i int, method, path, token, ctype, body string) (reply, error) {
	r, err := w.f.insts[i].doAs(method, path, token, ctype, body)
	if err != nil {
		return r, w.fail("transport", "%v", err)
	}
	if r.status >= 500 {
		return r, w.fail("5xx", "%s %s on %s = %s; want no 5xx while every server is up", method, path, w.f.insts[i].name, r)
	}
	return r, nil
}

// want sends a request with live token tk and wants status.
func (w *walker) want(i int, method, path string, tk *token, body string, status int) error {
	r, err := w.call(i, method, path, tk.value, body)
	if err != nil {
		return err
	}
	if r.status == status {
		return nil
	}
	kind := "unexpected"
	if r.status == 401 {
		kind = "live-token-refused"
	}
	return w.fail(kind, "%s %s on %s with live token %s = %s; want %d", method, path, w.f.insts[i].name, tk, r, status)
}

// check checks every token the walk holds and every password it knows on
// every instance.
func (w *walker) check() error {
	for _, tk := range slices.Clone(w.m.tokens) {
		if err := w.checkToken(tk); err != nil {
			return err
		}
	}
	w.m.tokens = slices.DeleteFunc(w.m.tokens, func(tk *token) bool { return tk.state != live && tk.settled >= 2 })
	for _, name := range w.m.everyone() {
		u := w.m.users[name]
		pws := u.old[max(0, len(u.old)-2):]
		if u.cur().exists {
			pws = append(slices.Clone(pws), u.cur().password)
		}
		for _, pw := range pws {
			for i := range w.f.insts {
				if _, err := w.login(i, name, pw, 0, "check"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// info asks instance i about tk: 200 with its user, or 401 invalid_token.
// A personal access token without the info scope is answered 403
// insufficient_scope while it lives, which info returns as 200: the
// token was accepted, and refused the endpoint.
func (w *walker) info(i int, tk *token) (int, error) {
	r, err := w.call(i, "GET", "/api/auth/info", tk.value, "")
	if err != nil {
		return 0, err
	}
	noScope := tk.pat != nil && !tk.pat.has("info")
	switch {
	case r.status == 200 && r.str("username") == tk.user && !noScope:
	case r.status == 403 && r.code() == "insufficient_scope" && noScope:
		return 200, nil
	case r.status == 401 && r.code() == "invalid_token":
	case noScope:
		return 0, w.fail("info", "GET /api/auth/info on %s with %s = %s; want 403 insufficient_scope or 401 invalid_token", w.f.insts[i].name, tk, r)
	default:
		return 0, w.fail("info", "GET /api/auth/info on %s with %s = %s; want 200 as %s or 401 invalid_token", w.f.insts[i].name, tk, r, tk.user)
	}
	return r.status, nil
}

// refusedBy polls instance i with tk until it is refused or until, and
// reports when it was refused (zero for never).
func (w *walker) refusedBy(i int, tk *token, until time.Time) (time.Time, error) {
	for {
		st, err := w.info(i, tk)
		if err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		if st == 401 {
			return now, nil
		}
		if now.After(until) {
			return time.Time{}, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkToken checks tk on every instance against its state.
func (w *walker) checkToken(tk *token) error {
	if tk.pat != nil {
		return w.checkPAT(tk)
	}
	now := time.Now()
	if tk.state == uncertain && !now.Before(tk.deadline) && tk.refusedAt.IsZero() {
		// Its bound has passed: the first answer decides, for good.
		st, err := w.info(0, tk)
		if err != nil {
			return err
		}
		if st == 200 {
			tk.state = live
		} else {
			tk.state, tk.refusedAt = doomed, time.Now()
		}
	}
	switch {
	case tk.state == live:
		return w.acceptedEverywhere(tk)
	case tk.state == dying && tk.actor >= 0 && !tk.checked:
		return w.revokedAtOnce(tk, true)
	case now.Before(tk.deadline):
		// Within its bound either answer is right, but once an instance
		// has refused it every instance must (within the store's bound).
		return w.observeAll(tk)
	default:
		// Past its bound: refused everywhere.
		return w.refusedEverywhere(tk)
	}
}

// acceptedEverywhere checks that every instance accepts live token tk.
func (w *walker) acceptedEverywhere(tk *token) error {
	for i, inst := range w.f.insts {
		st, err := w.info(i, tk)
		if err != nil {
			return err
		}
		if st != 200 {
			return w.fail("live-token-refused", "live token %s on %s: GET /api/auth/info = 401 invalid_token; want it accepted (a live token is live on every instance, a new one at once)", tk, inst.name)
		}
	}
	return nil
}

// revokedAtOnce checks tk, revoked through instance tk.actor's API:
// refused at once by that instance and, when others, within the store's
// bound by every other (the lags are reported).
func (w *walker) revokedAtOnce(tk *token, others bool) error {
	tk.checked = true
	actor := w.f.insts[tk.actor]
	st, err := w.info(tk.actor, tk)
	if err != nil {
		return err
	}
	if st != 401 && (tk.pat == nil || time.Now().Before(tk.pat.expiresAt)) {
		return w.fail("revoked-token-accepted", "token %s, revoked through the API on %s, accepted by %s itself %v later; want 401 at once", tk, actor.name, actor.name, time.Since(tk.killedAt).Round(time.Millisecond))
	}
	w.refused(tk.actor, tk, time.Now())
	for i, inst := range w.f.insts {
		if i == tk.actor || !others {
			continue
		}
		at, err := w.refusedBy(i, tk, tk.killedAt.Add(storeBound+grace))
		if err != nil {
			return err
		}
		if at.IsZero() {
			return w.fail("revoked-token-accepted", "token %s, revoked through the API on %s, still accepted by %s %v later; want 401 within %v", tk, actor.name, inst.name, time.Since(tk.killedAt).Round(time.Millisecond), storeBound)
		}
		if tk.pat != nil {
			w.patLags = append(w.patLags, at.Sub(tk.killedAt))
		} else {
			w.lags = append(w.lags, at.Sub(tk.killedAt))
		}
		w.refused(i, tk, at)
	}
	return nil
}

// refusedEverywhere checks that every instance refuses tk, whose bound
// has passed (within grace of it), and counts the check.
func (w *walker) refusedEverywhere(tk *token) error {
	for i, inst := range w.f.insts {
		at, err := w.refusedBy(i, tk, tk.deadline.Add(grace))
		if err != nil {
			return err
		}
		if at.IsZero() {
			return w.fail("dead-token-accepted", "token %s still accepted by %s %v after its bound ended; want 401", tk, inst.name, time.Since(tk.deadline).Round(time.Millisecond))
		}
		w.refused(i, tk, at)
	}
	tk.settled++
	return nil
}

// refused records that instance i refused tk at at.
func (w *walker) refused(i int, tk *token, at time.Time) {
	if tk.pat != nil {
		tk.pat.refusedOn[i] = true
	}
	if tk.refusedAt.IsZero() {
		tk.refusedAt = at
	}
}

// shrink replays ever shorter parts of the failed walk's steps on fresh
// fleets, keeping each that still fails the same way, until no single
// step can go or the time is up (delta debugging).
func shrink(t *testing.T, topo topology, makeDir func(*testing.T, string) (string, []string), seed uint64, failed result, budget time.Duration) result {
	deadline := time.Now().Add(budget)
	best := failed
	steps := best.steps[:best.failure.step]
	try := func(candidate []step) bool {
		if time.Now().After(deadline) {
			return false
		}
		res := walk(t, topo, makeDir, seed, candidate, len(candidate))
		if res.failure == nil || res.failure.kind != failed.failure.kind {
			return false
		}
		best, steps = res, res.steps[:res.failure.step]
		return true
	}
	// The failing prefix alone first: later steps never mattered.
	if len(steps) < len(failed.steps) {
		try(steps)
	}
	for chunks := 2; len(steps) > 1 && time.Now().Before(deadline); {
		size := (len(steps) + chunks - 1) / chunks
		removed := false
		for from := 0; from < len(steps); from += size {
			candidate := slices.Concat(steps[:from], steps[min(from+size, len(steps)):])
			if len(candidate) > 0 && try(candidate) {
				chunks = max(chunks-1, 2)
				removed = true
				break
			}
		}
		if !removed {
			if size == 1 {
				break
			}
			chunks = min(chunks*2, len(steps))
		}
	}
	return best
}

// report is a failure as the test prints it: where, what, the shortest
// steps that show it, and how to replay them.
func report(topo topology, seed uint64, first, small result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "model walk failed: topology %s, seed %d, %d instances, reload interval %s\n", topo.name, seed, topo.n(seed), reloadText(topo, seed))
	fmt.Fprintf(&b, "first failure, at step %d of the walk: %s: %s\n", first.failure.step, first.failure.kind, first.failure.msg)
	fmt.Fprintf(&b, "shrunk to %d steps; failure at step %d: %s: %s\n", small.failure.step, small.failure.step, small.failure.kind, small.failure.msg)
	var replay []string
	fmt.Fprintf(&b, "   0. (before the first step, a check: every user logs in with the current password on every instance)\n")
	for k, line := range small.trace[:min(len(small.trace), small.failure.step)] {
		fmt.Fprintf(&b, "  %2d. %s\n", k+1, line)
		replay = append(replay, small.steps[k].String())
	}
	fmt.Fprintf(&b, "replay: AUTHSVC_MODEL_TOPOLOGY=%s AUTHSVC_MODEL_SEED=%d AUTHSVC_MODEL_REPLAY='%s' go test -count=1 -run TestModelFleet ./integration\n",
		topo.name, seed, strings.Join(replay, "; "))
	fmt.Fprintf(&b, "the shrunk run's logs:\n%s", small.logs)
	return b.String()
}

func reloadText(topo topology, seed uint64) string {
	if r := topo.reloadFlags(seed); r != nil {
		return r[1]
	}
	return "1s (the default)"
}
