package connlimit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// limitedServer is a real http.Server on 127.0.0.1 behind a Limiter.
type limitedServer struct {
	addr    string
	lim     *Limiter
	peak    atomic.Int64  // most connections the limiter counted after any event
	entered chan struct{} // a /block request has reached its handler
	release chan struct{} // one value lets one /block request finish
	srv     *http.Server
}

func startLimitedServer(t *testing.T, max int) *limitedServer {
	t.Helper()
	s := &limitedServer{lim: New(max), entered: make(chan struct{}, 16), release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("GET /block", func(w http.ResponseWriter, r *http.Request) {
		s.entered <- struct{}{}
		<-s.release
		io.WriteString(w, "done")
	})
	mux.HandleFunc("GET /hijack", func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		time.AfterFunc(time.Second, func() { c.Close() }) // held open past the check
	})
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(c net.Conn, st http.ConnState) {
			s.lim.ConnState(c, st)
			n := int64(s.lim.open())
			for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	go s.srv.Serve(s.lim.Listener(ln))
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// rawConn is a client's keep-alive connection, read by hand so that the test
// sees exactly when the server closes it.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// send writes a GET for path that keeps the connection open.
func (c *rawConn) send(t *testing.T, path string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
}

// status reads a response and returns its status code.
func (c *rawConn) status(t *testing.T) int {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closedByServer reports whether the server has closed c, reading until
// deadline at most.
func (c *rawConn) closedByServer(deadline time.Time) bool {
	c.SetReadDeadline(deadline)
	_, err := c.r.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// idleConns opens n connections that have each been served one request.
func idleConns(t *testing.T, s *limitedServer, n int) []*rawConn {
	t.Helper()
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialRaw(t, s.addr)
		conns[i].send(t, "/")
		if code := conns[i].status(t); code != http.StatusOK {
			t.Fatalf("idle conn %d: status %d", i, code)
		}
		// The reply can reach the client before the server marks the
		// connection idle: wait for it, so that the connections went
		// idle in the order they were opened.
		s.waitIdle(t, i+1)
	}
	return conns
}

// waitIdle waits until the limiter counts n idle connections.
func (s *limitedServer) waitIdle(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.lim.mu.Lock()
		idle := 0
		for c := range s.lim.conns {
			if c.idle.Load() != 0 {
				idle++
			}
		}
		s.lim.mu.Unlock()
		if idle == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle connections = %d after 10 s; want %d", idle, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// countClosed returns how many of conns the server has closed. It reads them
// at once: a read past its deadline fails without looking for EOF.
func countClosed(conns []*rawConn) int {
	deadline := time.Now().Add(500 * time.Millisecond)
	var closed atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			if c.closedByServer(deadline) {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	return int(closed.Load())
}

// getOnNewConn makes one request on a new connection.
func getOnNewConn(addr, path string) (int, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestConnLimitShedsIdleForNewClient(t *testing.T) {
	const max = 8
	s := startLimitedServer(t, max)
	old := idleConns(t, s, max)

	code, err := getOnNewConn(s.addr, "/")
	if err != nil || code != http.StatusOK {
		t.Fatalf("new client at the limit: status %d, err %v; want 200", code, err)
	}
	if n := countClosed(old); n < 1 {
		t.Errorf("%d of %d idle connections closed; want at least 1 shed for the new client", n, max)
	}
	if p := s.peak.Load(); p > max {
		t.Errorf("peak open connections %d, over the limit %d", p, max)
	}
}

// TestConnLimitShedsLongestIdle: at the limit, the connection shed is the
// one idle the longest, not the one opened first.
func TestConnLimitShedsLongestIdle(t *testing.T) {
	const max = 3
	s := startLimitedServer(t, max)
	conns := idleConns(t, s, max)
	conns[0].send(t, "/") // opened first, idle most recently
	if code := conns[0].status(t); code != http.StatusOK {
		t.Fatalf("second request on conn 0: status %d", code)
	}

	if code, err := getOnNewConn(s.addr, "/"); err != nil || code != http.StatusOK {
		t.Fatalf("new client at the limit: status %d, err %v; want 200", code, err)
	}
	if !conns[1].closedByServer(time.Now().Add(2 * time.Second)) {
		t.Errorf("conn 1, idle the longest, still open after a new client came at the limit; want it shed")
	}
	conns[0].send(t, "/")
	if code := conns[0].status(t); code != http.StatusOK {
		t.Errorf("conn 0, idle the shortest: status %d after the shedding; want 200 on the same connection", code)
	}
}

func TestConnLimitKeepsActive(t *testing.T) {
	const max = 4
	s := startLimitedServer(t, max)
	busy := dialRaw(t, s.addr)
	busy.send(t, "/block")
	<-s.entered
	idle := idleConns(t, s, max-1)

	for i := range 3 { // more new clients than idle connections to shed
		if code, err := getOnNewConn(s.addr, "/"); err != nil || code != http.StatusOK {
			t.Fatalf("new client %d: status %d, err %v; want 200", i, code, err)
		}
	}
	s.release <- struct{}{}
	if code := busy.status(t); code != http.StatusOK {
		t.Errorf("request in progress at the limit: status %d; want 200", code)
	}
	if n := countClosed(idle); n < 1 {
		t.Errorf("no idle connection shed; the new clients should have displaced them")
	}
}

func TestConnLimitWaitsWhenAllActive(t *testing.T) {
	const max = 2
	s := startLimitedServer(t, max)
	busy := make([]*rawConn, max)
	for i := range busy {
		busy[i] = dialRaw(t, s.addr)
		busy[i].send(t, "/block")
		<-s.entered
	}

	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := getOnNewConn(s.addr, "/")
		done <- result{code, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("new client served while every connection was active: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}

	// Both /block handlers wait on one channel, so either may take a
	// release: read both replies as they come.
	statuses := make(chan int, max)
	for _, c := range busy {
		go func() {
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(c.r, nil)
			if err != nil {
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	s.release <- struct{}{} // one active request finishes and goes idle: room to shed
	if code := <-statuses; code != http.StatusOK {
		t.Errorf("first active request to finish: status %d; want 200", code)
	}
	if r := <-done; r.err != nil || r.code != http.StatusOK {
		t.Errorf("waiting client: status %d, err %v; want 200", r.code, r.err)
	}
	s.release <- struct{}{}
	if code := <-statuses; code != http.StatusOK {
		t.Errorf("second active request: status %d; want 200", code)
	}
}

func TestConnLimitNeverExceedsMax(t *testing.T) {
	const max, clients, requests = 8, 40, 5
	s := startLimitedServer(t, max)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range clients {
		wg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			for range requests {
				resp, err := client.Get("http://" + s.addr + "/")
				if err != nil {
					t.Log(err)
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if p := s.peak.Load(); p > max {
		t.Errorf("peak open connections %d, over the limit %d", p, max)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed", n, clients*requests)
	}

	// Closed connections leave the count.
	s.srv.Close()
	for deadline := time.Now().Add(5 * time.Second); s.lim.open() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still counted after the server closed", s.lim.open())
		}
	}
}

func TestConnLimitHijackedLeaves(t *testing.T) {
	s := startLimitedServer(t, 2)
	c := dialRaw(t, s.addr)
	c.send(t, "/hijack")
	if code := c.status(t); code != http.StatusOK {
		t.Fatalf("hijack: status %d", code)
	}
	if n := s.lim.open(); n != 0 {
		t.Errorf("%d connections counted after the only one was hijacked; want 0", n)
	}
}

func TestConnLimitListenerClose(t *testing.T) {
	// Serve returns once its listener is closed, also while Accept waits for room.
	lim := New(1)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := lim.Listener(inner)
	block := make(chan struct{})
	defer close(block)
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }),
		ConnState: lim.ConnState,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	for range 2 { // the first fills the limit, the second waits in Accept
		c := dialRaw(t, inner.Addr().String())
		c.send(t, "/")
	}
	time.Sleep(100 * time.Millisecond)
	ln.Close()
	select {
	case err := <-served:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Serve: %v; want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve still running 5s after its listener closed")
	}
	srv.Close()
}

func TestDefaultMaxConns(t *testing.T) {
	n := DefaultMax()
	if n < 1 {
		t.Fatalf("DefaultMax() = %d; want positive", n)
	}
	soft, ok := nofileLimit()
	if !ok {
		t.Skip("no RLIMIT_NOFILE here")
	}
	if uint64(n) > soft {
		t.Errorf("DefaultMax() = %d, above the soft RLIMIT_NOFILE %d", n, soft)
	}
	t.Logf("soft RLIMIT_NOFILE %d: default --max-conns %d", soft, n)
}

func TestMaxConnsFor(t *testing.T) {
	for _, tc := range []struct {
		soft uint64
		want int
	}{
		{0, 1},
		{1, 1},
		{100, 50},   // half, since 100-64 is less
		{256, 192},  // 256-64
		{1024, 820}, // 1024-1024/5
		{20000, 16000},
		{1 << 20, maxDefaultConns},
		{^uint64(0), maxDefaultConns}, // RLIM_INFINITY
	} {
		if got := maxConnsFor(tc.soft); got != tc.want {
			t.Errorf("maxConnsFor(%d) = %d; want %d", tc.soft, got, tc.want)
		}
	}
}
