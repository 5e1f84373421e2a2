package main

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A wrkResult is one wrk run.
type wrkResult struct {
	rps      float64 // Requests/sec, all statuses
	p50, p99 float64 // ms
	requests int
	seconds  float64
	non2xx   int
	sockErr  string
	statuses map[int]int // by status, when the script counts them (login.lua)
}

// okRate is the rate of 2xx replies.
func (r wrkResult) okRate() float64 { return float64(r.requests-r.non2xx) / r.seconds }

var (
	reRequests = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m|h)`)
	reRPS      = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	reP50      = regexp.MustCompile(`(?m)^\s+50%\s+([\d.]+)(us|ms|s|m|h)`)
	reP99      = regexp.MustCompile(`(?m)^\s+99%\s+([\d.]+)(us|ms|s|m|h)`)
	reNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	reSockErr  = regexp.MustCompile(`Socket errors: (.*)`)
	reStatus   = regexp.MustCompile(`(?m)^status (\d+) (\d+)$`)
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
	for _, m := range reStatus.FindAllStringSubmatch(out, -1) {
		if r.statuses == nil {
			r.statuses = make(map[int]int)
		}
		code, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		r.statuses[code] += n
	}
	return r, nil
}

// wrkCmd returns a wrk command: /info with the target's Authorization
// value when login is false, else the login script (logging in as user).
func (d *driver) wrkCmd(t *target, login bool, conns int, dur time.Duration) (*exec.Cmd, context.CancelFunc) {
	args := []string{"-t1", "-c" + strconv.Itoa(conns), "-d" + seconds(dur), "--latency", "--timeout", "30s"}
	if login {
		args = append(args, "-s", d.cfg.lua, t.url+"/api/auth/login/")
	} else {
		args = append(args, "-H", "authorization: "+t.authorization(), t.url+"/api/auth/info")
	}
	ctx, cancel := context.WithTimeout(d.ctx, dur+60*time.Second)
	cmd := exec.CommandContext(ctx, d.cfg.wrk, args...)
	if login {
		cmd.Env = append(cmd.Environ(), "BENCH_USER="+t.loginUser, "BENCH_PASSWORD="+d.password)
	}
	return cmd, cancel
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
	if !login {
		d.countInfo(what+" "+t.name, r)
	}
	return r, nil
}

// rounds runs one wrk per target per round, rotating the order.
func (d *driver) rounds(what string, ts []*target, n int, conns int, dur time.Duration) (map[string][]wrkResult, error) {
	res := make(map[string][]wrkResult)
	for i := range n {
		for _, t := range rotate(ts, i) {
			r, err := d.wrk(what, t, false, conns, dur)
			if err != nil {
				return nil, err
			}
			res[t.name] = append(res[t.name], r)
		}
	}
	return res, nil
}

// rotate returns ts started at element i mod len(ts): each round starts with
// another server, so that none is always first after a pause.
func rotate(ts []*target, i int) []*target {
	i %= len(ts)
	return append(slices.Clone(ts[i:]), ts[:i]...)
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

// statusText lists a reply count by status, e.g. "200: 41, 429: 3".
func statusText(statuses map[int]int) string {
	codes := make([]int, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d: %d", c, statuses[c]))
	}
	if len(parts) == 0 {
		return "no replies"
	}
	return strings.Join(parts, ", ")
}
