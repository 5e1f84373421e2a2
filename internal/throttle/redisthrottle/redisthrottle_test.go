package redisthrottle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"authsvc/internal/redisurl"
	"authsvc/internal/testservers"
	"authsvc/internal/throttle"
	"authsvc/internal/throttle/throttletest"
	"authsvc/internal/tokens/redisstore"

	"github.com/redis/go-redis/v9"
)

// throttleRedisClient returns a client of the Redis at url, dialled as
// serve dials it, closed when t ends.
func throttleRedisClient(t testing.TB, url string) *redis.Client {
	t.Helper()
	client, err := redisstore.Dial(url)
	if err != nil {
		t.Fatalf("redisstore.Dial(%q) = %v", url, err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// clusterClient returns a client of the Redis Cluster whose nodes are at
// addrs, dialled from a redis+cluster:// URL with redisurl's bounds, closed
// when t ends.
func clusterClient(t testing.TB, addrs []string) *redis.ClusterClient {
	t.Helper()
	url := "redis+cluster://" + strings.Join(addrs, ",")
	opt, err := redisurl.ParseCluster(url)
	if err != nil {
		t.Fatalf("redisurl.ParseCluster(%q) = %v", url, err)
	}
	client := redis.NewClusterClient(opt)
	t.Cleanup(func() { client.Close() })
	return client
}

func TestRedisThrottleConformance(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	client := throttleRedisClient(t, url)
	throttletest.Run(t, func(t *testing.T, cfg throttle.Config) throttle.Throttle {
		th := New(client, testservers.UniquePrefix(), cfg)
		if th.split {
			t.Fatal("New(*redis.Client, ...) splits its scripts; want one script per call on one Redis")
		}
		return th
	})
}

// TestRedisThrottleSplitConformance: the cluster's two scripts per call
// keep the rules on one Redis too, where nothing but their order can be
// at fault.
func TestRedisThrottleSplitConformance(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	client := throttleRedisClient(t, url)
	throttletest.Run(t, func(t *testing.T, cfg throttle.Config) throttle.Throttle {
		th := New(client, testservers.UniquePrefix(), cfg)
		th.split = true
		return th
	})
}

// TestRedisThrottleClusterConformance: the suite, unchanged, on a
// three-primary Redis Cluster.
func TestRedisThrottleClusterConformance(t *testing.T) {
	addrs, _ := testservers.RedisCluster(t)
	client := clusterClient(t, addrs)
	throttletest.Run(t, func(t *testing.T, cfg throttle.Config) throttle.Throttle {
		th := New(client, testservers.UniquePrefix(), cfg)
		if !th.split {
			t.Fatal("New(*redis.ClusterClient, ...) runs one script per call; want the user's and the address's apart")
		}
		return th
	})
}

// A backend makes a new client of one Redis deployment, as each server of
// a fleet has its own.
type backend struct {
	name      string
	newClient func(t testing.TB) redis.Scripter
}

// backends returns a standalone Redis and a three-primary cluster, for the
// tests of several instances sharing one.
func backends(t *testing.T) []backend {
	url, _, _ := testservers.Redis(t)
	addrs, _ := testservers.RedisCluster(t)
	return []backend{
		{"standalone", func(t testing.TB) redis.Scripter { return throttleRedisClient(t, url) }},
		{"cluster", func(t testing.TB) redis.Scripter { return clusterClient(t, addrs) }},
	}
}

// twoInstances returns two throttles with cfg on be, each with its own
// client and under one fresh prefix, as two servers sharing a Redis have.
func twoInstances(t *testing.T, be backend, cfg throttle.Config) (a, b throttle.Throttle) {
	t.Helper()
	prefix := testservers.UniquePrefix()
	var th [2]throttle.Throttle
	for i := range th {
		th[i] = New(be.newClient(t), prefix, cfg)
	}
	return th[0], th[1]
}

// TestRedisThrottleInstances: two instances splitting the failures between
// them throttle as one would, for the pair, the user and the address.
func TestRedisThrottleInstances(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) { testInstances(t, be) })
	}
}

func testInstances(t *testing.T, be backend) {
	const alice, home = "alice", "192.0.2.1"
	t.Run("pair", func(t *testing.T) {
		a, b := twoInstances(t, be, throttle.Config{AddrRate: throttletest.FastAddrs, AddrBurst: throttletest.FastBurst})
		on := [2]throttletest.Driver{{T: t, Throttle: a}, {T: t, Throttle: b}}
		for i := range 5 {
			on[i%2].Reserve(alice, home, 0, 0, true)
			on[i%2].Fail(alice, home, 0)
		}
		on[0].Reserve(alice, home, 0, time.Second, false)
		on[1].Reserve(alice, home, 0, time.Second, false)
		on[1].Reserve(alice, home, time.Second, 0, true)
		on[0].Wait(alice, home, time.Second) // b's attempt is in flight
		on[1].Fail(alice, home, time.Second)
		on[0].Reserve(alice, home, time.Second, 2*time.Second, false)
		on[0].Reserve(alice, home, 3*time.Second, 0, true)
		on[0].Succeed(alice, home, 3*time.Second)
		on[1].Reserve(alice, home, 3*time.Second, 0, true) // the success on a cleared the pair for b
	})
	t.Run("user", func(t *testing.T) {
		a, b := twoInstances(t, be, throttle.Config{UserFailures: 4, AddrRate: throttletest.FastAddrs, AddrBurst: throttletest.FastBurst})
		on := [2]throttletest.Driver{{T: t, Throttle: a}, {T: t, Throttle: b}}
		for i := range 4 {
			addr := fmt.Sprint("203.0.113.", i)
			on[i%2].Reserve(alice, addr, 0, 0, true)
			on[i%2].Fail(alice, addr, 0)
		}
		on[0].Reserve(alice, home, 0, 15*time.Minute, false)
		on[1].Reserve(alice, home, 0, 15*time.Minute, false)
	})
	t.Run("code lock", func(t *testing.T) {
		a, b := twoInstances(t, be, throttle.Config{})
		on := [2]throttletest.Driver{{T: t, Throttle: a}, {T: t, Throttle: b}}
		var never time.Time
		for i := range throttle.MaxCodeFailures {
			on[i%2].ReserveCode(alice, never, 0, i+1, true)
		}
		on[0].ReserveCode(alice, never, time.Hour, 0, false)
		on[1].ReserveCode(alice, never, time.Hour, 0, false)
		on[1].ReserveCode(alice, throttletest.T0.Add(time.Minute), time.Hour, 1, true) // unlocked a minute in
		on[0].CodeSuccess(alice)
		on[1].ReserveCode(alice, never, time.Hour, 1, true) // the success on a cleared it for b
	})
	t.Run("address", func(t *testing.T) {
		a, b := twoInstances(t, be, throttle.Config{})
		on := [2]throttletest.Driver{{T: t, Throttle: a}, {T: t, Throttle: b}}
		for i := range 10 {
			user := fmt.Sprint("user", i)
			on[i%2].Reserve(user, home, 0, 0, true)
			on[i%2].Fail(user, home, 0)
		}
		on[0].Reserve("user10", home, 0, time.Second, false)
		on[1].Reserve("user10", home, 0, time.Second, false)
	})
}

// TestRedisThrottleParallelInstances: attempts sent at once to two
// instances get no more places than one instance gives.
func TestRedisThrottleParallelInstances(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) { testParallelInstances(t, be) })
	}
}

func testParallelInstances(t *testing.T, be backend) {
	for _, tt := range []struct {
		name string
		cfg  throttle.Config
		addr func(i int) string
		want int
	}{
		{"pair", throttle.Config{AddrRate: throttletest.FastAddrs, AddrBurst: throttletest.FastBurst}, throttletest.OneAddr, 5},
		{"user", throttle.Config{UserFailures: 3, AddrRate: throttletest.FastAddrs, AddrBurst: throttletest.FastBurst},
			func(i int) string { return fmt.Sprint("203.0.113.", i) }, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, b := twoInstances(t, be, tt.cfg)
			instances := [2]throttle.Throttle{a, b}
			var wg sync.WaitGroup
			var admitted atomic.Int64
			start := make(chan struct{})
			for i := range 20 {
				wg.Go(func() {
					<-start
					v, _, err := instances[i%2].Reserve(context.Background(), "alice", tt.addr(i), throttletest.T0)
					if err != nil {
						t.Errorf("reserve = %v", err)
					}
					if v == throttle.Admitted {
						admitted.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if got := admitted.Load(); int(got) != tt.want {
				t.Errorf("20 reservations at once across two instances at a limit of %d: %d admitted", tt.want, got)
			}
		})
	}
}

// TestRedisThrottleUnavailable: with Redis down every call fails closed
// within redisThrottleTimeout (and a little), and the throttle works again once
// Redis is back.
func TestRedisThrottleUnavailable(t *testing.T) {
	url, stop, restart := testservers.Redis(t)
	if stop == nil {
		t.Skip("needs a Redis it can stop: unset AUTHSVC_TEST_REDIS")
	}
	th := New(throttleRedisClient(t, url), testservers.UniquePrefix(), throttle.Config{})
	ctx := context.Background()
	if v, _, err := th.Reserve(ctx, "alice", "192.0.2.1", throttletest.T0); v != throttle.Admitted || err != nil {
		t.Fatalf("reserve with Redis up = %v, %v; want admitted, nil", v, err)
	}

	stop()
	calls := []struct {
		name string
		call func() error
	}{
		{"reserve", func() error {
			v, _, err := th.Reserve(ctx, "alice", "192.0.2.1", throttletest.T0)
			if v == throttle.Admitted {
				t.Error("reserve with Redis down admitted the attempt")
			}
			return err
		}},
		{"failure", func() error { return th.Failure(ctx, "alice", "192.0.2.1", throttletest.T0) }},
		{"success", func() error { return th.Success(ctx, "alice", "192.0.2.1", throttletest.T0) }},
		{"release", func() error { return th.Release(ctx, "alice", "192.0.2.1") }},
	}
	for _, c := range calls {
		start := time.Now()
		err := c.call()
		if elapsed := time.Since(start); elapsed >= redisThrottleTimeout+500*time.Millisecond {
			t.Errorf("%s with Redis down took %v; want < %v", c.name, elapsed, redisThrottleTimeout+500*time.Millisecond)
		}
		if !errors.Is(err, throttle.ErrUnavailable) {
			t.Errorf("%s with Redis down = %v; want %v", c.name, err, throttle.ErrUnavailable)
		}
	}

	restart()
	start := time.Now()
	for {
		v, _, err := th.Reserve(ctx, "alice", "192.0.2.1", throttletest.T0)
		if err == nil {
			if v != throttle.Admitted {
				t.Errorf("reserve on the restarted (empty) Redis = %v; want admitted", v)
			}
			break
		}
		if time.Since(start) >= 5*time.Second {
			t.Fatalf("reserve 5s after Redis came back = %v; want nil", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := th.Failure(ctx, "alice", "192.0.2.1", throttletest.T0); err != nil {
		t.Errorf("failure after Redis came back = %v", err)
	}
}

// TestRedisThrottleSettleOutlivesCaller: a failure is recorded even when
// the request that made it has gone (its context cancelled), or a client
// hanging up at the right moment would guess for free.
func TestRedisThrottleSettleOutlivesCaller(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	th := New(throttleRedisClient(t, url), testservers.UniquePrefix(), throttle.Config{PairFailures: 1, AddrRate: throttletest.FastAddrs, AddrBurst: throttletest.FastBurst})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if v, _, err := th.Reserve(ctx, "alice", "192.0.2.1", throttletest.T0); v != throttle.Admitted || err != nil {
		t.Fatalf("reserve = %v, %v; want admitted, nil", v, err)
	}
	if err := th.Failure(ctx, "alice", "192.0.2.1", throttletest.T0); err != nil {
		t.Fatalf("failure with a cancelled context = %v; want nil", err)
	}
	throttletest.Driver{T: t, Throttle: th}.Reserve("alice", "192.0.2.1", 0, time.Second, false)
}

// TestRedisThrottleKeys checks the key layout (no username in a key name)
// and that every key expires: a streak a margin after its window, a
// pending one no sooner than a window and a margin after its reservation,
// a bucket a margin after it is full again.
func TestRedisThrottleKeys(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	client, prefix := throttleRedisClient(t, url), testservers.UniquePrefix()
	th := New(client, prefix, throttle.Config{})
	ctx := context.Background()
	d := throttletest.Driver{T: t, Throttle: th}
	const alice, home = "alice", "192.0.2.1"
	const w, m = 15 * time.Minute, throttleKeyMargin

	pairSum := sha256.Sum256([]byte(alice + "\x00" + home))
	userSum := sha256.Sum256([]byte(alice))
	pair := prefix + "th:{" + hex.EncodeToString(userSum[:]) + "}:p:" + hex.EncodeToString(pairSum[:])
	user := prefix + "th:{" + hex.EncodeToString(userSum[:]) + "}:u"
	addr := prefix + "th:a:" + home

	// wantKey checks key's fields and that it expires within (ttl-1s, ttl].
	wantKey := func(key string, fields map[string]string, ttl time.Duration) {
		t.Helper()
		got, err := client.HGetAll(ctx, key).Result()
		if err != nil || fmt.Sprint(got) != fmt.Sprint(fields) {
			t.Errorf("HGETALL %s = %v, %v; want %v", key, got, err, fields)
		}
		if got, err := client.PTTL(ctx, key).Result(); err != nil || got > ttl || got <= ttl-time.Second {
			t.Errorf("PTTL %s = %v, %v; want in (%v, %v]", key, got, err, ttl-time.Second, ttl)
		}
	}
	wantGone := func(key string) {
		t.Helper()
		if n, err := client.Exists(ctx, key).Result(); n != 0 || err != nil {
			t.Errorf("EXISTS %s = %d, %v; want 0", key, n, err)
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprint(throttletest.T0.Add(d).UnixMilli()) }

	d.Reserve(alice, home, 0, 0, true)
	wantKey(pair, map[string]string{"n": "0", "last": "0", "pending": "1"}, w+m)
	wantKey(user, map[string]string{"n": "0", "last": "0", "pending": "1"}, w+m)
	wantGone(addr) // reservations take no token
	d.Release(alice, home)
	wantGone(pair)
	wantGone(user)

	d.Reserve(alice, home, 0, 0, true)
	d.Fail(alice, home, 0)
	wantKey(pair, map[string]string{"n": "1", "last": ms(0), "pending": "0"}, w+m)
	wantKey(user, map[string]string{"n": "1", "last": ms(0), "pending": "0"}, w+m)
	wantKey(addr, map[string]string{"tokens": "9", "last": ms(0)}, time.Second+m) // one token short of 10, at 1/s

	// Ten minutes on, the streak has five minutes and the margin to live,
	// but not while an attempt is pending.
	d.Reserve(alice, home, 10*time.Minute, 0, true)
	wantKey(pair, map[string]string{"n": "1", "last": ms(0), "pending": "1"}, w+m)
	d.Succeed(alice, home, 10*time.Minute)
	wantGone(pair)
	wantKey(user, map[string]string{"n": "1", "last": ms(0), "pending": "0"}, w-10*time.Minute+m)

	// A release keeps the expiry the reservation set.
	d.Reserve(alice, home, 10*time.Minute, 0, true)
	d.Release(alice, home)
	wantKey(user, map[string]string{"n": "1", "last": ms(0), "pending": "0"}, w+m)

	// A failure past the window starts a new streak.
	d.Fail(alice, home, w)
	wantKey(user, map[string]string{"n": "1", "last": ms(w), "pending": "0"}, w+m)

	// Many keys, mixed calls: every key has an expiry and none names alice.
	for i := range 20 {
		username, from := fmt.Sprint("alice", i), fmt.Sprint("198.51.100.", i%3)
		if v, _, _ := th.Reserve(ctx, username, from, throttletest.T0); v == throttle.Admitted {
			switch i % 3 {
			case 0:
				th.Failure(ctx, username, from, throttletest.T0)
			case 1:
				th.Success(ctx, username, from, throttletest.T0)
			case 2:
				th.Release(ctx, username, from)
			}
		}
		th.Reserve(ctx, username, from, throttletest.T0) // left pending
	}
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("KEYS %s* = %d keys, %v", prefix, len(keys), err)
	}
	for _, key := range keys {
		if strings.Contains(key, "alice") {
			t.Errorf("key %s names a user", key)
		}
		if got, err := client.PTTL(ctx, key).Result(); err != nil || got <= 0 || got > w+m {
			t.Errorf("PTTL %s = %v, %v; want in (0, %v]", key, got, err, w+m)
		}
	}
}

// alternating is a throttle that sends each call to the next of its
// instances in turn, as a fleet behind a load balancer would.
type alternating struct {
	instances [2]throttle.Throttle
	next      atomic.Int64
}

func (a *alternating) pick() throttle.Throttle { return a.instances[a.next.Add(1)%2] }

func (a *alternating) Reserve(ctx context.Context, username, addr string, now time.Time) (throttle.Verdict, time.Duration, error) {
	return a.pick().Reserve(ctx, username, addr, now)
}

func (a *alternating) Explain(ctx context.Context, username, addr string, now time.Time) (throttle.Limits, error) {
	return a.pick().Explain(ctx, username, addr, now)
}

func (a *alternating) Failure(ctx context.Context, username, addr string, now time.Time) error {
	return a.pick().Failure(ctx, username, addr, now)
}

func (a *alternating) Success(ctx context.Context, username, addr string, now time.Time) error {
	return a.pick().Success(ctx, username, addr, now)
}

func (a *alternating) Release(ctx context.Context, username, addr string) error {
	return a.pick().Release(ctx, username, addr)
}

func (a *alternating) ReserveCode(ctx context.Context, username string, after, now time.Time) (throttle.Verdict, int, error) {
	return a.pick().ReserveCode(ctx, username, after, now)
}

func (a *alternating) CodeSuccess(ctx context.Context, username string) error {
	return a.pick().CodeSuccess(ctx, username)
}

func (a *alternating) ReleaseCode(ctx context.Context, username string) error {
	return a.pick().ReleaseCode(ctx, username)
}

func (a *alternating) CodeLocked(ctx context.Context, username string, after time.Time) (bool, error) {
	return a.pick().CodeLocked(ctx, username, after)
}

// TestRedisThrottleParallelGuessesInstances: wrong passwords sent at once
// to two instances, each asking again while attempts are in flight on
// either, get no more checks than the limit.
func TestRedisThrottleParallelGuessesInstances(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) { testParallelGuessesInstances(t, be) })
	}
}

func testParallelGuessesInstances(t *testing.T, be backend) {
	a, b := twoInstances(t, be, throttle.Config{AddrRate: throttletest.FastAddrs, AddrBurst: throttletest.FastBurst})
	d := throttletest.Driver{T: t, Throttle: &alternating{instances: [2]throttle.Throttle{a, b}}}
	if checked, refused := d.Guesses(20, "alice", throttletest.OneAddr, 0); checked != 5 || refused != 15 {
		t.Errorf("20 parallel wrong passwords on two instances at a limit of 5 = %d checked, %d refused; want 5, 15", checked, refused)
	}
}

// TestRedisThrottleClusterSlots: on a three-primary cluster, a pair's and
// its user's keys share a slot, which differs from user to user, so that
// users spread over the primaries; no call ever gets a CROSSSLOT error;
// and one script over all three keys, as on one Redis, would.
func TestRedisThrottleClusterSlots(t *testing.T) {
	addrs, _ := testservers.RedisCluster(t)
	client, prefix := clusterClient(t, addrs), testservers.UniquePrefix()
	th := New(client, prefix, throttle.Config{PairFailures: 2, UserFailures: 3})
	ctx := context.Background()

	slot := func(key string) int64 {
		t.Helper()
		n, err := client.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %s = %v", key, err)
		}
		return n
	}
	userSlots := map[int64]bool{}
	crossed := 0 // users whose slot is not their address's
	for i := range 60 {
		username, addr := fmt.Sprint("user", i), fmt.Sprint("198.51.100.", i%7)
		pairUser, addrKey := th.keys(username, addr)
		if p, u := slot(pairUser[0]), slot(pairUser[1]); p != u {
			t.Errorf("CLUSTER KEYSLOT of %q's pair key %s = %d, of its user key %s = %d; want equal", username, pairUser[0], p, pairUser[1], u)
		} else {
			userSlots[u] = true
			if u != slot(addrKey) {
				crossed++
			}
		}

		// Every call, and every outcome of Reserve, on keys of two slots.
		for try := range 4 {
			v, _, err := th.Reserve(ctx, username, addr, throttletest.T0)
			if err != nil {
				t.Fatalf("reserve(%q, %q) on the cluster = %v; want nil", username, addr, err)
			}
			if v != throttle.Admitted {
				continue
			}
			switch (i + try) % 3 {
			case 0:
				err = th.Failure(ctx, username, addr, throttletest.T0)
			case 1:
				err = th.Success(ctx, username, addr, throttletest.T0)
			case 2:
				err = th.Release(ctx, username, addr)
			}
			if err != nil {
				t.Fatalf("settling %q, %q on the cluster = %v; want nil", username, addr, err)
			}
		}
	}
	if len(userSlots) < 50 {
		t.Errorf("60 users' keys in %d slots; want them spread by the user's hash tag", len(userSlots))
	}
	if crossed == 0 {
		t.Fatal("no user's slot differs from its address's: the calls above tested no split")
	}

	// Every primary holds some of the keys.
	var mu sync.Mutex
	perNode := map[string]int64{}
	err := client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.DBSize(ctx).Result()
		mu.Lock()
		perNode[node.Options().Addr] = n
		mu.Unlock()
		return err
	})
	if err != nil || len(perNode) != 3 {
		t.Fatalf("DBSIZE on each primary = %v, %v; want 3 primaries", perNode, err)
	}
	for node, n := range perNode {
		if n == 0 {
			t.Errorf("DBSIZE on %s = 0; want some of the throttle's keys on every primary (all: %v)", node, perNode)
		}
	}

	// The check above would catch a script over keys of two slots: the
	// single-Redis script on the cluster gets CROSSSLOT.
	for i := range 60 {
		username, addr := fmt.Sprint("user", i), "203.0.113.1"
		pairUser, addrKey := th.keys(username, addr)
		if slot(pairUser[0]) == slot(addrKey) {
			continue
		}
		err := throttleReserveScript.Run(ctx, client, append(pairUser, addrKey), th.args(throttletest.T0)...).Err()
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Errorf("the single-Redis reserve script on the cluster, keys in two slots = %v; want a CROSSSLOT error", err)
		}
		return
	}
	t.Fatal("no user of 60 had a slot apart from 203.0.113.1's")
}

// TestRedisThrottleSentinelConformance: the throttle's conformance suite,
// unchanged, on a client that reaches the primary through three sentinels.
func TestRedisThrottleSentinelConformance(t *testing.T) {
	g := testservers.Sentinel(t)
	client := throttleRedisClient(t, g.URL)
	throttletest.Run(t, func(t *testing.T, cfg throttle.Config) throttle.Throttle {
		return New(client, testservers.UniquePrefix(), cfg)
	})
}

// TestRedisThrottleExplainWritesNothing: Explain, in one script or two,
// leaves every key as it found it: no place, no token, no expiry moved,
// and an expired streak, which Reserve would delete, left in place.
func TestRedisThrottleExplainWritesNothing(t *testing.T) {
	url, _, _ := testservers.Redis(t)
	client := throttleRedisClient(t, url)
	ctx := context.Background()
	const w = 15 * time.Minute
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprint("split=", split), func(t *testing.T) {
			prefix := testservers.UniquePrefix()
			th := New(client, prefix, throttle.Config{UserFailures: 6})
			th.split = split
			d := throttletest.Driver{T: t, Throttle: th}
			d.Fail("carol", "198.51.100.1", 0) // expired by the time of the calls below
			for range 6 {
				d.Fail("alice", "192.0.2.1", w)
			}
			d.Reserve("bob", "192.0.2.2", w, 0, true) // in flight
			snapshot := func() map[string]string {
				t.Helper()
				keys, err := client.Keys(ctx, prefix+"*").Result()
				if err != nil || len(keys) != 8 { // carol's, alice's and bob's pairs and users, two buckets
					t.Fatalf("KEYS %s* = %q, %v; want 8 keys", prefix, keys, err)
				}
				s := make(map[string]string)
				for _, key := range keys {
					fields, err := client.HGetAll(ctx, key).Result()
					if err != nil {
						t.Fatalf("HGETALL %s = %v", key, err)
					}
					ttl, err := client.PTTL(ctx, key).Result()
					if err != nil {
						t.Fatalf("PTTL %s = %v", key, err)
					}
					s[key] = fmt.Sprint(fields, " ttl ", ttl.Round(time.Minute))
				}
				return s
			}
			before := snapshot()
			d.Explain("alice", "192.0.2.1", w, throttle.LimitPair|throttle.LimitUser)
			d.Explain("bob", "192.0.2.2", w, 0)
			d.Explain("carol", "198.51.100.1", w+time.Second, 0)
			d.Explain("alice", "198.51.100.1", w+time.Second, throttle.LimitUser)
			if after := snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("keys after Explain = %v; want as before, %v", after, before)
			}
		})
	}
}
