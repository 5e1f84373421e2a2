package main

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

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

// count writes n as 1M or 100k.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// name is the large users file's in the table.
func (r bigResult) name() string { return fmt.Sprintf("users file of %s users", count(r.n)) }

// name is the PostgreSQL directory's in the table.
func (r pgResult) name() string { return fmt.Sprintf("PostgreSQL directory, %s users", count(r.n)) }

// A tableWriter builds the table.
type tableWriter struct {
	b strings.Builder
}

// p writes a formatted line, or part of one.
func (w *tableWriter) p(format string, args ...any) { fmt.Fprintf(&w.b, format, args...) }

// row writes a target's row: the figure, its value, the target, the verdict.
func (w *tableWriter) row(figure, value, target, v string) {
	w.p("  %-62s %-24s %-24s %s\n", figure, value, target, v)
}

// notMeasured writes the row of a figure that was not measured, and why.
func (w *tableWriter) notMeasured(figure, target string, why error) {
	w.row(figure, "not measured: "+strings.ReplaceAll(why.Error(), "\n", " "), target, "")
}

// table writes the results: the targets first, then the details.
func (d *driver) table(res *results, start time.Time, loadStart string) string {
	w := &tableWriter{}
	d.tableHeader(w, start, loadStart)

	// The targets of issue #14, then the details.
	w.p("\nTargets (issue #14)                                              figure                   target\n")
	for _, section := range []func(*tableWriter, *results){
		d.infoTargets, d.loadTargets, d.bigTargets, d.pgTargets, d.tokensTarget, d.patTargets, d.resetTargets,
		d.infoDetails, d.junkDetails, d.loginDetails, d.heapDetails, d.bigDetails, d.pgDetails, d.resetDetails, d.inprocDetails, d.goDetails,
	} {
		section(w, res)
	}

	for _, warn := range res.warn {
		w.p("\nWARNING: %s\n", warn)
	}
	w.p("\nTargets are reported, never enforced. Took %s.\n", time.Since(start).Round(time.Second))
	return w.b.String()
}

// infoTable writes the results of -only info: every server's /info
// against the baseline, and the memory store's target.
func (d *driver) infoTable(res *results, start time.Time, loadStart string) string {
	w := &tableWriter{}
	c := d.cfg
	w.p("\nauthsvc /info benchmark — %s — nproc %d — CPU %s — %s — %s\n", start.UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), cpuModel(), runtime.Version(), d.wrkVersion())
	w.p("/info: wrk -t1 -c%d --latency, %d alternating rounds × %s (run order rotates per round); medians.\n", c.conns, c.infoRounds, seconds(c.infoDur))
	w.p("Load average at start %s, at end %s. Ratios between two servers carry about ±0.10 of noise (shared/FACTS.md).\n", loadStart, loadavg())
	if d.targets["authsvc"] != nil {
		base := median(field(res.info["baseline"], rps))
		r := median(field(res.info["authsvc"], rps)) / base
		w.p("\n")
		w.row("/info ÷ bare baseline, memory store, access log on", fmt.Sprintf("%.2f", r), "≥ 0.90", verdict(r >= 0.90))
	}
	d.patTargets(w, res)
	d.infoDetails(w, res)
	d.junkDetails(w, res)
	for _, warn := range res.warn {
		w.p("\nWARNING: %s\n", warn)
	}
	w.p("\nTook %s.\n", time.Since(start).Round(time.Second))
	return w.b.String()
}

// tableHeader writes what was run, on what, and how.
func (d *driver) tableHeader(w *tableWriter, start time.Time, loadStart string) {
	p := w.p
	c := d.cfg
	p("\nauthsvc benchmark — %s — nproc %d — CPU %s — %s — %s\n", start.UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), cpuModel(), runtime.Version(), d.wrkVersion())
	p("Servers run here side by side; each figure is a median of alternating runs (run order rotates per round).\n")
	p("authsvc serve --addr … --users … --store …%s: every other flag at its default, the login throttle included\n", strings.TrimRight(" "+c.authsvcFlags, " "))
	p("  (all load comes from 127.0.0.1; replies by status per part are counted below).\n")
	p("  Users made with `authsvc user add` (argon2id, the default policy); \"%s\" serves users made with\n", label("authsvc-bcrypt"))
	p("  `user add --cost %d` with --cost %d, so no login rehashes. Server stderr (the access log) goes to /dev/null.\n", c.cost, c.cost)
	p("/info: wrk -t1 -c%d --latency, %d rounds × %s. Login: %d keep-alive Go clients (bench/driver), %d rounds × %s,\n", c.conns, c.infoRounds, seconds(c.infoDur), c.loginConns, c.loginRounds, c.loginDur)
	p("  alternating with bench/bcryptrate on %d goroutines (the hasher's default slots). Flood: %d × (wrk -c%d /info %s unloaded,\n", d.slots, c.floodRounds, c.conns, seconds(c.floodDur-2*time.Second))
	p("  then wrk -t1 -c%d login for %s with wrk -c%d /info inside it); ratio: median flooded ÷ median unloaded.\n", c.floodConns, seconds(c.floodDur), c.conns)
	p("RSS and its peak are the server's own plus its hash-worker processes' (/proc/PID/status VmRSS, VmHWM).\n")
	p("Load average (other processes on this machine) at start %s, at end %s.\n", loadStart, loadavg())
	p("Ratios between two servers carry about ±0.10 of noise (shared/FACTS.md).\n")
}

// infoTargets writes the targets of /info: against the baseline, on
// Redis, cached, and on a cluster.
func (d *driver) infoTargets(w *tableWriter, res *results) {
	row, notMeasured := w.row, w.notMeasured
	c := d.cfg
	base := median(field(res.info["baseline"], rps))
	infoRatio := func(name string) float64 { return median(field(res.info[name], rps)) / base }
	r := infoRatio("authsvc")
	row("/info ÷ bare baseline, memory store, access log on", fmt.Sprintf("%.2f", r), "≥ 0.90", verdict(r >= 0.90))
	if d.targets["authsvc-redis"] != nil {
		r := infoRatio("authsvc-redis")
		row("/info ÷ baseline, Redis store", fmt.Sprintf("%.2f", r), "≥ 0.60", verdict(r >= 0.60))
	} else {
		notMeasured("/info ÷ baseline, Redis store", "≥ 0.60", fmt.Errorf("%s", c.redisSkip))
	}
	if d.targets["authsvc-redis-cache"] != nil {
		r := infoRatio("authsvc-redis-cache") / infoRatio("authsvc")
		row("/info, Redis with caching ÷ memory store", fmt.Sprintf("%.2f", r), "≥ 0.85", verdict(r >= 0.85))
	} else {
		notMeasured("/info, Redis with caching ÷ memory store", "≥ 0.85", fmt.Errorf("%s", c.redisSkip))
	}
	// Issue 22 sets no target for the cluster: the row shows what spreading
	// the store over three primaries costs one instance's /info, uncached
	// (every check two round trips: the token key, then its user's index)
	// and cached.
	if d.targets["authsvc-cluster"] != nil && d.targets["authsvc-redis"] != nil && d.targets["authsvc-cluster-cache"] != nil && d.targets["authsvc-redis-cache"] != nil {
		r0 := infoRatio("authsvc-cluster") / infoRatio("authsvc-redis")
		r1 := infoRatio("authsvc-cluster-cache") / infoRatio("authsvc-redis-cache")
		row("/info on a three-primary cluster ÷ on one Redis", fmt.Sprintf("%.2f uncached, %.2f cached", r0, r1), "(no target)", "")
	} else {
		why := c.clusterSkip
		if why == "" {
			why = c.redisSkip
		}
		notMeasured("/info on a three-primary cluster ÷ on one Redis", "(no target)", fmt.Errorf("%s", why))
	}
}

// loadTargets writes the targets of revocation, login, the login flood
// and the heap per token.
func (d *driver) loadTargets(w *tableWriter, res *results) {
	row, notMeasured := w.row, w.notMeasured
	c := d.cfg
	if rv := res.revocation; rv.err != nil {
		notMeasured("revocation p99, 2 instances on one Redis, /info load", "≤ 100 ms", rv.err)
	} else {
		row("revocation p99, 2 instances on one Redis, /info load", fmt.Sprintf("%s (p50 %s)", ms(rv.p99), ms(rv.p50)), "≤ 100 ms", verdict(rv.p99 <= 100))
	}
	timingRows(w, res.timing)
	unknownFloodRow(w, res.unknownFlood)
	for _, hc := range res.hashes {
		r := median(res.login[hc.name]) / median(res.raw[hc.name])
		row("login ÷ raw hash rate, "+hc.name, fmt.Sprintf("%.2f", r), "≥ 0.97", verdict(r >= 0.97))
	}
	for _, hc := range res.hashes {
		frs := res.floods[hc.name]
		var unloaded, flooded, q []float64
		for _, fr := range frs {
			unloaded = append(unloaded, fr.unloaded.rps)
			flooded = append(flooded, fr.info.rps)
			q = append(q, fr.info.p99)
		}
		// Medians first: one disturbed run cannot swing the ratio.
		r, p99 := median(flooded)/median(unloaded), median(q)
		row(fmt.Sprintf("/info in a %d-connection login flood ÷ unloaded, %s", c.floodConns, strings.Fields(hc.name)[0]),
			fmt.Sprintf("%.2f, p99 %s", r, ms(p99)), "≥ 0.65, p99 ≤ 15 ms", verdict(r >= 0.65 && p99 <= 15))
	}
	for _, hb := range res.gob.heap {
		if bt, ok := hb.metrics["B/token"]; ok {
			n := strings.TrimPrefix(hb.name, "HeapPerToken/tokens=")
			row("heap per live token with its session records, "+n+" tokens", fmt.Sprintf("%.0f B", bt), "≤ 250 B", verdict(bt <= 250))
		}
	}
}

// bigTargets writes the targets of the large users file.
func (d *driver) bigTargets(w *tableWriter, res *results) {
	big := res.big
	row, notMeasured := w.row, w.notMeasured
	bigName := big.name()
	if big.err != nil && big.load == 0 {
		notMeasured(bigName+": load", "≤ 3 s", big.err)
	} else {
		row(bigName+": load (exec → /readyz 200)", fmt.Sprintf("%.2f s", big.load.Seconds()), "≤ 3 s", verdict(big.load <= 3*time.Second))
	}
	if big.err != nil {
		notMeasured(bigName+": RSS per user, steady", "≤ 400 B", big.err)
		notMeasured(bigName+": reload (SIGHUP) peak ÷ steady", "≤ 1.3", big.err)
	} else {
		perUser := big.steady.total() / float64(big.n)
		row(bigName+": RSS per user, steady", fmt.Sprintf("%.0f B (%.0f MB)", perUser, big.steady.total()/1e6), "≤ 400 B", verdict(perUser <= 400))
		ratio := big.peak.total() / big.steady.total()
		row(bigName+": reload (SIGHUP) peak ÷ steady", fmt.Sprintf("%.2f (%.0f MB)", ratio, big.peak.total()/1e6), "≤ 1.3", verdict(ratio <= 1.3))
	}
	switch {
	case big.userAddError != nil:
		notMeasured(fmt.Sprintf("`user add` into a %s-user file", count(big.n)), "≤ 2 s", big.userAddError)
	case big.userAdd == 0:
		notMeasured(fmt.Sprintf("`user add` into a %s-user file", count(big.n)), "≤ 2 s", big.err)
	default:
		row(fmt.Sprintf("`user add` into a %s-user file (wall time)", count(big.n)), fmt.Sprintf("%.2f s", big.userAdd.Seconds()), "≤ 2 s", verdict(big.userAdd <= 2*time.Second))
	}
}

// pgTargets writes the targets of the PostgreSQL directory.
func (d *driver) pgTargets(w *tableWriter, res *results) {
	pg := res.pg
	row, notMeasured := w.row, w.notMeasured
	pgName := pg.name()
	switch {
	case pg.skip != "":
		notMeasured(pgName+": start", "≤ 2 s", fmt.Errorf("%s", pg.skip))
		notMeasured(pgName+": RSS", "≤ 100 MB", fmt.Errorf("%s", pg.skip))
		notMeasured(pgName+": RSS, workers idle", "≤ 100 MB", fmt.Errorf("%s", pg.skip))
		notMeasured(pgName+": login after idle vs warm", "≤ warm + 100 ms", fmt.Errorf("%s", pg.skip))
	case pg.start == 0:
		notMeasured(pgName+": start", "≤ 2 s", pg.err)
		notMeasured(pgName+": RSS", "≤ 100 MB", pg.err)
		notMeasured(pgName+": RSS, workers idle", "≤ 100 MB", pg.err)
		notMeasured(pgName+": login after idle vs warm", "≤ warm + 100 ms", pg.err)
	default:
		row(pgName+": start (exec → /readyz 200)", fmt.Sprintf("%.2f s", pg.start.Seconds()), "≤ 2 s", verdict(pg.start <= 2*time.Second))
		if pg.err != nil {
			notMeasured(pgName+": RSS", "≤ 100 MB", pg.err)
		} else {
			row(pgName+": RSS after /info + login load", fmt.Sprintf("%.1f MB", pg.rss.total()/1e6), "≤ 100 MB", verdict(pg.rss.total() <= 100e6))
		}
		idle := pg.idle
		switch {
		case pg.err != nil:
			notMeasured(pgName+": RSS, workers idle", "≤ 100 MB", pg.err)
		case idle.rss.server == 0:
			notMeasured(pgName+": RSS, workers idle", "≤ 100 MB", idle.err)
		default:
			row(pgName+": RSS, hash workers exited idle", fmt.Sprintf("%.1f MB after %.0f s", idle.rss.total()/1e6, idle.wait.Seconds()), "≤ 100 MB", verdict(idle.rss.total() <= 100e6))
		}
		switch {
		case pg.err != nil:
			notMeasured(pgName+": login after idle vs warm", "≤ warm + 100 ms", pg.err)
		case idle.err != nil:
			notMeasured(pgName+": login after idle vs warm", "≤ warm + 100 ms", idle.err)
		default:
			row(pgName+": login after idle vs warm", ms(idle.cold.Seconds()*1e3)+" vs "+ms(idle.warm.Seconds()*1e3), "≤ warm + 100 ms",
				verdict(idle.cold <= idle.warm+100*time.Millisecond))
		}
	}
	d.pageTarget(w, pg)
	d.pgJunkTarget(w, pg)
}

// pgJunkTarget writes the row of a flood of one made-up personal access
// token on PostgreSQL (issue 37): a transaction a request before each
// instance remembered the digests of no token.
func (d *driver) pgJunkTarget(w *tableWriter, pg pgResult) {
	const figure, target = "PG transactions per junk PAT request (/info)", "≤ 0.01 (was 1)"
	j := pg.junk
	if j.requests == 0 {
		why := cmp.Or(j.err, pg.err, errors.New("no flood run"))
		if pg.skip != "" {
			why = errors.New(pg.skip)
		}
		w.notMeasured(figure, target, why)
		return
	}
	w.row(figure, fmt.Sprintf("%.4f (%d in %s req)", j.perRequest(), j.xacts, count(j.requests/1000*1000)), target, verdict(j.perRequest() <= 0.01))
}

// pageTarget writes the target of the admin API's listing on PostgreSQL.
func (d *driver) pageTarget(w *tableWriter, pg pgResult) {
	const figure, target = ": admin page of 500, p99", "≤ 50 ms"
	if pg.page.err != nil || pg.page.pages == 0 {
		why := cmp.Or(pg.page.err, pg.err, errors.New("no page read"))
		if pg.skip != "" {
			why = errors.New(pg.skip)
		}
		w.notMeasured(pg.name()+figure, target, why)
		return
	}
	w.row(pg.name()+figure, ms(pg.page.p99.Seconds()*1e3)+" (p50 "+ms(pg.page.p50.Seconds()*1e3)+")", target, verdict(pg.page.p99 <= 50*time.Millisecond))
}

// tokensTarget writes the target of /info as live tokens grow.
func (d *driver) tokensTarget(w *tableWriter, res *results) {
	row, notMeasured := w.row, w.notMeasured
	if k, m := res.inproc["inproc-1k"], res.inproc["inproc-1m"]; len(k) > 0 && len(m) > 0 {
		kx := field(k, p99)
		mp := median(field(m, p99))
		// Flat: the 1M median falls inside the range of the 1k runs.
		row("/info p99 from 1k to 1M live tokens", fmt.Sprintf("%s → %s", ms(median(kx)), ms(mp)), "flat (within 1k range)", verdict(mp <= slices.Max(kx)))
	} else {
		notMeasured("/info p99 from 1k to 1M live tokens", "flat", fmt.Errorf("no in-process servers"))
	}
}

// infoDetails writes /info unloaded, server by server, and the
// revocation run.
func (d *driver) infoDetails(w *tableWriter, res *results) {
	p := w.p
	base := median(field(res.info["baseline"], rps))
	p("\n/info, unloaded                          req/s       p50       p99   ×baseline    paired\n")
	for _, t := range res.infoTs {
		rs := res.info[t.name]
		r := median(field(rs, rps))
		p("  %-36s %8.0f %9s %9s %10.2f %9.2f\n", t.label, r, ms(median(field(rs, p50))), ms(median(field(rs, p99))), r/base, pairedRatio(rs, res.info["baseline"]))
		for _, x := range rs {
			if x.non2xx > 0 || x.sockErr != "" {
				res.warn = append(res.warn, fmt.Sprintf("/info %s: %d non-2xx replies, socket errors %q: the token did not work", t.name, x.non2xx, x.sockErr))
				break
			}
		}
	}

	if rv := res.revocation; rv.err == nil && rv.line != "" {
		p("\nrevocation across instances (TestRevocationP99: %s)\n", rv.line)
	}
}

// pairedRatio is the median over rounds of a's rate ÷ b's in the same
// round: load from other processes that changes between rounds moves both
// alike, where the ratio of the two medians can pair a quiet round of one
// with a loaded round of the other.
func pairedRatio(a, b []wrkResult) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if b[i].rps > 0 {
			rs = append(rs, a[i].rps/b[i].rps)
		}
	}
	return median(rs)
}

// loginDetails writes login against the raw hash rate, /info in the
// login flood, and the replies of every part.
func (d *driver) loginDetails(w *tableWriter, res *results) {
	p := w.p
	c := d.cfg
	p("\nlogin                                                  logins/s   ×raw hash\n")
	for _, hc := range res.hashes {
		raw := median(res.raw[hc.name])
		p("  %-52s %8.2f %11.2f\n", fmt.Sprintf("raw %s, %d goroutines", hc.name, d.slots), raw, 1.0)
		p("  %-52s %8.2f %11.2f\n", fmt.Sprintf("%s (%s)", label(hc.server), strings.Fields(hc.name)[0]), median(res.login[hc.name]), median(res.login[hc.name])/raw)
	}

	p("\n/info during a %d-connection login flood  unloaded   flooded  ratio        p99   logins/s    429/s    503/s\n", c.floodConns)
	for _, hc := range res.hashes {
		for i, fr := range res.floods[hc.name] {
			f := fr.flood
			p("  %-38s %8.0f %9.0f %6.2f %10s %10.2f %8.1f %8.1f\n", fmt.Sprintf("%s, run %d", strings.Fields(hc.name)[0], i+1),
				fr.unloaded.rps, fr.info.rps, fr.info.rps/fr.unloaded.rps, ms(fr.info.p99),
				float64(f.statuses[http.StatusOK])/f.seconds, float64(f.statuses[http.StatusTooManyRequests])/f.seconds, float64(f.statuses[http.StatusServiceUnavailable])/f.seconds)
			if fr.info.non2xx > 0 {
				res.warn = append(res.warn, fmt.Sprintf("/info %s during the flood: %d non-2xx replies", hc.server, fr.info.non2xx))
			}
		}
	}
	p("  (wrk counts login replies in its window; 429: throttled, 503: refused at the hasher's capacity)\n")

	p("\nReplies by part, the throttle at its defaults (a throttled part shows 429s)\n")
	for _, pt := range d.parts {
		if pt.statuses != nil {
			p("  %-44s login replies: %s\n", pt.name, statusText(pt.statuses))
			if n := pt.statuses[http.StatusTooManyRequests]; n > 0 {
				res.warn = append(res.warn, fmt.Sprintf("%s: %d of %d login replies were 429 (throttled) with the throttle at its defaults; every login sent the right password", pt.name, n, sum(pt.statuses)))
			}
		}
	}
	var infoReq, infoBad int
	for _, pt := range d.parts {
		if pt.statuses == nil && !strings.HasPrefix(pt.name, "junk ") {
			infoReq += pt.requests
			infoBad += pt.non2xx
		}
	}
	p("  %-44s %d requests, %d non-2xx (a 429 would be among them; the junk-token part's 401s are left out)\n", "/info, every part", infoReq, infoBad)
}

// heapDetails writes the memory store's heap per live token.
func (d *driver) heapDetails(w *tableWriter, res *results) {
	p := w.p
	p("\nmemory store, heap per live token     B/token      heap\n")
	for _, hb := range res.gob.heap {
		if bt, ok := hb.metrics["B/token"]; ok {
			n := strings.TrimPrefix(hb.name, "HeapPerToken/tokens=")
			p("  %-32s %8.0f %7.0f MB\n", n+" tokens", bt, bt*tokenCount(n)/1e6)
		}
	}
	p("  (as the login handler issues them: N tokens over N/100 users at the default limit of 100 per user, 24 h TTL,\n")
	p("   each with its id, client address and a fresh copy of one of 6 User-Agent strings)\n")
}

// bigDetails writes the large users file's load, reload and user add.
func (d *driver) bigDetails(w *tableWriter, res *results) {
	big := res.big
	p := w.p
	bigName := big.name()
	p("\n%s (bench/bigusers: %.0f MB, argon2id hashes reused)\n", bigName, float64(big.fileBytes)/1e6)
	if big.load > 0 {
		p("  load %.2f s; steady RSS (3 s after /readyz) %s\n", big.load.Seconds(), big.steady)
		p("  SIGHUP reload took %.2f s; peak RSS (VmHWM, reset before) %s\n", big.reload.Seconds(), big.peak)
	}
	if big.userAdd > 0 {
		p("  `authsvc user add` (argon2id, password on stdin) with no server running: %.2f s\n", big.userAdd.Seconds())
	}
	if big.err != nil {
		p("  error: %v\n", big.err)
	}
}

// pgDetails writes the PostgreSQL directory's import, start, load and
// idle workers.
func (d *driver) pgDetails(w *tableWriter, res *results) {
	pg := res.pg
	p := w.p
	pgName := pg.name()
	p("\n%s\n", pgName)
	switch {
	case pg.skip != "":
		p("  not measured: %s\n", pg.skip)
	default:
		if pg.imp > 0 {
			p("  `authsvc user import --from file` of %s users: %.2f s\n", count(pg.n), pg.imp.Seconds())
		}
		if pg.start > 0 {
			p("  start %.2f s; load: %d logins of 4 users (%s) at %.1f/s, then /info %.0f req/s p99 %s\n",
				pg.start.Seconds(), sum(pg.logins.statuses), statusText(pg.logins.statuses), pg.logins.rate, pg.info.rps, ms(pg.info.p99))
			p("  RSS %s\n", pg.rss)
		}
		if idle := pg.idle; idle.rss.server > 0 {
			p("  the hash workers exited %.0f s after the load (--hash-worker-idle); RSS then %s\n", idle.wait.Seconds(), idle.rss)
		}
		if idle := pg.idle; idle.err == nil && idle.cold > 0 {
			p("  login latency: first after the workers exited (one starts) %s; warm (median of 5) %s; after a 3 s pause (workers running, memory returned) %s\n",
				ms(idle.cold.Seconds()*1e3), ms(idle.warm.Seconds()*1e3), ms(idle.released.Seconds()*1e3))
		}
		if j := pg.junk; j.requests > 0 {
			p("  a flood of one made-up personal access token with a valid checksum (wrk -c%d, 2 s): %.0f req/s, %d of %d refused; %d transactions of the\n",
				d.cfg.conns, j.rps, j.refused, j.requests, j.xacts)
			p("   database in a %.0f s window around it (pg_stat_database; the window holds the watch's poll, one a second): %.4f a request\n",
				j.window.Seconds(), j.perRequest())
		}
		if pg.junk.err != nil {
			p("  junk personal access tokens: error: %v\n", pg.junk.err)
		}
		if pg.err != nil {
			p("  error: %v\n", pg.err)
		}
	}
}

// inprocDetails writes /info by live tokens, and what the access log
// costs.
func (d *driver) inprocDetails(w *tableWriter, res *results) {
	p := w.p
	if len(res.inproc) > 0 {
		p("\n/info by live tokens (in-process server: the real handler and memory store preloaded, driven by wrk)\n")
		p("                                       req/s       p50       p99   p99 range of runs\n")
		for _, t := range res.inprocTs {
			rs := res.inproc[t.name]
			xs := field(rs, p99)
			p("  %-32s %8.0f %9s %9s   %s – %s\n", t.label, median(field(rs, rps)), ms(median(field(rs, p50))), ms(median(xs)), ms(slices.Min(xs)), ms(slices.Max(xs)))
		}
		if k, n := res.inproc["inproc-1k"], res.inproc["inproc-1k-nolog"]; len(k) > 0 && len(n) > 0 {
			with, without := median(field(k, rps)), median(field(n, rps))
			p("  access log (batched by newLogWriter, as serve writes it): %.0f req/s with it, %.0f without (logger drops lines unformatted): it costs %.0f %% of /info throughput\n", with, without, 100*(1-with/without))
		}
	}
}

// goDetails writes the Go micro-benchmarks and the /info handler's
// allocation sites.
func (d *driver) goDetails(w *tableWriter, res *results) {
	p := w.p
	p("\nGo micro-benchmarks (go test -bench -benchmem)      ns/op      B/op   allocs/op\n")
	for _, mb := range res.gob.micro {
		p("  %-46s %8.0f %9.0f %11.0f\n", mb.name, mb.nsOp, mb.bytesOp, mb.allocsOp)
	}
	p("  InfoHandler/discard is the handler's own cost; -nolog drops the access-log line before formatting it.\n")
	p("  InfoHandlerPAT: the same with a personal access token; InfoJunkPAT: a made-up one, refused by its checksum (401).\n")

	if len(res.gob.sites) > 0 {
		total := 0.0
		for _, s := range res.gob.sites {
			total += s.perRequest
		}
		p("\n/info handler allocations per request: %.1f (every allocation sampled over %d requests; target: as few as possible)\n", total, res.gob.censusN)
		for _, s := range res.gob.sites {
			if s.perRequest >= 0.01 {
				p("  %5.2f  %-36s %s\n", s.perRequest, s.origin, s.callee)
			}
		}
	}
}

// patTargets writes the targets of issue 30: a personal access token's
// /info against a session's on the same server, and the junk-token flood.
func (d *driver) patTargets(w *tableWriter, res *results) {
	row, notMeasured := w.row, w.notMeasured
	w.p("\n%-65s%-25s%s\n", "Targets (issue #30)", "figure", "target")
	const patFigure = "/info, personal access token ÷ session, same server"
	if pat, sess := res.info["authsvc-pat"], res.info["authsvc"]; len(pat) > 0 && len(sess) > 0 {
		// Paired: both kinds run in every round, next to each other.
		r := pairedRatio(pat, sess)
		row(patFigure, fmt.Sprintf("%.2f (medians %.2f)", r, median(field(pat, rps))/median(field(sess, rps))), "≥ 0.95", verdict(r >= 0.95))
	} else {
		notMeasured(patFigure, "≥ 0.95", fmt.Errorf("no authsvc-pat server (bench/run.sh mints its token)"))
	}
	j := res.junk
	const cmdFigure, rateFigure = "junk personal access tokens: Redis commands per request", "junk personal access tokens ÷ live session, Redis: rate"
	if len(j.runs[junkPATKind]) == 0 {
		notMeasured(cmdFigure, "0", j.err)
		notMeasured(rateFigure, "(no target)", j.err)
		return
	}
	per, n, req, _ := j.perRequest(junkPATKind)
	// A round trip a request would be 1 or more; fewer than one command
	// in a thousand requests is background (a touch of the live session
	// flushed late), not the junk's.
	row(cmdFigure, fmt.Sprintf("%.4f (%d in %s req)", per, n, count(req/1000*1000)), "0", verdict(per < 0.001))
	r := pairedRatio(j.wrkRuns(junkPATKind), j.wrkRuns(junkSession))
	row(rateFigure, fmt.Sprintf("%.2f", r), "(no target)", "")
}

// junkDetails writes the junk-token part, kind by kind.
func (d *driver) junkDetails(w *tableWriter, res *results) {
	j := res.junk
	if len(j.kinds) == 0 {
		if j.err != nil {
			w.p("\njunk tokens on Redis: not measured: %v\n", j.err)
		}
		return
	}
	w.p("\n/info on one authsvc on Redis (its default cache), junk tokens: %d alternating rounds × %s; Redis INFO commandstats\n", d.cfg.junkRounds, seconds(d.cfg.infoDur))
	w.p("  %-36s %8s %9s %12s  %s\n", "token", "req/s", "÷session", "Redis/req", "Redis commands per request, by name (ping: the cache's link check, 50/s)")
	for _, k := range j.kinds {
		per, _, req, byName := j.perRequest(k)
		w.p("  %-36s %8.0f %9.2f %12.4f  %s\n", junkLabel(k), j.rate(k), pairedRatio(j.wrkRuns(k), j.wrkRuns(junkSession)), per, callText(byName, float64(req)))
	}
	var idle int64
	all := make(map[string]int64)
	for _, calls := range j.idle {
		for k, v := range calls {
			all[k] += v
		}
		idle += commands(calls)
	}
	w.p("  no requests: %d windows of %s: %d Redis commands (%s)\n", len(j.idle), seconds(d.cfg.infoDur), idle, callText(all, 1))
	w.p("  (÷session: paired, the median of each round's ratio; Redis/req leaves out the link checks)\n")
	w.p("  (every request of a run bears one token: wrk sends one fixed header; a checksum failure is refused before any look-up,\n")
	w.p("   so nothing of it can be cached; a made-up session token has a real one's form and costs a look-up)\n")
	if j.err != nil {
		w.p("  error: %v\n", j.err)
	}
}
