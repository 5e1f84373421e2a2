package main

import "fmt"

// timingCases are the benchmarks of internal/httpapi whose answers must
// not tell one case from another by their time (timing_bench_test.go),
// each with its row's name. Each reports "max-dev-%": how far a case's
// median strays from the reference case's, at most.
var timingCases = []struct{ bench, figure string }{
	{"LoginFailureTiming", "login failures alike (wrong password, unknown user, …): slowest ÷ fastest median"},
	{"IntrospectTiming", "introspection alike (live, unknown, revoked, expired, malformed): median spread"},
	{"ResetConfirmTiming", "reset confirm alike (good link, wrong token, unknown user): median spread"},
	{"ResetRequestTiming", "reset request alike (user, disabled, no address, no one): median spread"},
}

// timingTarget is every timing row's target, in percent.
const timingTarget = 10.0

// A timingResult is one timing benchmark's spread, in percent, or why it
// was not measured.
type timingResult struct {
	devPct float64
	err    error
}

// timing runs the timing benchmarks from internal/httpapi's test binary,
// once each (-benchtime 1x: each is a fixed number of alternating rounds),
// and returns their spreads by benchmark name.
func (d *driver) timing() map[string]timingResult {
	d.logf("== timing: failures and dead tokens answered in the same time (internal/httpapi's timing benchmarks)")
	res := make(map[string]timingResult, len(timingCases))
	for _, tc := range timingCases {
		out, err := d.command(d.cfg.httpapibin, nil, "-test.run", "^$", "-test.bench", "^Benchmark"+tc.bench+"$", "-test.benchtime", "1x")
		if err != nil {
			res[tc.bench] = timingResult{err: err}
			continue
		}
		r := timingResult{err: fmt.Errorf("no max-dev-%% in its output")}
		for _, b := range parseGoBench(out) {
			if v, ok := b.metrics["max-dev-%"]; ok && b.name == tc.bench {
				r = timingResult{devPct: v}
			}
		}
		d.logf("%s: max-dev %.1f %%", tc.bench, r.devPct)
		res[tc.bench] = r
	}
	return res
}

// unknownFlood runs BenchmarkUnknownUserFlood from internal/httpapi's test
// binary for 2 s: logins of made-up names from one client, each of which
// may recheck the users file, once a client per 100 ms at most. It
// returns the rechecks per login.
func (d *driver) unknownFlood() timingResult {
	d.logf("== unknown-name login flood: rechecks of the users file per login")
	out, err := d.command(d.cfg.httpapibin, nil, "-test.run", "^$", "-test.bench", "^BenchmarkUnknownUserFlood$", "-test.benchtime", "2s")
	if err != nil {
		return timingResult{err: err}
	}
	for _, b := range parseGoBench(out) {
		if v, ok := b.metrics["rechecks/op"]; ok && b.name == "UnknownUserFlood" {
			d.logf("UnknownUserFlood: %.3f rechecks a login", v)
			return timingResult{devPct: v}
		}
	}
	return timingResult{err: fmt.Errorf("no rechecks/op in its output")}
}

// unknownFloodRow writes the unknown-name flood's row.
func unknownFloodRow(w *tableWriter, r timingResult) {
	const figure, target = "users-file rechecks per unknown-name login (one client flooding)", "≤ 0.1"
	if r.err != nil {
		w.notMeasured(figure, target, r.err)
		return
	}
	w.row(figure, fmt.Sprintf("%.3f", r.devPct), target, verdict(r.devPct <= 0.1))
}

// timingRows writes the timing rows of the table.
func timingRows(w *tableWriter, res map[string]timingResult) {
	target := fmt.Sprintf("≤ %.0f %%", timingTarget)
	for _, tc := range timingCases {
		r, ok := res[tc.bench]
		switch {
		case !ok:
			w.notMeasured(tc.figure, target, fmt.Errorf("not run"))
		case r.err != nil:
			w.notMeasured(tc.figure, target, r.err)
		default:
			w.row(tc.figure, fmt.Sprintf("%.1f %%", r.devPct), target, verdict(r.devPct <= timingTarget))
		}
	}
}
