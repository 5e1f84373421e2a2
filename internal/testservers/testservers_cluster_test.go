package testservers

import (
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestRedisCluster: the three nodes RedisCluster returns form one cluster
// that serves all 16384 slots, each node a primary holding some of them.
func TestRedisCluster(t *testing.T) {
	addrs, stop := RedisCluster(t)
	if len(addrs) != 3 {
		t.Fatalf("RedisCluster returned %d addresses %v; want 3", len(addrs), addrs)
	}
	for _, addr := range addrs {
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command("redis-cli", "-h", host, "-p", port, "cluster", "info").Output()
		info := string(out)
		for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:3", "cluster_size:3"} {
			if err != nil || !strings.Contains(info, want) {
				t.Errorf("CLUSTER INFO on %s = %v, %q; want %s", addr, err, info, want)
			}
		}
	}
	stop()
	for _, addr := range addrs {
		if err := pingRESP(addr); err == nil {
			t.Errorf("PING %s after stop answered; want the node gone", addr)
		}
	}
}
