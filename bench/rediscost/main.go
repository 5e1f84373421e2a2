// Command rediscost measures what authsvc's operations cost a Redis: for
// a login, a failed login, and a token check that misses the instance's
// cache, the round trips and the Redis commands (scripts' inner commands
// included, from INFO commandstats) each takes, and the Redis CPU it
// spends (INFO cpu, user + system), from which it derives how many of each
// one Redis core carries. It drives the real store and throttle, from
// -c goroutines, against the Redis at -redis (a throwaway one: it writes
// keys under a prefix of its own and flushes nothing).
//
//	go run ./bench/rediscost -redis redis://127.0.0.1:6379/0
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"authsvc/internal/throttle"
	"authsvc/internal/throttle/redisthrottle"
	"authsvc/internal/tokens"
	"authsvc/internal/tokens/redisstore"

	"github.com/redis/go-redis/v9"
)

func main() {
	url := flag.String("redis", "redis://127.0.0.1:6379/0", "the Redis to measure")
	n := flag.Int("n", 20000, "operations of each kind")
	conc := flag.Int("c", 32, "goroutines")
	flag.Parse()
	if err := run(*url, *n, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "rediscost:", err)
		os.Exit(1)
	}
}

// usage is what Redis reports having done: commands by name, and CPU.
type usage struct {
	calls map[string]int64
	cpu   float64 // seconds, user + system, main thread included
}

func measure(ctx context.Context, c *redis.Client) (usage, error) {
	u := usage{calls: make(map[string]int64)}
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ",")
		v, _ := strconv.ParseInt(num, 10, 64)
		u.calls[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	cpu, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(cpu, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			u.cpu += f
		}
	}
	return u, nil
}

// cost is one kind of operation's measured cost, per operation.
type cost struct {
	name              string
	roundTrips, cmds  float64
	cpuMicros, perSec float64 // Redis CPU per operation; operations one core carries
}

// diff returns the per-operation cost of n operations between a and b:
// round trips are the script calls (EVALSHA, EVAL), commands every call
// but INFO's own.
func diff(name string, a, b usage, n int) cost {
	var trips, cmds int64
	for k, v := range b.calls {
		d := v - a.calls[k]
		switch k {
		case "info":
			continue
		case "evalsha", "eval":
			trips += d
		}
		cmds += d
	}
	c := cost{name: name, roundTrips: float64(trips) / float64(n), cmds: float64(cmds) / float64(n)}
	c.cpuMicros = (b.cpu - a.cpu) / float64(n) * 1e6
	if c.cpuMicros > 0 {
		c.perSec = 1e6 / c.cpuMicros
	}
	return c
}

func run(url string, n, conc int) error {
	client, err := redisstore.Dial(url)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	prefix := fmt.Sprintf("rediscost%d:", time.Now().UnixNano())
	store := redisstore.New(client, prefix)
	defer store.Close()
	store.SetCacheSize(0) // every check is a miss: what a cache miss costs
	o := &operations{
		ctx:     ctx,
		store:   store,
		th:      redisthrottle.New(client, prefix, throttle.Config{PairFailures: 1 << 30, UserFailures: 1 << 30, AddrRate: 1e9, AddrBurst: 1 << 30}),
		now:     time.Now(),
		digests: make([]tokens.Digest, n),
	}
	for _, op := range []struct {
		name string
		f    func(int) error
	}{{"login (throttle check, success, issue)", o.login}, {"failed login (throttle check, failure)", o.failed}, {"token check, cache miss", o.check}} {
		a, err := measure(ctx, client)
		if err != nil {
			return err
		}
		start := time.Now()
		if err := parallel(n, conc, op.f); err != nil {
			return fmt.Errorf("%s: %w", op.name, err)
		}
		took := time.Since(start)
		b, err := measure(ctx, client)
		if err != nil {
			return err
		}
		c := diff(op.name, a, b, n)
		fmt.Printf("%-42s %5.2f round trips  %6.1f commands  %6.1f µs Redis CPU  → %8.0f /s per Redis core  (%d in %v from %d goroutines)\n",
			c.name, c.roundTrips, c.cmds, c.cpuMicros, c.perSec, n, took.Round(time.Millisecond), conc)
	}
	return nil
}

// parallel calls f(i) for i from 0 to n-1 on conc goroutines, and returns
// the first error, which stops its goroutine.
func parallel(n, conc int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for g := range conc {
		wg.Go(func() {
			for i := g; i < n; i += conc {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// operations are the operations measured, each on the i-th of n users
// and addresses.
type operations struct {
	ctx     context.Context
	store   tokens.Store
	th      throttle.Throttle
	now     time.Time
	digests []tokens.Digest // issued by login, looked up by check
}

func user(i int) string { return "user" + strconv.Itoa(i%1000) }
func addr(i int) string { return "10.0." + strconv.Itoa(i%250) + "." + strconv.Itoa(i/250%250) }

// login is a login: a throttle check, its success, and a token issued.
func (o *operations) login(i int) error {
	if _, _, err := o.th.Reserve(o.ctx, user(i), addr(i), o.now); err != nil {
		return err
	}
	if err := o.th.Success(o.ctx, user(i), addr(i), o.now); err != nil {
		return err
	}
	_, d := tokens.New()
	o.digests[i] = d
	_, err := o.store.Issue(o.ctx, d, tokens.Session{Username: user(i), Stamp: 1, ID: tokens.NewSessionID(), ExpiresAt: o.now.Add(time.Hour)}, 100, o.now)
	return err
}

// failed is a failed login: a throttle check and its failure.
func (o *operations) failed(i int) error {
	if _, _, err := o.th.Reserve(o.ctx, user(i), addr(i), o.now); err != nil {
		return err
	}
	return o.th.Failure(o.ctx, user(i), addr(i), o.now)
}

// check is a token check that misses the cache.
func (o *operations) check(i int) error {
	_, err := o.store.Lookup(o.ctx, o.digests[i], o.now)
	return err
}
