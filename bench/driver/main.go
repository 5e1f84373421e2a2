// Command driver is the measuring half of `make bench` (bench/run.sh starts
// the servers, Redis and PostgreSQL and writes the users files, then runs
// this). It drives every server with the same wrk settings, interleaving
// their runs round by round so that machine noise hits all of them alike,
// takes medians, measures login against the raw hash rate for argon2id and
// bcrypt, starts authsvc itself on a 1M-user file and on PostgreSQL, runs
// the Go benchmarks, and prints one table. It reports targets; it never
// fails because one is missed.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"authsvc/bench/internal/bench"
)

// A target is one server under test.
type target struct {
	name      string // key in the servers file
	label     string // in the table
	url       string // http://host:port
	token     string // a live token, for /info
	auth      string // the /info requests' Authorization value, when not "Token " + token
	loginUser string // whose logins the login parts send
}

// authorization is the Authorization value of the target's /info requests.
func (t *target) authorization() string {
	if t.auth != "" {
		return t.auth
	}
	return "Token " + t.token
}

type config struct {
	wrk, lua, bcryptrate, testbin, integrationbin, httpapibin, authsvc, serversFile, out, runsOut string
	cost                                                                                          int
	infoRounds, loginRounds, floodRounds, inprocRounds                                            int
	infoDur, loginDur, floodDur                                                                   time.Duration
	conns, loginConns, floodConns                                                                 int
	authsvcFlags, loginUser, redisSkip, clusterSkip                                               string
	bigUsers, pgURL, pgUsers, pgSkip                                                              string
	bigN, pgN                                                                                     int
	redisURL, users                                                                               string // the junk-token part's Redis and users file
	junkRounds                                                                                    int
	only                                                                                          string // "": every part; "info": the /info part alone; "reset": the reset flood alone
	resetUsers, resetSkip                                                                         string // the reset-flood part's users file of resetN users
	resetN, resetRounds, resetRate                                                                int
	resetDur                                                                                      time.Duration
}

// A part is one measured part of the bench with its replies: login parts
// by status (a throttled part shows its 429s), /info parts as requests and
// non-2xx replies (wrk counts no more without a script, which would slow it).
type part struct {
	name             string
	statuses         map[int]int
	requests, non2xx int
}

type driver struct {
	cfg      config
	ctx      context.Context
	targets  map[string]*target
	order    []string // target names as the servers file lists them
	runs     *os.File // every raw result, for the curious
	password string   // of every bench user
	slots    int      // the server's default --password-slots: GOMAXPROCS
	parts    []*part
}

func main() {
	var c config
	flag.StringVar(&c.wrk, "wrk", "wrk", "wrk binary")
	flag.StringVar(&c.lua, "lua", "bench/login.lua", "wrk script that posts a login")
	flag.StringVar(&c.bcryptrate, "bcryptrate", "bench/out/bcryptrate", "bcryptrate binary (raw hash rate)")
	flag.StringVar(&c.testbin, "testbin", "bench/out/authsvc.test", "authsvc's test binary (go test -c)")
	flag.StringVar(&c.integrationbin, "integrationbin", "bench/out/faults.test", "integration/faults' test binary (go test -c ./integration/faults)")
	flag.StringVar(&c.httpapibin, "httpapibin", "bench/out/httpapi.test", "internal/httpapi's test binary (go test -c ./internal/httpapi), for the timing rows")
	flag.StringVar(&c.authsvc, "authsvc", "bench/out/authsvc", "authsvc binary, for the users-file and PostgreSQL parts")
	flag.StringVar(&c.serversFile, "servers", "bench/out/servers.txt", `servers file: lines "name url token"`)
	flag.StringVar(&c.out, "out", "bench/out/latest.txt", "where the table is saved too")
	flag.StringVar(&c.runsOut, "runs", "bench/out/runs.txt", "where every raw run result is written")
	flag.IntVar(&c.cost, "cost", 12, "bcrypt cost of the bcrypt server's users")
	flag.StringVar(&c.loginUser, "login-user", "bench", "the user the login parts log in")
	flag.IntVar(&c.infoRounds, "info-rounds", 8, "alternating /info rounds")
	flag.DurationVar(&c.infoDur, "info-duration", 2*time.Second, "one /info run")
	flag.IntVar(&c.conns, "conns", 32, "wrk connections for /info")
	flag.IntVar(&c.inprocRounds, "inproc-rounds", 7, "alternating rounds of the in-process servers")
	flag.IntVar(&c.loginRounds, "login-rounds", 3, "alternating login rounds per hash")
	flag.DurationVar(&c.loginDur, "login-duration", 4*time.Second, "one login run")
	flag.IntVar(&c.loginConns, "login-conns", 4, "Go clients for login throughput")
	flag.IntVar(&c.floodRounds, "flood-rounds", 3, "login-flood runs per hash, each after an unloaded /info run")
	flag.DurationVar(&c.floodDur, "flood-duration", 6*time.Second, "one login flood; /info is measured inside it")
	flag.IntVar(&c.floodConns, "flood-conns", 64, "wrk connections of the login flood")
	flag.StringVar(&c.authsvcFlags, "authsvc-flags", "", "authsvc's serve flags, for the table's header")
	flag.StringVar(&c.redisSkip, "redis-skip", "", "why there is no Redis server, if there is none")
	flag.StringVar(&c.clusterSkip, "cluster-skip", "", "why there is no Redis Cluster, if there is none")
	flag.StringVar(&c.bigUsers, "big-users", "", "a users file of -big-n users (bench/bigusers)")
	flag.IntVar(&c.bigN, "big-n", 1_000_000, "users in -big-users")
	flag.StringVar(&c.pgURL, "pg-url", "", "a PostgreSQL database to import -pg-users into")
	flag.StringVar(&c.pgUsers, "pg-users", "", "a users file of -pg-n users")
	flag.IntVar(&c.pgN, "pg-n", 100_000, "users in -pg-users")
	flag.StringVar(&c.pgSkip, "pg-skip", "", "why there is no PostgreSQL, if there is none")
	flag.StringVar(&c.redisURL, "redis-url", "", "a Redis for the junk-token part (it starts authsvc on it); none: the part is skipped with -redis-skip's reason")
	flag.StringVar(&c.users, "users", "bench/out/users.json", "the users file of the servers in -servers (the junk-token part's server reads it too)")
	flag.IntVar(&c.junkRounds, "junk-rounds", 5, "alternating rounds of the junk-token part")
	flag.StringVar(&c.only, "only", "", `"info": measure /info alone, every server in -servers against "baseline" (BENCH_ONLY=info); "reset": the reset flood alone, no -servers (BENCH_ONLY=reset)`)
	flag.StringVar(&c.resetUsers, "reset-users", "", "a users file of -reset-n users (bench/bigusers) for the reset-flood part; it starts two authsvc on it; none: the part is skipped with -reset-skip's reason")
	flag.StringVar(&c.resetSkip, "reset-skip", "", "why there is no -reset-users, if there is none")
	flag.IntVar(&c.resetN, "reset-n", 60_000, "users in -reset-users")
	flag.IntVar(&c.resetRounds, "reset-rounds", 3, "rounds of the reset-flood part: /info on B unloaded, then during the flood")
	flag.DurationVar(&c.resetDur, "reset-duration", 10*time.Second, "one /info run of the reset-flood part, and one flood")
	flag.IntVar(&c.resetRate, "reset-rate", 30, "reset requests a second to A during a flood")
	bench.Start("bench")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &driver{cfg: c, ctx: ctx, password: bench.Password(), slots: runtime.GOMAXPROCS(0)}
	if d.password == "" {
		log.Fatal("BENCH_PASSWORD must hold the bench users' password")
	}
	switch {
	case c.only != "" && c.only != "info" && c.only != "reset":
		log.Fatalf("-only %q: want \"info\", \"reset\" or nothing", c.only)
	case c.resetN < 2 || c.resetRate < 1 || c.resetRounds < 1:
		log.Fatal("want -reset-n ≥ 2, -reset-rate ≥ 1 and -reset-rounds ≥ 1")
	case c.only == "" && c.bigUsers == "":
		log.Fatal("-big-users is required")
	case c.only == "" && c.pgSkip == "" && (c.pgURL == "" || c.pgUsers == ""):
		log.Fatal("-pg-url and -pg-users are required, or -pg-skip REASON")
	}
	if c.only != "reset" {
		if err := d.loadServers(); err != nil {
			log.Fatal(err)
		}
	}
	runs, err := os.Create(c.runsOut)
	if err != nil {
		log.Fatal(err)
	}
	defer runs.Close()
	d.runs = runs

	table, err := d.run()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(table)
	if err := os.WriteFile(c.out, []byte(table), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("table saved to %s; raw runs in %s", c.out, c.runsOut)
}

// label is a server's name in the table.
func label(name string) string {
	switch name {
	case "baseline":
		return "baseline (bare net/http)"
	case "baseline-limits":
		return "baseline, authsvc's timeouts"
	case "authsvc":
		return "authsvc, memory store"
	case "authsvc-pat":
		return "authsvc, memory, PAT (Bearer)"
	case "authsvc-noaccess":
		return "authsvc, memory, --access-log=false"
	case "authsvc-redis":
		return "authsvc, Redis store, no cache"
	case "authsvc-redis-cache":
		return "authsvc, Redis store, cached"
	case "authsvc-cluster":
		return "authsvc, 3-primary cluster, no cache"
	case "authsvc-cluster-cache":
		return "authsvc, 3-primary cluster, cached"
	case "authsvc-bcrypt":
		return "authsvc, memory, bcrypt users"
	case "inproc-1k":
		return "1k live tokens"
	case "inproc-1m":
		return "1M live tokens"
	case "inproc-1k-nolog":
		return "1k, access log off"
	}
	return name
}

// loadServers reads the servers file: lines "name url token", or "name url
// token AUTHORIZATION…" when /info is to be sent another Authorization
// value than "Token " + token (the rest of the line, e.g. "Bearer
// authsvc_pat_…"): a row of another kind of credential is one line there.
func (d *driver) loadServers() error {
	data, err := os.ReadFile(d.cfg.serversFile)
	if err != nil {
		return err
	}
	d.targets = make(map[string]*target)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 {
			return fmt.Errorf("%s: want \"name url token [authorization]\", got %q", d.cfg.serversFile, line)
		}
		auth := strings.Join(f[3:], " ") // "" for "Token " + token
		if d.targets[f[0]] == nil {
			d.order = append(d.order, f[0])
		}
		d.targets[f[0]] = &target{name: f[0], label: label(f[0]), url: f[1], token: f[2], auth: auth, loginUser: d.cfg.loginUser}
	}
	need := []string{"baseline", "authsvc", "authsvc-bcrypt"}
	if d.cfg.only == "info" {
		need = need[:1]
	}
	for _, need := range need {
		if d.targets[need] == nil {
			return fmt.Errorf("%s: no %q server", d.cfg.serversFile, need)
		}
	}
	return nil
}

// pick returns the targets that exist among names, in order.
func (d *driver) pick(names ...string) []*target {
	var ts []*target
	for _, n := range names {
		if t := d.targets[n]; t != nil {
			ts = append(ts, t)
		}
	}
	return ts
}

func (d *driver) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	log.Print(msg)
	fmt.Fprintln(d.runs, msg)
}

// part returns the part named name, added at the end if new.
func (d *driver) part(name string) *part {
	for _, p := range d.parts {
		if p.name == name {
			return p
		}
	}
	p := &part{name: name}
	d.parts = append(d.parts, p)
	return p
}

// countInfo adds an /info run to its part.
func (d *driver) countInfo(name string, r wrkResult) {
	p := d.part(name)
	p.requests += r.requests
	p.non2xx += r.non2xx
}

// countLogins adds login replies by status to a part.
func (d *driver) countLogins(name string, statuses map[int]int) {
	p := d.part(name)
	if p.statuses == nil {
		p.statuses = make(map[int]int)
	}
	for c, n := range statuses {
		p.statuses[c] += n
	}
}

func get(url string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

// metricValue is the value of the series name (with its labels, as the
// exposition writes them) in a Prometheus text exposition.
func metricValue(exposition, name string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(exposition))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func (d *driver) sleep(dur time.Duration) error {
	select {
	case <-time.After(dur):
		return nil
	case <-d.ctx.Done():
		return d.ctx.Err()
	}
}

// results is everything one run measured.
type results struct {
	infoTs, inprocTs []*target
	info, inproc     map[string][]wrkResult
	hashes           []hashCase
	login            map[string][]float64 // by hash case: logins/s
	raw              map[string][]float64 // by hash case: checks/s
	floods           map[string][]floodResult
	revocation       revocationResult
	timing           map[string]timingResult
	unknownFlood     timingResult
	big              bigResult
	pg               pgResult
	gob              goResults
	junk             junkResult
	reset            resetResult
	warn             []string
}

// run measures every part in turn and returns the table.
func (d *driver) run() (string, error) {
	start := time.Now()
	loadStart := loadavg()
	res := &results{login: map[string][]float64{}, raw: map[string][]float64{}, floods: map[string][]floodResult{}}
	if d.cfg.only == "reset" {
		res.reset = d.resetFlood()
		return d.resetTable(res, start, loadStart), nil
	}
	if d.cfg.only == "info" {
		if err := d.infoOnly(res); err != nil {
			return "", err
		}
		res.junk = d.junk()
		return d.infoTable(res, start, loadStart), nil
	}
	if err := d.infoParts(res); err != nil {
		return "", err
	}
	res.junk = d.junk()
	if err := d.loginParts(res); err != nil {
		return "", err
	}
	if err := d.floodParts(res); err != nil {
		return "", err
	}

	// 5. Go benchmarks: heap per token, micro-benchmarks, allocation sites.
	var err error
	if res.gob, err = d.goBenchmarks(); err != nil {
		return "", err
	}

	// 5b. Revocation across two instances on one Redis (TestRevocationP99).
	res.revocation = d.revocation()

	// 5c. Failures and dead tokens answered in the same time.
	res.timing = d.timing()
	res.unknownFlood = d.unknownFlood()

	// 6. A users file of 1M users; 7. PostgreSQL with 100k users.
	res.big = d.bigUsers()
	// 6b. Reset requests to one instance, /info on another (issue 37).
	res.reset = d.resetFlood()
	res.pg = d.postgres()
	if d.ctx.Err() != nil {
		return "", d.ctx.Err()
	}
	return d.table(res, start, loadStart), nil
}

// infoParts measures /info unloaded (1) and by live tokens (2).
func (d *driver) infoParts(res *results) error {
	c := d.cfg
	var err error

	// 1. /info, unloaded: authsvc (memory, memory without the access log,
	// Redis) and the baseline.
	res.infoTs = d.pick("authsvc", "authsvc-pat", "authsvc-noaccess", "authsvc-redis", "authsvc-redis-cache", "authsvc-cluster", "authsvc-cluster-cache", "baseline")
	d.logf("== /info: warm-up, then %d alternating rounds of %s per server", c.infoRounds, c.infoDur)
	if _, err := d.rounds("warmup", res.infoTs, 1, c.conns, time.Second); err != nil {
		return err
	}
	if res.info, err = d.rounds("info", res.infoTs, c.infoRounds, c.conns, c.infoDur); err != nil {
		return err
	}

	// 2. /info by live tokens, and the access log: in-process servers.
	res.inprocTs = d.pick("inproc-1k", "inproc-1m", "inproc-1k-nolog")
	if len(res.inprocTs) > 0 {
		d.logf("== in-process servers: warm-up, then %d alternating rounds of %s", c.inprocRounds, c.infoDur)
		if _, err := d.rounds("warmup", res.inprocTs, 1, c.conns, time.Second); err != nil {
			return err
		}
		if res.inproc, err = d.rounds("inproc", res.inprocTs, c.inprocRounds, c.conns, c.infoDur); err != nil {
			return err
		}
	}
	return nil
}

// infoOnly measures /info unloaded on every server of the servers file, in
// its order (-only info).
func (d *driver) infoOnly(res *results) error {
	c := d.cfg
	res.infoTs = d.pick(d.order...)
	d.logf("== /info: warm-up, then %d alternating rounds of %s per server", c.infoRounds, c.infoDur)
	if _, err := d.rounds("warmup", res.infoTs, 1, c.conns, time.Second); err != nil {
		return err
	}
	var err error
	res.info, err = d.rounds("info", res.infoTs, c.infoRounds, c.conns, c.infoDur)
	return err
}

// loginParts measures login throughput against the raw hash rate (3).
func (d *driver) loginParts(res *results) error {
	c := d.cfg
	// 3. Login throughput against the raw hash rate, argon2id (the default
	// policy, internal/password/hash.go) and bcrypt, alternating with the raw rate.
	res.hashes = []hashCase{
		{name: "argon2id m=19456 t=2 p=1", server: "authsvc", rateFlags: []string{"-hash", "argon2id", "-m", "19456", "-t", "2", "-p", "1"}},
		{name: fmt.Sprintf("bcrypt cost %d", c.cost), server: "authsvc-bcrypt", rateFlags: []string{"-hash", "bcrypt", "-cost", strconv.Itoa(c.cost)}},
	}
	for _, hc := range res.hashes {
		t := d.targets[hc.server]
		d.logf("== login, %s: %d alternating rounds of %s (%d clients) and the raw rate (%d goroutines)", hc.name, c.loginRounds, c.loginDur, c.loginConns, d.slots)
		for i := range c.loginRounds {
			for _, raw := range []bool{i%2 == 1, i%2 == 0} {
				if raw {
					r, err := d.hashRate(hc)
					if err != nil {
						return err
					}
					res.raw[hc.name] = append(res.raw[hc.name], r)
					continue
				}
				r, err := d.loginLoad("login, "+hc.name, t, []string{t.loginUser}, c.loginConns, c.loginDur)
				if err != nil {
					return err
				}
				if n := r.statuses[http.StatusOK]; n != sum(r.statuses) {
					res.warn = append(res.warn, fmt.Sprintf("login %s: %d of %d logins failed (%s)", t.name, sum(r.statuses)-n, sum(r.statuses), statusText(r.statuses)))
				}
				res.login[hc.name] = append(res.login[hc.name], r.rate)
				if err := d.drain(t); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// floodParts measures /info during a login flood (4).
func (d *driver) floodParts(res *results) error {
	c := d.cfg
	// 4. /info during a login flood, against /info unloaded just before.
	for _, hc := range res.hashes {
		t := d.targets[hc.server]
		d.logf("== login flood, %s: %d runs of %s, wrk -c%d login + wrk -c%d /info", hc.name, c.floodRounds, c.floodDur, c.floodConns, c.conns)
		for range c.floodRounds {
			fr, err := d.flood("login flood, "+hc.name, t)
			if err != nil {
				return err
			}
			res.floods[hc.name] = append(res.floods[hc.name], fr)
		}
	}
	return nil
}

func sum(statuses map[int]int) int {
	n := 0
	for _, v := range statuses {
		n += v
	}
	return n
}
