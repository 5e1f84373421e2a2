package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A hashCase is one hash policy whose login and flood rows are measured:
// the server whose users (and policy) have that hash, and bcryptrate's
// flags for the same hash.
type hashCase struct {
	name      string // in the table
	server    string // target name
	rateFlags []string
}

// A loginResult is one login throughput run.
type loginResult struct {
	rate     float64 // successful logins/s
	statuses map[int]int
	p50, p99 float64 // ms
}

// loginLoad measures login throughput. conns clients each post logins of
// the users (client i logs in users[i mod len]) back to back for dur, then
// finish the one in flight; a client's rate is its successful logins over
// its own busy time, and the rates add up — the way bench/bcryptrate counts
// compares. (wrk counts only the replies that arrive within its duration and
// so drops up to one in-flight login per connection: several percent of a
// few seconds at bcrypt's rate, as much as the login target's margin.)
func (d *driver) loginLoad(what string, t *target, users []string, conns int, dur time.Duration) (loginResult, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
	type worker struct {
		statuses map[int]int
		rate     float64
		lat      []float64
		err      error
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
			w.statuses = make(map[int]int)
			body := fmt.Sprintf(`{"username":%q,"password":%q}`, users[i%len(users)], d.password)
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
				w.statuses[resp.StatusCode]++
				w.lat = append(w.lat, float64(time.Since(t0))/1e6)
			}
			w.rate = float64(w.statuses[http.StatusOK]) / time.Since(start).Seconds()
		}()
	}
	wg.Wait()
	r := loginResult{statuses: make(map[int]int)}
	var lat []float64
	for _, w := range ws {
		if w.err != nil {
			return r, fmt.Errorf("login %s: %v", t.name, w.err)
		}
		r.rate += w.rate
		for c, n := range w.statuses {
			r.statuses[c] += n
		}
		lat = append(lat, w.lat...)
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50 = lat[len(lat)/2]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	d.logf("login  %-16s %9.2f logins/s  %s  p50 %8.1f ms  p99 %8.1f ms", t.name, r.rate, statusText(r.statuses), r.p50, r.p99)
	d.countLogins(what, r.statuses)
	return r, nil
}

// floodResult is one /info run inside a login flood, and the unloaded /info
// run on the same server just before it.
type floodResult struct {
	unloaded, info, flood wrkResult
}

// flood measures /info on t unloaded, then runs a login flood against t and,
// once it is under way, measures /info again.
func (d *driver) flood(what string, t *target) (floodResult, error) {
	var fr floodResult
	measure := d.cfg.floodDur - 2*time.Second
	var err error
	if fr.unloaded, err = d.wrk("unload", t, false, d.cfg.conns, measure); err != nil {
		return fr, err
	}
	cmd, cancel := d.wrkCmd(t, true, d.cfg.floodConns, d.cfg.floodDur)
	defer cancel()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fr, err
	}
	err = d.sleep(time.Second) // let the flood fill the server first
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
	d.logf("flood  %-16s login flood: %d requests, %s, %.1f logins/s, %s",
		t.name, fr.flood.requests, statusText(fr.flood.statuses), fr.flood.okRate(), fr.flood.sockErr)
	d.countLogins(what, fr.flood.statuses)
	return fr, d.drain(t)
}

// hashRate runs bench/bcryptrate for one login duration, on as many
// goroutines as the server's hasher has slots (--password-slots' default).
func (d *driver) hashRate(hc hashCase) (float64, error) {
	args := append(slices.Clone(hc.rateFlags), "-goroutines", strconv.Itoa(d.slots), "-duration", d.cfg.loginDur.String())
	out, err := d.command(d.cfg.bcryptrate, nil, args...)
	if err != nil {
		return 0, err
	}
	var rate float64
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "compares/s: %g", &rate); err != nil {
		return 0, fmt.Errorf("bcryptrate: %q: %v", out, err)
	}
	d.logf("login  %-16s %9.2f checks/s (%s)", "raw", rate, strings.Join(args, " "))
	return rate, nil
}

// drain waits until t runs no password check, so the next run starts on an
// idle machine: authsvc's queue empties when the clients' connections close.
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
// cannot tell (no password-check gauges in /metrics).
func (d *driver) idle(t *target) (idle, known bool) {
	body, err := get(t.url + "/metrics")
	if err != nil {
		return false, false
	}
	running, ok1 := metricValue(body, "authsvc_password_checks_running")
	waiting, ok2 := metricValue(body, "authsvc_password_checks_waiting")
	if !ok1 || !ok2 {
		return false, false
	}
	return running == 0 && waiting == 0, true
}
