package testservers

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// SentinelMaster is the master name the sentinels of Sentinel monitor.
const SentinelMaster = "mymaster"

// Sentinel timings, short so that a failover takes seconds: the primary
// is deemed down after sentinelDownAfter without an answer, and a failover
// that stalls is retried after sentinelFailoverTimeout.
const (
	sentinelDownAfter       = 1000 // ms
	sentinelFailoverTimeout = 5000 // ms
)

// SentinelGroup is a Sentinel-managed primary: a primary, one replica and
// three sentinels (quorum 2), each a redis-server process on a free
// loopback port, all killed when the test ends.
type SentinelGroup struct {
	// URL is the group as authsvc's --store takes it:
	// redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster/0.
	URL string
	// Sentinels are the sentinels' addresses.
	Sentinels []string

	t  testing.TB
	mu sync.Mutex           // guards nodes
	nd map[string]*exec.Cmd // running data node's address → its process
}

// Sentinel starts a SentinelGroup for t and returns once every sentinel
// knows the primary, the replica (in sync) and the two other sentinels,
// so that a failover can start as soon as the primary dies. Without
// redis-server the test is skipped, or fails when AUTHSVC_REQUIRE_REDIS=1.
// It always starts its own processes: AUTHSVC_TEST_REDIS names one Redis,
// not a group.
//
// The sentinels run as redis-server sentinel.conf --sentinel, which is
// what Debian's redis-sentinel package does: redis-server alone is enough.
func Sentinel(t testing.TB) *SentinelGroup {
	t.Helper()
	skipShort(t, "a Redis Sentinel group")
	g := &SentinelGroup{t: t, nd: map[string]*exec.Cmd{}}
	procs := &redisProcs{t: t, bin: redisServerBin(t)}
	t.Cleanup(procs.killAll)

	primaryPort := FreePort(t)
	primary := net.JoinHostPort("127.0.0.1", primaryPort)
	g.dataNode(procs, "primary", primaryPort)
	replica := net.JoinHostPort("127.0.0.1", FreePort(t))
	_, replicaPort, _ := net.SplitHostPort(replica)
	g.dataNode(procs, "replica", replicaPort, "--replicaof", "127.0.0.1", primaryPort)
	// The sentinels learn of replicas from the primary's INFO, which they
	// read every 10 s once started: a replica in sync before they start is
	// known at once.
	g.waitFor("the replica in sync", 10*time.Second, func() error {
		info, err := RESP(replica, "INFO", "replication")
		if err != nil {
			return err
		}
		if s, _ := info.(string); !strings.Contains(s, "master_link_status:up") {
			return errors.New("master_link_status not up")
		}
		return nil
	})

	for i := range 3 {
		g.Sentinels = append(g.Sentinels, startSentinel(procs, i, primaryPort))
	}
	// Sentinels find each other through hello messages on the primary,
	// every 2 s: CKQUORUM counts the usable ones.
	for _, s := range g.Sentinels {
		g.waitFor("sentinel "+s+" to know the group", 30*time.Second, func() error { return knowsGroup(s, replica) })
		if got, err := g.primaryFrom(s); got != primary || err != nil {
			t.Fatalf("sentinel %s: primary %q, %v; want %s", s, got, err, primary)
		}
	}
	g.URL = "redis+sentinel://" + strings.Join(g.Sentinels, ",") + "/" + SentinelMaster + "/0"
	return g
}

// redisProcs starts redis-server processes for a test, each in a
// directory of its own with its log there, and kills them all when the
// test ends (killAll).
type redisProcs struct {
	t     testing.TB
	bin   string
	procs []*exec.Cmd // every process started
}

// start starts redis-server with args, named name in its log's name.
func (p *redisProcs) start(name string, args ...string) *exec.Cmd {
	p.t.Helper()
	dir := p.t.TempDir()
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		p.t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(p.bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("starting redis-server (%s): %v", name, err)
	}
	p.procs = append(p.procs, cmd)
	return cmd
}

// killAll kills every process started.
func (p *redisProcs) killAll() {
	for _, cmd := range p.procs {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// dataNode starts the group's primary or replica on port and waits until
// it answers.
func (g *SentinelGroup) dataNode(procs *redisProcs, name, port string, extra ...string) {
	g.t.Helper()
	addr := net.JoinHostPort("127.0.0.1", port)
	// Diskless replication without delay: the replica is in sync in
	// milliseconds instead of the default 5 s.
	g.nd[addr] = procs.start(name, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", ".", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}, extra...)...)
	waitForRedis(g.t, addr)
}

// startSentinel starts the i-th sentinel, monitoring the primary on
// primaryPort, and returns its address once it answers.
func startSentinel(procs *redisProcs, i int, primaryPort string) string {
	t := procs.t
	t.Helper()
	port := FreePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it: its own file
	text := strings.Join([]string{
		"port " + port,
		"bind 127.0.0.1",
		"dir " + dir,
		"sentinel resolve-hostnames no",
		"sentinel monitor " + SentinelMaster + " 127.0.0.1 " + primaryPort + " 2",
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", SentinelMaster, sentinelDownAfter),
		fmt.Sprintf("sentinel failover-timeout %s %d", SentinelMaster, sentinelFailoverTimeout),
		"sentinel parallel-syncs " + SentinelMaster + " 1",
	}, "\n") + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	procs.start(fmt.Sprintf("sentinel-%d", i+1), conf, "--sentinel")
	addr := net.JoinHostPort("127.0.0.1", port)
	waitForRedis(t, addr)
	return addr
}

// knowsGroup returns nil once the sentinel at s counts three usable
// sentinels and knows replica, its link to the primary up.
func knowsGroup(s, replica string) error {
	reply, err := RESP(s, "SENTINEL", "CKQUORUM", SentinelMaster)
	if err != nil {
		return err
	}
	if r, _ := reply.(string); !strings.HasPrefix(r, "OK 3 usable") {
		return fmt.Errorf("CKQUORUM = %q", reply)
	}
	replicas, err := RESP(s, "SENTINEL", "REPLICAS", SentinelMaster)
	if err != nil {
		return err
	}
	for _, r := range asList(replicas) {
		f := pairs(r)
		if net.JoinHostPort(f["ip"], f["port"]) == replica && f["master-link-status"] == "ok" && !strings.Contains(f["flags"], "down") && !strings.Contains(f["flags"], "disconnected") {
			return nil
		}
	}
	return fmt.Errorf("SENTINEL REPLICAS = %q; want %s, its link ok", replicas, replica)
}

// Primary returns the primary's address as the first sentinel that
// answers reports it (SENTINEL GET-MASTER-ADDR-BY-NAME).
func (g *SentinelGroup) Primary() (string, error) {
	var errs []error
	for _, s := range g.Sentinels {
		addr, err := g.primaryFrom(s)
		if err == nil {
			return addr, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

func (g *SentinelGroup) primaryFrom(sentinel string) (string, error) {
	reply, err := RESP(sentinel, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
	if err != nil {
		return "", fmt.Errorf("sentinel %s: %w", sentinel, err)
	}
	l := asList(reply)
	if len(l) != 2 {
		return "", fmt.Errorf("sentinel %s: GET-MASTER-ADDR-BY-NAME = %q", sentinel, reply)
	}
	host, _ := l[0].(string)
	port, _ := l[1].(string)
	return net.JoinHostPort(host, port), nil
}

// KillPrimary kills the current primary's process with SIGKILL, waits
// until it is gone, and returns its address.
func (g *SentinelGroup) KillPrimary() string {
	g.t.Helper()
	addr, err := g.Primary()
	if err != nil {
		g.t.Fatalf("finding the primary to kill: %v", err)
	}
	g.mu.Lock()
	cmd := g.nd[addr]
	delete(g.nd, addr)
	g.mu.Unlock()
	if cmd == nil {
		g.t.Fatalf("the sentinels report primary %s, which is no running data node of the group", addr)
	}
	cmd.Process.Kill()
	cmd.Wait()
	return addr
}

// WaitForNewPrimary asks every sentinel, every 10 ms, for the primary
// until one reports another than old, at most within, and returns the new
// address and when it was first seen (at most 10 ms, and the time to ask
// the three, after the promotion). Every sentinel is asked because they
// learn of the promotion at different times, the failover's leader first
// and the others from its hello messages up to a few hundred ms later,
// and a client may be asking the leader: the first one to report it is
// the earliest a client can reach the new primary. It is safe to call
// from another goroutine than the test's: it fails the test with Errorf
// only.
func (g *SentinelGroup) WaitForNewPrimary(old string, within time.Duration) (addr string, seen time.Time) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, s := range g.Sentinels {
			if addr, err := g.primaryFrom(s); err == nil && addr != old {
				return addr, time.Now()
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.t.Errorf("no new primary within %v of asking (the old one: %s)", within, old)
	return "", time.Time{}
}

// waitFor calls check every 50 ms until it returns nil, at most within.
func (g *SentinelGroup) waitFor(what string, within time.Duration, check func() error) {
	g.t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("waiting for %s: not within %v: %v", what, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
