package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"authsvc/internal/tokens"

	"github.com/redis/go-redis/v9"
)

// The junk-token part (issue 30): a flood of made-up tokens on an authsvc
// on Redis, against its rate with a live session, counting the Redis
// commands each kind of request costs (INFO commandstats before and after
// every run, as bench/rediscost does). A personal access token whose
// checksum fails is refused before any store or directory is read: no
// command. A made-up 40-hex session token has the form of a real one, so
// only the store can refuse it: a command each. wrk sends one fixed
// header a run, so every request of a run bears the same junk token; the
// server cannot have cached that refusal, since it looks nothing up.

// junkKinds are the Authorization values the part floods with, in order;
// the live session's is first, as the yardstick.
const (
	junkSession    = "session"
	junkLivePAT    = "pat"
	junkPATKind    = "junk-pat"
	junkSessionKey = "junk-session"
)

// junkLabel is a kind's name in the table.
func junkLabel(kind string) string {
	switch kind {
	case junkSession:
		return "live session (Token, 40 hex)"
	case junkLivePAT:
		return "live personal access token"
	case junkPATKind:
		return "junk personal access token"
	case junkSessionKey:
		return "junk session token (40 hex)"
	}
	return kind
}

// A junkRun is one wrk run of one kind, with the Redis commands counted
// across it (by name, INFO excluded).
type junkRun struct {
	wrk   wrkResult
	calls map[string]int64
}

// junkResult is the junk-token part's measure.
type junkResult struct {
	kinds []string             // measured, in order
	runs  map[string][]junkRun // by kind
	idle  []map[string]int64   // Redis commands in a window of the same length with no requests
	err   error
}

// commands is the number of Redis commands in calls.
func commands(calls map[string]int64) int64 {
	var n int64
	for _, v := range calls {
		n += v
	}
	return n
}

// linkCheck is the command the store's cache sends on its invalidation
// link every 20 ms whatever the load (redisstore's pingInterval): 50 a
// second an instance, requests or none, so not a request's cost.
const linkCheck = "ping"

// requestCommands is the number of Redis commands in calls but the
// cache's link checks.
func requestCommands(calls map[string]int64) int64 { return commands(calls) - calls[linkCheck] }

// perRequest is the kind's Redis commands per request over its runs, the
// cache's link checks left out, their number, the requests, and every
// command by name (summed over the runs).
func (r junkResult) perRequest(kind string) (per float64, n int64, req int, byName map[string]int64) {
	byName = make(map[string]int64)
	for _, run := range r.runs[kind] {
		req += run.wrk.requests
		for k, v := range run.calls {
			byName[k] += v
		}
	}
	n = requestCommands(byName)
	if req > 0 {
		per = float64(n) / float64(req)
	}
	return per, n, req, byName
}

// rate is the median rate of the kind's runs (all replies: the junk ones
// are 401s).
func (r junkResult) rate(kind string) float64 { return median(field(r.wrkRuns(kind), rps)) }

func (r junkResult) wrkRuns(kind string) []wrkResult {
	var ws []wrkResult
	for _, run := range r.runs[kind] {
		ws = append(ws, run.wrk)
	}
	return ws
}

// redisCalls returns Redis's command counts by name since it started,
// from INFO commandstats, INFO itself left out (the driver's own).
func redisCalls(ctx context.Context, c *redis.Client) (map[string]int64, error) {
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	calls := make(map[string]int64)
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name == "cmdstat_info" {
			continue
		}
		num, _, _ := strings.Cut(rest, ",")
		v, _ := strconv.ParseInt(num, 10, 64)
		calls[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return calls, nil
}

// callsSince is after − before, by name, the unchanged left out.
func callsSince(before, after map[string]int64) map[string]int64 {
	d := make(map[string]int64)
	for k, v := range after {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// junkPAT returns a personal access token with its last checksum
// character changed: its form, and a checksum that fails.
func junkPAT() (string, error) {
	tok, _ := tokens.NewPAT()
	last := "0"
	if strings.HasSuffix(tok, last) {
		last = "1"
	}
	junk := tok[:len(tok)-1] + last
	if tokens.ValidPAT(junk) {
		return "", fmt.Errorf("junk token %q passes the checksum", junk)
	}
	return junk, nil
}

// junkTargets returns the part's targets on the server at url: a live
// session of reader, a live personal access token (pat, if any) and the
// two junk kinds, each checked once to answer as its kind should.
func (d *driver) junkTargets(url, pat string) ([]*target, error) {
	session, err := d.login(url, "reader")
	if err != nil {
		return nil, err
	}
	junk, err := junkPAT()
	if err != nil {
		return nil, err
	}
	made, _ := tokens.New()
	ts := []*target{{name: junkSession, url: url, token: session}}
	if pat != "" {
		ts = append(ts, &target{name: junkLivePAT, url: url, token: pat, auth: "Bearer " + pat})
	}
	ts = append(ts,
		&target{name: junkPATKind, url: url, token: junk, auth: "Bearer " + junk},
		&target{name: junkSessionKey, url: url, token: made})
	return ts, d.checkJunkReplies(ts)
}

// checkJunkReplies checks that the live kinds answer 200 and the junk
// ones 401 (not 429: a throttle would measure something else).
func (d *driver) checkJunkReplies(ts []*target) error {
	for _, t := range ts {
		want := http.StatusOK
		if t.name == junkPATKind || t.name == junkSessionKey {
			want = http.StatusUnauthorized
		}
		req, err := http.NewRequestWithContext(d.ctx, "GET", t.url+"/api/auth/info", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", t.authorization())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("junk part: /info with a %s: %s; want %d", junkLabel(t.name), resp.Status, want)
		}
	}
	return nil
}

// junk runs the junk-token part: authsvc on the Redis at -redis-url (its
// default cache on), reading -users, flooded in alternating rounds with
// each kind, and an idle window a round for the commands nobody's
// requests cause.
func (d *driver) junk() junkResult {
	c := d.cfg
	r := junkResult{runs: map[string][]junkRun{}}
	if c.redisURL == "" {
		r.err = fmt.Errorf("%s", c.redisSkip)
		return r
	}
	d.logf("== junk tokens on Redis: %d alternating rounds of %s per kind, Redis commands counted", c.junkRounds, c.infoDur)
	s, _, err := d.startServer("junk-redis", "--users", c.users, "--store", c.redisURL)
	if err != nil {
		r.err = err
		return r
	}
	defer s.stop()
	opts, err := redis.ParseURL(c.redisURL)
	if err != nil {
		r.err = err
		return r
	}
	rc := redis.NewClient(opts)
	defer rc.Close()
	pat := ""
	if t := d.targets["authsvc-pat"]; t != nil {
		pat = strings.TrimPrefix(t.auth, "Bearer ")
	}
	ts, err := d.junkTargets(s.url, pat)
	if err != nil {
		r.err = err
		return r
	}
	for _, t := range ts {
		r.kinds = append(r.kinds, t.name)
	}
	// Warm-up; every run of the part is named "junk" (its 401s are
	// meant: the table's count of non-2xx /info replies leaves them out).
	for _, t := range ts {
		if _, err := d.wrk("junk", t, false, c.conns, time.Second); err != nil {
			r.err = err
			return r
		}
	}
	for i := range c.junkRounds {
		for _, t := range rotate(ts, i) {
			before, err := redisCalls(d.ctx, rc)
			if err != nil {
				r.err = err
				return r
			}
			w, err := d.wrk("junk", t, false, c.conns, c.infoDur)
			if err != nil {
				r.err = err
				return r
			}
			after, err := redisCalls(d.ctx, rc)
			if err != nil {
				r.err = err
				return r
			}
			calls := callsSince(before, after)
			d.logf("junk   %-16s Redis commands %d (%s)", t.name, commands(calls), callText(calls, 1))
			r.runs[t.name] = append(r.runs[t.name], junkRun{wrk: w, calls: calls})
		}
		before, err := redisCalls(d.ctx, rc)
		if err == nil {
			err = d.sleep(c.infoDur)
		}
		var after map[string]int64
		if err == nil {
			after, err = redisCalls(d.ctx, rc)
		}
		if err != nil {
			r.err = err
			return r
		}
		r.idle = append(r.idle, callsSince(before, after))
	}
	// Still refused, not throttled, after the floods.
	r.err = d.checkJunkReplies(ts)
	return r
}

// callText lists commands by name, most first, each as a count divided
// by per (the requests, or 1), e.g. "evalsha 1.00, get 0.01".
func callText(calls map[string]int64, per float64) string {
	names := slices.Collect(maps.Keys(calls))
	slices.SortFunc(names, func(a, b string) int {
		if calls[a] != calls[b] {
			return int(calls[b] - calls[a])
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, n := range names {
		if per == 1 {
			parts = append(parts, fmt.Sprintf("%s %d", n, calls[n]))
		} else {
			parts = append(parts, fmt.Sprintf("%s %.4f", n, float64(calls[n])/per))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
