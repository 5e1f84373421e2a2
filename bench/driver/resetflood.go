package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The reset-flood part (issue 37, point 7): two instances, A and B, on one
// users file of many users, both mailing reset links to an SMTP sink; B's
// /info is measured unloaded, then while A takes password reset requests
// for real users at a steady rate. A reset request used to rewrite the
// users file to store its link, and B reloaded every rewrite: on 60k users,
// 300 requests in 10 s gave 151 rewrites and B's /info fell from 12.0k to
// 5.7k req/s. Now the link is appended to USERS.resets and the users file
// stays as it is: no rewrite, so no reload on B.

// resetClients is the number of loopback source addresses the requests
// come from (127.0.0.2 on): each is a client of its own to the throttle,
// which counts a reset request as a failed login (--login-rate 1/s, burst
// 10 at the defaults), so that A keeps its defaults and no request is 429.
const resetClients = 64

// resetReloads is B's counter of users file reloads.
const resetReloads = `authsvc_users_reloads_total{result="ok"}`

// A resetRun is one round: B's /info unloaded, then during the flood.
type resetRun struct {
	unloaded, flooded wrkResult
	statuses          map[int]int // the reset requests' replies, by status
	rewrites          int         // of the users file, during the flood and 2 s after
	quietRewrites     int         // during the unloaded run
	reloads           float64     // B's reloads over the flood and 2 s after; -1: unknown
	resetsBytes       int64       // how much USERS.resets grew over the flood and 2 s after
}

// resetResult is the reset-flood part's measure.
type resetResult struct {
	n     int // users in the file
	runs  []resetRun
	mails int64 // messages the sink took, over every run
	err   error
	next  int // the next user a request names, from 2 (user0000001 logs in on B)
}

// ratio is the median of each round's /info rate during the flood ÷ the
// rate unloaded just before (paired: the load of the machine's other
// processes drifts between rounds more than within one), the ratio of the
// medians, and the median p99s, flooded and unloaded.
func (r resetResult) ratio() (paired, medians, floodedP99, unloadedP99 float64) {
	var u, f []wrkResult
	for _, run := range r.runs {
		u, f = append(u, run.unloaded), append(f, run.flooded)
	}
	return pairedRatio(f, u), median(field(f, rps)) / median(field(u, rps)), median(field(f, p99)), median(field(u, p99))
}

// totals are the reset requests sent, those answered 204, and the users
// file's rewrites, over every run.
func (r resetResult) totals() (sent, accepted, rewrites int) {
	for _, run := range r.runs {
		sent += sum(run.statuses)
		accepted += run.statuses[http.StatusNoContent]
		rewrites += run.rewrites
	}
	return sent, accepted, rewrites
}

// resetFlood runs the part on -reset-users, which bench/run.sh writes
// fresh for every bench: the resets file beside it grows.
func (d *driver) resetFlood() resetResult {
	c := d.cfg
	r := resetResult{n: c.resetN, next: 2}
	if c.resetUsers == "" {
		r.err = errors.New(cmp.Or(c.resetSkip, "no -reset-users file"))
		return r
	}
	if _, err := os.Stat(c.resetUsers); err != nil {
		r.err = err
		return r
	}
	clients, err := loopbackClients(resetClients)
	if err != nil {
		r.err = err
		return r
	}
	sink, err := startSMTPSink()
	if err != nil {
		r.err = err
		return r
	}
	defer sink.close()
	d.logf("== reset flood: 2 instances on %d users, %d rounds of %s /info on B unloaded, then with %d reset requests/s to A",
		c.resetN, c.resetRounds, c.resetDur, c.resetRate)
	args := []string{"--users", c.resetUsers, "--smtp-url", sink.url(), "--mail-from", "bench@example.com"}
	a, _, err := d.startServer("reset-a", args...)
	if err != nil {
		r.err = err
		return r
	}
	defer a.stop()
	b, _, err := d.startServer("reset-b", args...)
	if err != nil {
		r.err = err
		return r
	}
	defer b.stop()
	token, err := d.login(b.url, "user0000001")
	if err != nil {
		r.err = err
		return r
	}
	t := &target{name: "reset-b", url: b.url, token: token}
	// One request from each client first: 204, or the part measures
	// something else (404: no --smtp-url; 429: the throttle).
	for i, cl := range clients {
		if st, err := d.postReset(cl, a.url, r.email()); err != nil || st != http.StatusNoContent {
			r.err = fmt.Errorf("reset request to A from client %d: %d, %v; want 204", i, st, err)
			return r
		}
	}
	if _, err := d.wrk("warmup", t, false, c.conns, time.Second); err != nil {
		r.err = err
		return r
	}
	// Let the first requests' mails and B's reloads (none, now) settle.
	if r.err = d.sleep(2 * time.Second); r.err != nil {
		return r
	}
	for range c.resetRounds {
		run, err := d.resetRound(t, a.url, clients, &r)
		if err != nil {
			r.err = err
			return r
		}
		r.runs = append(r.runs, run)
	}
	r.mails = sink.messages.Load()
	return r
}

// resetRound measures B's /info unloaded, then during a flood of reset
// requests to A at -reset-rate, counting the users file's rewrites.
func (d *driver) resetRound(t *target, aURL string, clients []*http.Client, r *resetResult) (resetRun, error) {
	c := d.cfg
	run := resetRun{reloads: -1}
	quiet := watchFile(c.resetUsers)
	var err error
	run.unloaded, err = d.wrk("reset", t, false, c.conns, c.resetDur)
	run.quietRewrites = quiet()
	if err != nil {
		return run, err
	}
	reloadsBefore, reloadsOK := d.metric(t.url, resetReloads)
	resetsBefore := fileSize(c.resetUsers + ".resets")
	rewrites := watchFile(c.resetUsers)
	ctx, stop := context.WithCancel(d.ctx)
	sent := make(chan map[int]int, 1)
	go func() { sent <- d.resetLoad(ctx, aURL, clients, r) }()
	run.flooded, err = d.wrk("reset", t, false, c.conns, c.resetDur)
	stop()
	run.statuses = <-sent
	if err == nil {
		err = d.sleep(2 * time.Second) // the mails go out after the replies
	}
	run.rewrites = rewrites()
	run.resetsBytes = fileSize(c.resetUsers+".resets") - resetsBefore
	if after, ok := d.metric(t.url, resetReloads); ok && reloadsOK {
		run.reloads = after - reloadsBefore
	}
	d.logf("reset  B /info %.0f req/s unloaded, %.0f during %d reset requests to A (%s); users file rewrites %d (unloaded %d), B reloads %.0f, USERS.resets +%d B",
		run.unloaded.rps, run.flooded.rps, sum(run.statuses), statusText(run.statuses), run.rewrites, run.quietRewrites, run.reloads, run.resetsBytes)
	return run, err
}

// resetLoad sends reset requests to url at -reset-rate until ctx ends,
// each for the next user by email, round-robin over the clients, and
// returns their replies by status (0: no reply).
func (d *driver) resetLoad(ctx context.Context, url string, clients []*http.Client, r *resetResult) map[int]int {
	var (
		mu       sync.Mutex // guards statuses
		statuses = make(map[int]int)
		wg       sync.WaitGroup
	)
	tick := time.NewTicker(time.Second / time.Duration(d.cfg.resetRate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return statuses
		case <-tick.C:
		}
		// Each request is held to the reset policy's floor: they overlap.
		email := r.email()
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _ := d.postReset(clients[i%len(clients)], url, email)
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}()
	}
}

// email is the address of the next user a reset request names.
func (r *resetResult) email() string {
	i := r.next
	r.next = r.next%r.n + 1
	return fmt.Sprintf("user%07d@example.com", i)
}

// postReset sends one reset request and returns its status.
func (d *driver) postReset(cl *http.Client, url, email string) (int, error) {
	req, err := http.NewRequestWithContext(d.ctx, "POST", url+"/api/auth/password/reset/", strings.NewReader(fmt.Sprintf(`{"email":%q}`, email)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// loopbackClients returns n HTTP clients, each connecting from a loopback
// address of its own, 127.0.0.2 on (all of 127/8 is the loopback's on
// Linux: no setup), checked by binding each once.
func loopbackClients(n int) ([]*http.Client, error) {
	var cs []*http.Client
	for i := range n {
		ip := net.IPv4(127, 0, byte((i+2)>>8), byte(i+2))
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		if err != nil {
			return nil, fmt.Errorf("source address %s: %v", ip, err)
		}
		ln.Close()
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
		cs = append(cs, &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 16},
		})
	}
	return cs, nil
}

// watchFile polls path's inode, size and modification time every 10 ms
// until the function it returns is called, which returns how many times
// they changed: a rewrite (a new file renamed over it) or a write in place.
func watchFile(path string) func() int {
	done := make(chan struct{})
	changes := make(chan int, 1)
	go func() {
		n := 0
		last, _ := fileID(path)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				changes <- n
				return
			case <-tick.C:
			}
			if id, ok := fileID(path); ok && id != last {
				n++
				last = id
			}
		}
	}()
	return func() int {
		close(done)
		return <-changes
	}
}

// A fileKey tells one state of a file from another.
type fileKey struct {
	ino, size int64
	mtime     time.Time
}

// fileID is path's inode, size and modification time, and whether it
// could be read.
func fileID(path string) (fileKey, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return fileKey{}, false
	}
	k := fileKey{size: st.Size(), mtime: st.ModTime()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		k.ino = int64(sys.Ino)
	}
	return k, true
}

// fileSize is path's size, 0 when it does not exist.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// metric reads one series of the server's /metrics.
func (d *driver) metric(url, name string) (float64, bool) {
	exp, err := get(url + "/metrics")
	if err != nil {
		return 0, false
	}
	return metricValue(exp, name)
}

// resetTargets writes the targets of issue 37, point 7: B's /info while A
// takes reset requests, and the users file's rewrites meanwhile.
func (d *driver) resetTargets(w *tableWriter, res *results) {
	const infoFigure, rewriteFigure = "/info on B while A takes reset requests ÷ unloaded", "users file rewrites during the reset flood"
	w.p("\n%-65s%-25s%s\n", "Targets (issue #37)", "figure", "target")
	r := res.reset
	if len(r.runs) == 0 {
		why := cmp.Or(r.err, errors.New("no round run"))
		w.notMeasured(infoFigure, "≥ 0.90", why)
		w.notMeasured(rewriteFigure, "0 (was 151 in 300)", why)
		return
	}
	ratio, medians, floodedP99, unloadedP99 := r.ratio()
	w.row(infoFigure, fmt.Sprintf("%.2f (medians %.2f)", ratio, medians), "≥ 0.90", verdict(ratio >= 0.90))
	w.row("/info p99 on B, reset flood vs unloaded", ms(floodedP99)+" vs "+ms(unloadedP99), "(no target; was 17 vs 4)", "")
	sent, _, rewrites := r.totals()
	w.row(rewriteFigure, fmt.Sprintf("%d in %d requests", rewrites, sent), "0 (was 151 in 300)", verdict(rewrites == 0))
}

// resetDetails writes the reset-flood part round by round.
func (d *driver) resetDetails(w *tableWriter, res *results) {
	r := res.reset
	c := d.cfg
	if len(r.runs) == 0 {
		if r.err != nil {
			w.p("\nreset flood: not measured: %v\n", r.err)
		}
		return
	}
	w.p("\nReset flood: A and B (authsvc serve, defaults, --smtp-url an SMTP sink in the driver) on one users file of %s users;\n", count(r.n))
	w.p("  each round wrk -c%d /info on B for %s unloaded, then again while a Go loop sends %d POST /api/auth/password/reset/ a second\n", c.conns, seconds(c.resetDur), c.resetRate)
	w.p("  to A, each for another real user by email, from %d loopback addresses round-robin (the per-client limit at its default)\n", resetClients)
	w.p("  %-10s %9s %9s %7s %9s %9s  %-22s %8s %8s %12s\n", "round", "unloaded", "flooded", "ratio", "p99", "p99 unl.", "reset replies", "rewrites", "B reloads", "USERS.resets")
	for i, run := range r.runs {
		reloads := "?"
		if run.reloads >= 0 {
			reloads = fmt.Sprintf("%.0f", run.reloads)
		}
		w.p("  %-10s %9.0f %9.0f %7.2f %9s %9s  %-22s %8d %8s %10d B\n", fmt.Sprintf("run %d", i+1), run.unloaded.rps, run.flooded.rps,
			run.flooded.rps/run.unloaded.rps, ms(run.flooded.p99), ms(run.unloaded.p99), statusText(run.statuses), run.rewrites, reloads, run.resetsBytes)
		if n := sum(run.statuses) - run.statuses[http.StatusNoContent]; n > 0 {
			res.warn = append(res.warn, fmt.Sprintf("reset flood, run %d: %d of %d reset requests were not 204 (%s)", i+1, n, sum(run.statuses), statusText(run.statuses)))
		}
		if run.quietRewrites > 0 {
			res.warn = append(res.warn, fmt.Sprintf("reset flood, run %d: the users file changed %d times in the unloaded run, when no reset request was sent", i+1, run.quietRewrites))
		}
	}
	sent, accepted, _ := r.totals()
	w.p("  (ratio: paired, the median of each round's; rewrites: changes of the users file's inode, size or mtime, polled every 10 ms over the flood and 2 s after;\n")
	w.p("   %d of %d requests answered 204 and the sink took %d mails, the first %d requests' included)\n", accepted, sent, r.mails, resetClients)
	if r.err != nil {
		w.p("  error: %v\n", r.err)
	}
}

// resetTable writes the results of -only reset.
func (d *driver) resetTable(res *results, start time.Time, loadStart string) string {
	w := &tableWriter{}
	w.p("\nauthsvc reset-flood benchmark — %s — nproc %d — CPU %s — %s — %s\n", start.UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), cpuModel(), runtime.Version(), d.wrkVersion())
	w.p("Load average at start %s, at end %s. Ratios between two runs carry about ±0.10 of noise (shared/FACTS.md).\n", loadStart, loadavg())
	d.resetTargets(w, res)
	d.resetDetails(w, res)
	for _, warn := range res.warn {
		w.p("\nWARNING: %s\n", warn)
	}
	w.p("\nTook %s.\n", time.Since(start).Round(time.Second))
	return w.b.String()
}
