// Command driver is the measuring half of `make bench` (bench/run.sh starts
// the servers, then runs this). It drives every server with the same wrk
// settings, interleaving their runs round by round so that machine noise
// hits all of them alike, takes medians, runs the Go benchmarks, and prints
// one table. It reports targets; it never fails because one is missed.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A target is one server under test.
type target struct {
	name  string // key in the servers file
	label string // in the table
	url   string // http://host:port
	token string // a live token, for /info
}

// A wrkResult is one wrk run.
type wrkResult struct {
	rps      float64 // Requests/sec, all statuses
	p50, p99 float64 // ms
	requests int
	seconds  float64
	non2xx   int
	sockErr  string
}

// okRate is the rate of 2xx replies.
func (r wrkResult) okRate() float64 { return float64(r.requests-r.non2xx) / r.seconds }

type config struct {
	wrk, lua, bcryptrate, testbin, serversFile, out, runsOut string
	cost                                                     int
	infoRounds, loginRounds, floodPairs, inprocRounds        int
	infoDur, loginDur, floodDur                              time.Duration
	conns, loginConns, floodConns                            int
	authsvcFlags                                             string
}

type driver struct {
	cfg     config
	ctx     context.Context
	targets map[string]*target
	runs    *os.File // every raw result, for the curious
}

func main() {
	var c config
	flag.StringVar(&c.wrk, "wrk", "wrk", "wrk binary")
	flag.StringVar(&c.lua, "lua", "bench/login.lua", "wrk script that posts a login")
	flag.StringVar(&c.bcryptrate, "bcryptrate", "bench/out/bcryptrate", "bcryptrate binary")
	flag.StringVar(&c.testbin, "testbin", "bench/out/authsvc.test", "authsvc's test binary (go test -c)")
	flag.StringVar(&c.serversFile, "servers", "bench/out/servers.txt", `servers file: lines "name url token"`)
	flag.StringVar(&c.out, "out", "bench/out/latest.txt", "where the table is saved too")
	flag.StringVar(&c.runsOut, "runs", "bench/out/runs.txt", "where every raw run result is written")
	flag.IntVar(&c.cost, "cost", 12, "bcrypt cost of the users file")
	flag.IntVar(&c.infoRounds, "info-rounds", 8, "alternating /info rounds")
	flag.DurationVar(&c.infoDur, "info-duration", 2*time.Second, "one /info run")
	flag.IntVar(&c.conns, "conns", 32, "wrk connections for /info")
	flag.IntVar(&c.inprocRounds, "inproc-rounds", 7, "alternating rounds of the in-process servers")
	flag.IntVar(&c.loginRounds, "login-rounds", 3, "alternating login rounds")
	flag.DurationVar(&c.loginDur, "login-duration", 4*time.Second, "one login run")
	flag.IntVar(&c.loginConns, "login-conns", 4, "wrk connections for login throughput")
	flag.IntVar(&c.floodPairs, "flood-pairs", 2, "login-flood runs per server")
	flag.DurationVar(&c.floodDur, "flood-duration", 6*time.Second, "one login flood; /info is measured inside it")
	flag.IntVar(&c.floodConns, "flood-conns", 64, "wrk connections of the login flood")
	flag.StringVar(&c.authsvcFlags, "authsvc-flags", "", "authsvc's serve flags, for the table's header")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bench: ")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &driver{cfg: c, ctx: ctx}
	if err := d.loadServers(); err != nil {
		log.Fatal(err)
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

var labels = map[string]string{
	"baseline":         "baseline (bare net/http)",
	"authsvc":          "authsvc, memory store",
	"authsvc-noaccess": "authsvc, memory, --access-log=false",
	"authsvc-redis":    "authsvc, Redis store",
	"inproc-1k":        "1k live tokens",
	"inproc-1m":        "1M live tokens",
	"inproc-1k-nolog":  "1k, access log off",
}

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
		if len(f) != 3 {
			return fmt.Errorf("%s: want \"name url token\", got %q", d.cfg.serversFile, line)
		}
		label := labels[f[0]]
		if label == "" {
			label = f[0]
		}
		d.targets[f[0]] = &target{name: f[0], label: label, url: f[1], token: f[2]}
	}
	for _, need := range []string{"baseline", "authsvc"} {
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

// rotate returns ts started at element i mod len(ts): each round starts with
// another server, so that none is always first after a pause.
func rotate(ts []*target, i int) []*target {
	i %= len(ts)
	return append(slices.Clone(ts[i:]), ts[:i]...)
}

func (d *driver) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	log.Print(msg)
	fmt.Fprintln(d.runs, msg)
}

var (
	reRequests = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m|h)`)
	reRPS      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	reP50      = regexp.MustCompile(`(?m)^\s+50%\s+([\d.]+)(us|ms|s|m|h)`)
	reP99      = regexp.MustCompile(`(?m)^\s+99%\s+([\d.]+)(us|ms|s|m|h)`)
	reNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	reSockErr  = regexp.MustCompile(`Socket errors: (.*)`)
)

// toMillis converts a wrk figure with its unit to milliseconds.
func toMillis(v, unit string) float64 {
	f, _ := strconv.ParseFloat(v, 64)
	switch unit {
	case "us":
		return f / 1000
	case "s":
		return f * 1000
	case "m":
		return f * 60e3
	case "h":
		return f * 3600e3
	}
	return f
}

func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := reRequests.FindStringSubmatch(out)
	rps := reRPS.FindStringSubmatch(out)
	if m == nil || rps == nil {
		return r, fmt.Errorf("unexpected wrk output:\n%s", out)
	}
	r.requests, _ = strconv.Atoi(m[1])
	r.seconds = toMillis(m[2], m[3]) / 1000
	r.rps, _ = strconv.ParseFloat(rps[1], 64)
	if m := reP50.FindStringSubmatch(out); m != nil {
		r.p50 = toMillis(m[1], m[2])
	}
	if m := reP99.FindStringSubmatch(out); m != nil {
		r.p99 = toMillis(m[1], m[2])
	}
	if m := reNon2xx.FindStringSubmatch(out); m != nil {
		r.non2xx, _ = strconv.Atoi(m[1])
	}
	if m := reSockErr.FindStringSubmatch(out); m != nil {
		r.sockErr = m[1]
	}
	return r, nil
}

// wrkCmd returns a wrk command: /info with the target's token when login is
// false, else the login script.
func (d *driver) wrkCmd(t *target, login bool, conns int, dur time.Duration) (*exec.Cmd, context.CancelFunc) {
	args := []string{"-t1", "-c" + strconv.Itoa(conns), "-d" + seconds(dur), "--latency", "--timeout", "30s"}
	if login {
		args = append(args, "-s", d.cfg.lua, t.url+"/api/auth/login/")
	} else {
		args = append(args, "-H", "authorization: Token "+t.token, t.url+"/api/auth/info")
	}
	ctx, cancel := context.WithTimeout(d.ctx, dur+60*time.Second)
	return exec.CommandContext(ctx, d.cfg.wrk, args...), cancel
}

// seconds formats dur for wrk, which takes whole seconds only.
func seconds(dur time.Duration) string {
	return strconv.Itoa(max(1, int(math.Round(dur.Seconds())))) + "s"
}

// wrk runs one wrk and parses its report.
func (d *driver) wrk(what string, t *target, login bool, conns int, dur time.Duration) (wrkResult, error) {
	cmd, cancel := d.wrkCmd(t, login, conns, dur)
	defer cancel()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("%s %s: wrk: %v\n%s", what, t.name, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return r, err
	}
	d.logf("%-6s %-16s %9.1f req/s  ok %9.1f/s  p50 %8.3f ms  p99 %8.3f ms  non-2xx %d  %s",
		what, t.name, r.rps, r.okRate(), r.p50, r.p99, r.non2xx, r.sockErr)
	return r, nil
}

// rounds runs one wrk per target per round, rotating the order.
func (d *driver) rounds(what string, ts []*target, n int, login bool, conns int, dur time.Duration, between func(*target) error) (map[string][]wrkResult, error) {
	res := make(map[string][]wrkResult)
	for i := range n {
		for _, t := range rotate(ts, i) {
			r, err := d.wrk(what, t, login, conns, dur)
			if err != nil {
				return nil, err
			}
			res[t.name] = append(res[t.name], r)
			if between != nil {
				if err := between(t); err != nil {
					return nil, err
				}
			}
		}
	}
	return res, nil
}

// drain waits until t runs no password check, so the next run starts on an
// idle machine: the baseline finishes every bcrypt it began (it has no
// admission control), authsvc's queue empties when wrk's connections close.
func (d *driver) drain(t *target) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		idle, known := d.idle(t)
		if !known {
			return d.sleep(2 * time.Second)
		}
		if idle {
			return d.sleep(300 * time.Millisecond)
		}
		if err := d.sleep(100 * time.Millisecond); err != nil {
			return err
		}
	}
	d.logf("warning: %s still busy with password checks after 60s", t.name)
	return nil
}

// idle reports whether t runs no password check; known is false when t
// cannot tell (no /inflight, no bcrypt gauges in /metrics).
func (d *driver) idle(t *target) (idle, known bool) {
	if t.name == "baseline" {
		body, err := get(t.url + "/inflight")
		return strings.TrimSpace(body) == "0", err == nil
	}
	body, err := get(t.url + "/metrics")
	if err != nil {
		return false, false
	}
	running, ok1 := metricValue(body, "authsvc_bcrypt_running")
	waiting, ok2 := metricValue(body, "authsvc_bcrypt_waiting")
	if !ok1 || !ok2 {
		return false, false
	}
	return running == 0 && waiting == 0, true
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

// A loginResult is one login throughput run.
type loginResult struct {
	rate       float64 // successful logins/s
	ok, failed int
	p50, p99   float64 // ms
}

// loginLoad measures login throughput. conns clients each post logins back
// to back for dur, then finish the one in flight; a client's rate is its
// successful logins over its own busy time, and the rates add up — the way
// bench/bcryptrate counts compares. (wrk counts only the replies that arrive
// within its duration and so drops up to one in-flight login per connection:
// at about 7 logins/s over a few seconds that is several percent, as much
// as the login target's margin.)
func (d *driver) loginLoad(t *target, conns int, dur time.Duration) (loginResult, error) {
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, os.Getenv("BENCH_USER"), os.Getenv("BENCH_PASSWORD"))
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	type worker struct {
		ok, failed int
		rate       float64
		lat        []float64
		err        error
	}
	ws := make([]worker, conns)
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for i := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &ws[i]
			for time.Now().Before(deadline) {
				t0 := time.Now()
				req, err := http.NewRequestWithContext(d.ctx, "POST", t.url+"/api/auth/login/", strings.NewReader(body))
				if err != nil {
					w.err = err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					w.err = err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					w.ok++
				} else {
					w.failed++
				}
				w.lat = append(w.lat, float64(time.Since(t0))/1e6)
			}
			w.rate = float64(w.ok) / time.Since(start).Seconds()
		}()
	}
	wg.Wait()
	var r loginResult
	var lat []float64
	for _, w := range ws {
		if w.err != nil {
			return r, fmt.Errorf("login %s: %v", t.name, w.err)
		}
		r.rate += w.rate
		r.ok += w.ok
		r.failed += w.failed
		lat = append(lat, w.lat...)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50 = lat[len(lat)/2]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	d.logf("login  %-16s %9.2f logins/s  ok %d  failed %d  p50 %8.1f ms  p99 %8.1f ms", t.name, r.rate, r.ok, r.failed, r.p50, r.p99)
	return r, nil
}

// floodResult is one /info run inside a login flood.
type floodResult struct {
	info, flood wrkResult
}

// flood runs a login flood against t and, once it is under way, measures
// /info on the same server.
func (d *driver) flood(t *target) (floodResult, error) {
	var fr floodResult
	cmd, cancel := d.wrkCmd(t, true, d.cfg.floodConns, d.cfg.floodDur)
	defer cancel()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fr, err
	}
	lead := time.Second // let the flood fill the server first
	measure := d.cfg.floodDur - 2*time.Second
	err := d.sleep(lead)
	if err == nil {
		fr.info, err = d.wrk("flood", t, false, d.cfg.conns, measure)
	}
	werr := cmd.Wait()
	if err != nil {
		return fr, err
	}
	if werr != nil {
		return fr, fmt.Errorf("flood %s: wrk: %v\n%s", t.name, werr, out.String())
	}
	if fr.flood, err = parseWrk(out.String()); err != nil {
		return fr, err
	}
	d.logf("flood  %-16s login flood: %d requests, %d refused or failed, %.1f logins/s, %s",
		t.name, fr.flood.requests, fr.flood.non2xx, fr.flood.okRate(), fr.flood.sockErr)
	return fr, d.drain(t)
}

// bcryptRate runs bench/bcryptrate for one login duration.
func (d *driver) bcryptRate() (float64, error) {
	out, err := d.command(d.cfg.bcryptrate, nil, "-cost", strconv.Itoa(d.cfg.cost),
		"-goroutines", strconv.Itoa(runtime.NumCPU()), "-duration", d.cfg.loginDur.String())
	if err != nil {
		return 0, err
	}
	var rate float64
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "compares/s: %g", &rate); err != nil {
		return 0, fmt.Errorf("bcryptrate: %q: %v", out, err)
	}
	d.logf("login  %-16s %9.2f compares/s", "raw-bcrypt", rate)
	return rate, nil
}

func (d *driver) command(name string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(d.ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// A goBench is one line of go test -bench output.
type goBench struct {
	name                    string
	nsOp, bytesOp, allocsOp float64
	metrics                 map[string]float64
}

func parseGoBench(out string) []goBench {
	var bs []goBench
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		b := goBench{name: strings.TrimPrefix(f[0], "Benchmark"), metrics: map[string]float64{}}
		if i := strings.LastIndexByte(b.name, '-'); i > 0 {
			b.name = b.name[:i] // the -GOMAXPROCS suffix
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				b.nsOp = v
			case "B/op":
				b.bytesOp = v
			case "allocs/op":
				b.allocsOp = v
			default:
				b.metrics[f[i+1]] = v
			}
		}
		bs = append(bs, b)
	}
	return bs
}

// An allocSite is one line of TestInfoAllocSites.
type allocSite struct {
	perRequest     float64
	origin, callee string
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func field(rs []wrkResult, f func(wrkResult) float64) []float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return xs
}

func rps(r wrkResult) float64 { return r.rps }
func p50(r wrkResult) float64 { return r.p50 }
func p99(r wrkResult) float64 { return r.p99 }

// verdict says whether a target is met; it never fails the run.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.2f ms", v)
}

func (d *driver) run() (string, error) {
	c := d.cfg
	start := time.Now()
	loadStart := loadavg()
	var warn []string

	// 1. /info, unloaded: authsvc (memory, memory without the access log,
	// Redis) and the baseline.
	infoTs := d.pick("authsvc", "authsvc-noaccess", "authsvc-redis", "baseline")
	d.logf("== /info: warm-up, then %d alternating rounds of %s per server", c.infoRounds, c.infoDur)
	if _, err := d.rounds("warmup", infoTs, 1, false, c.conns, time.Second, nil); err != nil {
		return "", err
	}
	info, err := d.rounds("info", infoTs, c.infoRounds, false, c.conns, c.infoDur, nil)
	if err != nil {
		return "", err
	}

	// 2. /info by live tokens, and the access log: in-process servers.
	inprocTs := d.pick("inproc-1k", "inproc-1m", "inproc-1k-nolog")
	var inproc map[string][]wrkResult
	if len(inprocTs) > 0 {
		d.logf("== in-process servers: warm-up, then %d alternating rounds of %s", c.inprocRounds, c.infoDur)
		if _, err := d.rounds("warmup", inprocTs, 1, false, c.conns, time.Second, nil); err != nil {
			return "", err
		}
		if inproc, err = d.rounds("inproc", inprocTs, c.inprocRounds, false, c.conns, c.infoDur, nil); err != nil {
			return "", err
		}
	}

	// 3. Login throughput against the raw bcrypt rate.
	d.logf("== login: %d alternating rounds of %s (%d clients), and the raw bcrypt rate", c.loginRounds, c.loginDur, c.loginConns)
	loginTs := d.pick("authsvc", "baseline")
	login := make(map[string][]float64)
	var raw []float64
	for i := range c.loginRounds {
		for _, t := range rotate(append(loginTs, &target{name: "raw"}), i) {
			if t.name == "raw" {
				r, err := d.bcryptRate()
				if err != nil {
					return "", err
				}
				raw = append(raw, r)
				continue
			}
			r, err := d.loginLoad(t, c.loginConns, c.loginDur)
			if err != nil {
				return "", err
			}
			if r.failed > 0 {
				warn = append(warn, fmt.Sprintf("login %s: %d of %d logins failed", t.name, r.failed, r.ok+r.failed))
			}
			login[t.name] = append(login[t.name], r.rate)
			if err := d.drain(t); err != nil {
				return "", err
			}
		}
	}

	// 4. /info during a login flood.
	d.logf("== login flood: %d runs per server of %s, wrk -c%d login + wrk -c%d /info", c.floodPairs, c.floodDur, c.floodConns, c.conns)
	floods := make(map[string][]floodResult)
	for i := range c.floodPairs {
		for _, t := range rotate(loginTs, i) {
			fr, err := d.flood(t)
			if err != nil {
				return "", err
			}
			floods[t.name] = append(floods[t.name], fr)
		}
	}

	// 5. Go benchmarks: heap per token, micro-benchmarks, allocation sites.
	d.logf("== go benchmarks (%s)", c.testbin)
	out, err := d.command(c.testbin, nil, "-test.run", "^$", "-test.bench", "^BenchmarkHeapPerToken$", "-test.benchtime", "1x")
	if err != nil {
		return "", err
	}
	fmt.Fprint(d.runs, out)
	heap := parseGoBench(out)
	out, err = d.command(c.testbin, nil, "-test.run", "^$", "-test.bench", "^Benchmark(ParseAuthorization|DigestLookup|InfoHandler)$", "-test.benchmem", "-test.benchtime", "1s")
	if err != nil {
		return "", err
	}
	fmt.Fprint(d.runs, out)
	micro := parseGoBench(out)
	const censusN = 20000
	out, err = d.command(c.testbin, []string{"AUTHSVC_BENCH_ALLOCS=" + strconv.Itoa(censusN)}, "-test.run", "^TestInfoAllocSites$", "-test.v")
	if err != nil {
		return "", err
	}
	fmt.Fprint(d.runs, out)
	var sites []allocSite
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) == 4 && f[0] == "ALLOC" {
			v, _ := strconv.ParseFloat(f[1], 64)
			sites = append(sites, allocSite{perRequest: v, origin: f[2], callee: f[3]})
		}
	}
	slices.SortFunc(sites, func(a, b allocSite) int {
		if a.perRequest != b.perRequest {
			if a.perRequest > b.perRequest {
				return -1
			}
			return 1
		}
		return strings.Compare(a.origin+a.callee, b.origin+b.callee)
	})

	// The table.
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("\nauthsvc benchmark — %s — nproc %d — CPU %s — %s — %s\n", start.UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), cpuModel(), runtime.Version(), d.wrkVersion())
	p("Both servers run here side by side; each figure is a median of alternating runs (run order rotates per round).\n")
	p("authsvc serve %s\n", c.authsvcFlags)
	p("  (the row \"%s\" adds --access-log=false: no per-request line; audit and error lines stay)\n", labels["authsvc-noaccess"])
	p("  The login throttle is raised for the bench: all load comes from 127.0.0.1. Other flags at their defaults.\n")
	p("  Server stderr (the access log) goes to /dev/null: every line is still formatted and written.\n")
	p("Users file made with `authsvc user add --cost %d`; the baseline compares against the same hash.\n", c.cost)
	p("/info: wrk -t1 -c%d --latency, %d rounds × %s. Login: %d keep-alive Go clients (bench/driver), %d rounds × %s:\n", c.conns, c.infoRounds, seconds(c.infoDur), c.loginConns, c.loginRounds, c.loginDur)
	p("  wrk would drop the logins in flight at its deadline, several percent at ~7 logins/s. Flood: wrk -t1 -c%d login + wrk -t1 -c%d /info.\n", c.floodConns, c.conns)
	p("Load average (other processes on this machine) at start %s, at end %s.\n", loadStart, loadavg())
	p("Ratios between two servers carry about ±0.10 of noise (shared/FACTS.md).\n")

	base := median(field(info["baseline"], rps))
	p("\n/info, unloaded                          req/s       p50       p99   ×baseline   target\n")
	for _, t := range infoTs {
		rs := info[t.name]
		r := median(field(rs, rps))
		target, v := "", ""
		switch t.name {
		case "authsvc", "authsvc-noaccess":
			target, v = "≥ 0.85", verdict(r >= 0.85*base)
		case "authsvc-redis":
			target, v = "≥ 0.50", verdict(r >= 0.5*base)
		}
		p("  %-36s %8.0f %9s %9s %10.2f   %-7s %s\n", t.label, r, ms(median(field(rs, p50))), ms(median(field(rs, p99))), r/base, target, v)
		for _, x := range rs {
			if x.non2xx > 0 || x.sockErr != "" {
				warn = append(warn, fmt.Sprintf("/info %s: %d non-2xx replies, socket errors %q: the token did not work", t.name, x.non2xx, x.sockErr))
				break
			}
		}
	}
	if d.targets["authsvc-redis"] == nil {
		p("  %-36s (no redis-server: not measured)\n", labels["authsvc-redis"])
	}

	rawRate := median(raw)
	baseLogin := median(login["baseline"])
	p("\nlogin, bcrypt cost %-2d                logins/s   ×baseline   ×raw bcrypt   target\n", c.cost)
	p("  %-32s %8.2f %11s %13.2f\n", fmt.Sprintf("raw bcrypt, %d goroutines", runtime.NumCPU()), rawRate, "", 1.0)
	for _, t := range loginTs {
		r := median(login[t.name])
		target, v := "", ""
		if t.name == "authsvc" {
			target, v = "≥ 0.95 × baseline", verdict(r >= 0.95*baseLogin)
		}
		p("  %-32s %8.2f %11.2f %13.2f   %-18s %s\n", t.label, r, r/baseLogin, r/rawRate, target, v)
	}

	if len(floods) > 0 {
		p("\n/info during a %d-connection login flood   req/s  ×unloaded        p99   logins/s   refused/s   target\n", c.floodConns)
		for _, t := range loginTs {
			frs := floods[t.name]
			ir := make([]wrkResult, len(frs))
			var fl, refused []float64
			for i, fr := range frs {
				ir[i] = fr.info
				fl = append(fl, fr.flood.okRate())
				refused = append(refused, float64(fr.flood.non2xx)/fr.flood.seconds)
			}
			for _, x := range ir {
				if x.non2xx > 0 {
					warn = append(warn, fmt.Sprintf("/info %s during the flood: %d non-2xx replies", t.name, x.non2xx))
					break
				}
			}
			r, q := median(field(ir, rps)), median(field(ir, p99))
			unloaded := median(field(info[t.name], rps))
			target, v := "", ""
			if t.name == "authsvc" {
				target, v = "≥ 50 %, p99 ≤ 25 ms", verdict(r >= 0.5*unloaded && q <= 25)
			}
			p("  %-38s %8.0f %9.0f %% %10s %10.2f %11.1f   %-20s %s\n", t.label, r, 100*r/unloaded, ms(q), median(fl), median(refused), target, v)
		}
		p("  (refused/s: login replies other than 200 — authsvc's admission answers 503 when its queue is full;\n")
		p("   the baseline has no admission control: every login waits its turn for the CPU.)\n")
	}

	p("\nmemory store, heap per live token     B/token      heap   target\n")
	for _, hb := range heap {
		bt, ok := hb.metrics["B/token"]
		if !ok {
			continue
		}
		n := strings.TrimPrefix(hb.name, "HeapPerToken/tokens=")
		p("  %-32s %8.0f %7.0f MB   ≤ 200   %s\n", n+" tokens", bt, bt*tokenCount(n)/1e6, verdict(bt <= 200))
	}
	p("  (as the login handler issues them: N tokens over N/100 users at the default limit of 100 per user, 24 h TTL)\n")

	if len(inproc) > 0 {
		p("\n/info by live tokens (in-process server: the real handler and memory store preloaded, driven by wrk)\n")
		p("                                       req/s       p50       p99   p99 range of runs\n")
		for _, t := range inprocTs {
			rs := inproc[t.name]
			xs := field(rs, p99)
			p("  %-32s %8.0f %9s %9s   %s – %s\n", t.label, median(field(rs, rps)), ms(median(field(rs, p50))), ms(median(xs)), ms(slices.Min(xs)), ms(slices.Max(xs)))
		}
		if k, m := inproc["inproc-1k"], inproc["inproc-1m"]; len(k) > 0 && len(m) > 0 {
			kx := field(k, p99)
			mp := median(field(m, p99))
			within := mp <= slices.Max(kx)
			p("  p99 1M / 1k = %.2f; target: within noise (1M median inside the 1k runs' range)   %s\n", mp/median(kx), verdict(within))
		}
		if k, n := inproc["inproc-1k"], inproc["inproc-1k-nolog"]; len(k) > 0 && len(n) > 0 {
			with, without := median(field(k, rps)), median(field(n, rps))
			p("  access log (batched by newLogWriter, as serve writes it): %.0f req/s with it, %.0f without (logger drops lines unformatted): it costs %.0f %% of /info throughput\n", with, without, 100*(1-with/without))
		}
	}

	p("\nGo micro-benchmarks (go test -bench -benchmem)      ns/op      B/op   allocs/op\n")
	for _, mb := range micro {
		p("  %-46s %8.0f %9.0f %11.0f\n", mb.name, mb.nsOp, mb.bytesOp, mb.allocsOp)
	}
	p("  InfoHandler/discard is the handler's own cost; -nolog drops the access-log line before formatting it.\n")

	if len(sites) > 0 {
		total := 0.0
		for _, s := range sites {
			total += s.perRequest
		}
		p("\n/info handler allocations per request: %.1f (every allocation sampled over %d requests; target: as few as possible)\n", total, censusN)
		for _, s := range sites {
			if s.perRequest < 0.01 {
				continue
			}
			p("  %5.2f  %-22s %s\n", s.perRequest, s.origin, s.callee)
		}
	}

	for _, w := range warn {
		p("\nWARNING: %s\n", w)
	}
	p("\nTargets are reported, never enforced. Took %s.\n", time.Since(start).Round(time.Second))
	return b.String(), nil
}

func tokenCount(label string) float64 {
	mult := 1.0
	switch {
	case strings.HasSuffix(label, "M"):
		mult, label = 1e6, strings.TrimSuffix(label, "M")
	case strings.HasSuffix(label, "k"):
		mult, label = 1e3, strings.TrimSuffix(label, "k")
	}
	v, _ := strconv.ParseFloat(label, 64)
	return v * mult
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func (d *driver) wrkVersion() string {
	out, _ := exec.CommandContext(d.ctx, d.cfg.wrk, "-v").CombinedOutput() // wrk -v exits 1
	line, _, _ := strings.Cut(string(out), "\n")
	if f := strings.Fields(line); len(f) >= 2 {
		return "wrk " + f[1]
	}
	return "wrk (version unknown)"
}
