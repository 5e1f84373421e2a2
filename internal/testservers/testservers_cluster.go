package testservers

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterPrimaries is how many primaries RedisCluster starts: the fewest
// redis-cli --cluster create accepts, and enough for a script whose keys
// span slots to find them on different nodes.
const clusterPrimaries = 3

// clusterBusOffset is how far above its client port a cluster node listens
// for the cluster bus (Redis's default, which RedisCluster keeps).
const clusterBusOffset = 10000

// RedisCluster starts a Redis Cluster of three primaries (no replicas), each
// a redis-server on a free loopback port whose cluster bus port (the port
// plus 10000) is free too, joins them with redis-cli --cluster create, and
// waits until every node reports cluster_state:ok. It returns the nodes'
// host:port addresses; stop kills the nodes (t's cleanup does too). There
// is no AUTHSVC_TEST_REDIS counterpart: a test always gets a fresh cluster
// it owns. Without redis-server or redis-cli the test is skipped, or fails
// when AUTHSVC_REQUIRE_REDIS=1.
func RedisCluster(t testing.TB) (addrs []string, stop func()) {
	t.Helper()
	skipShort(t, "a Redis Cluster")
	var bins [2]string
	for i, name := range []string{"redis-server", "redis-cli"} {
		bin, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv("AUTHSVC_REQUIRE_REDIS") == "1" {
				t.Fatalf("%s not in PATH and AUTHSVC_REQUIRE_REDIS=1", name)
			}
			t.Skipf("%s not in PATH: install Redis to run the cluster tests", name)
		}
		bins[i] = bin
	}
	server, cli := bins[0], bins[1]
	dir := t.TempDir()

	var nodes []clusterNode
	stop = func() {
		for _, n := range nodes {
			n.process.Kill()
			<-n.exited // the ports are free again once the process is gone
		}
		nodes = nil
	}
	t.Cleanup(stop)

	for i := range clusterPrimaries {
		nodeDir := filepath.Join(dir, fmt.Sprint("node", i))
		if err := os.Mkdir(nodeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		n := startClusterNode(t, server, nodeDir)
		nodes = append(nodes, n)
		addrs = append(addrs, n.addr)
	}

	create := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...),
		"--cluster-replicas", "0", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create %s = %v; output:\n%s", strings.Join(addrs, " "), err, out)
	}
	for _, addr := range addrs {
		waitForClusterOK(t, cli, addr)
	}
	return addrs, stop
}

// A clusterNode is a running redis-server of RedisCluster's.
type clusterNode struct {
	addr    string
	process *os.Process
	exited  <-chan struct{} // closed once the process is gone
}

// startClusterNode starts a cluster-enabled redis-server in dir on a port
// whose bus port is free too, and returns it once it answers PING. A port
// found free can be taken by another process before the server binds it,
// so a server that exits at start is tried again on other ports.
func startClusterNode(t testing.TB, bin, dir string) clusterNode {
	t.Helper()
	var lastErr error
	for range 5 {
		port := freeClusterPort(t)
		addr := net.JoinHostPort("127.0.0.1", port)
		var out bytes.Buffer
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--save", "", "--appendonly", "no", "--dir", dir)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting redis-server: %v", err)
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			close(exited)
		}()
		if lastErr = waitForNode(addr, exited); lastErr == nil {
			return clusterNode{addr: addr, process: cmd.Process, exited: exited}
		}
		cmd.Process.Kill()
		<-exited
		lastErr = fmt.Errorf("%w; its output:\n%s", lastErr, out.String())
	}
	t.Fatalf("no cluster node started in 5 tries: %v", lastErr)
	return clusterNode{}
}

// waitForNode waits up to 5 s for the redis-server at addr to answer PING,
// and gives up at once if it exits (its port was taken).
func waitForNode(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server at %s exited at start", addr)
		default:
		}
		err := pingRESP(addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s: no PING answer within 5s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeClusterPort returns a loopback port that, with the port 10000 above
// it, was free a moment ago. It draws from 20000–29999, below Linux's
// ephemeral range (32768 up), so that the bus port (30000–39999) is in
// range and the port itself is rarely handed out to outgoing connections.
func freeClusterPort(t testing.TB) string {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(10000)
		l1, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+clusterBusOffset)))
		l1.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return strconv.Itoa(p)
	}
	t.Fatal("no free port pair (P, P+10000) on 127.0.0.1 in 100 tries")
	return ""
}

// waitForClusterOK waits up to 10 s for the node at addr to report
// cluster_state:ok in CLUSTER INFO: until then it answers CLUSTERDOWN.
func waitForClusterOK(t testing.TB, cli, addr string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := exec.Command(cli, "-h", host, "-p", port, "cluster", "info").CombinedOutput()
		if err == nil && bytes.Contains(out, []byte("cluster_state:ok")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-cli -p %s cluster info after 10s = %v; want cluster_state:ok; output:\n%s", port, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
