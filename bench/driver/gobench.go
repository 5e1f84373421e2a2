package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

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

// An allocSite is one line of BenchmarkInfoAllocSites.
type allocSite struct {
	perRequest     float64
	origin, callee string
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

// goResults are the Go benchmarks' results.
type goResults struct {
	heap, micro []goBench
	sites       []allocSite
	censusN     int
}

// goBenchmarks runs the heap per token, the micro-benchmarks and the
// allocation census from authsvc's test binary.
func (d *driver) goBenchmarks() (goResults, error) {
	g := goResults{censusN: 20000}
	d.logf("== go benchmarks (%s)", d.cfg.testbin)
	out, err := d.command(d.cfg.testbin, nil, "-test.run", "^$", "-test.bench", "^BenchmarkHeapPerToken$", "-test.benchtime", "1x")
	if err != nil {
		return g, err
	}
	fmt.Fprint(d.runs, out)
	g.heap = parseGoBench(out)
	out, err = d.command(d.cfg.testbin, nil, "-test.run", "^$", "-test.bench", "^Benchmark(ParseAuthorization|DigestLookup|InfoHandler|InfoHandlerPAT|InfoJunkPAT)$", "-test.benchmem", "-test.benchtime", "1s")
	if err != nil {
		return g, err
	}
	fmt.Fprint(d.runs, out)
	g.micro = parseGoBench(out)
	out, err = d.command(d.cfg.testbin, nil, "-test.run", "^$", "-test.bench", "^BenchmarkInfoAllocSites$", "-test.benchtime", strconv.Itoa(g.censusN)+"x")
	if err != nil {
		return g, err
	}
	fmt.Fprint(d.runs, out)
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, "ALLOC\t"); i > 0 {
			line = line[i:] // after a benchmark's name, should the census print there
		}
		f := strings.Split(line, "\t")
		if len(f) == 4 && f[0] == "ALLOC" {
			v, _ := strconv.ParseFloat(f[1], 64)
			g.sites = append(g.sites, allocSite{perRequest: v, origin: f[2], callee: f[3]})
		}
	}
	slices.SortFunc(g.sites, func(a, b allocSite) int {
		if a.perRequest != b.perRequest {
			if a.perRequest > b.perRequest {
				return -1
			}
			return 1
		}
		return strings.Compare(a.origin+a.callee, b.origin+b.callee)
	})
	return g, nil
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
