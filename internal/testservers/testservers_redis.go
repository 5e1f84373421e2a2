package testservers

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// Redis returns the URL of a Redis for t. With AUTHSVC_TEST_REDIS set it
// is that URL, and stop and restart are nil. Otherwise it is a redis-server
// started on a free loopback port and killed when t ends; stop kills it and
// restart starts it again on the same port, empty. Without redis-server the
// test is skipped, or fails when AUTHSVC_REQUIRE_REDIS=1.
func Redis(t testing.TB) (url string, stop, restart func()) {
	t.Helper()
	return RedisWith(t)
}

// RedisWith is Redis started with the extra redis-server arguments (such as
// "--requirepass", "pw"); with AUTHSVC_TEST_REDIS set it ignores them.
func RedisWith(t testing.TB, extra ...string) (url string, stop, restart func()) {
	t.Helper()
	skipShort(t, "redis-server")
	if url := os.Getenv("AUTHSVC_TEST_REDIS"); url != "" {
		return url, nil, nil
	}
	bin := redisServerBin(t)
	port := FreePort(t)
	dir := t.TempDir()
	addr := net.JoinHostPort("127.0.0.1", port)

	var cmd *exec.Cmd // the running server, nil while stopped
	start := func() {
		t.Helper()
		cmd = exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir}, extra...)...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting redis-server: %v", err)
		}
		waitForRedis(t, addr)
	}
	stop = func() {
		t.Helper()
		if cmd == nil {
			return
		}
		cmd.Process.Kill()
		cmd.Wait() // the port is free again once the process is gone
		cmd = nil
	}
	start()
	t.Cleanup(stop)
	return "redis://" + addr + "/0", stop, start
}

// redisServerBin returns the path of redis-server. Without it t is
// skipped, or fails when AUTHSVC_REQUIRE_REDIS=1.
func redisServerBin(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("AUTHSVC_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not in PATH and AUTHSVC_REQUIRE_REDIS=1")
		}
		t.Skip("redis-server not in PATH: install it, or set AUTHSVC_TEST_REDIS=redis://host:port/db")
	}
	return bin
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// waitForRedis waits up to 5 s for the Redis at addr to answer PING. It
// speaks RESP itself, since a go-redis client would log every refused dial.
func waitForRedis(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := pingRESP(addr)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server at %s: no PING answer within 5s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// UniquePrefix returns a key prefix no other test uses.
func UniquePrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return "authsvc-test-" + hex.EncodeToString(b[:]) + ":"
}
