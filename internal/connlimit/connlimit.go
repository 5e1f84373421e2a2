package connlimit

import (
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Sizing of the default connection limit.
const (
	fdReserve       = 64      // at least: users file, Redis pool, log, metrics listener and scrapes, epoll
	maxDefaultConns = 1 << 16 // at the review's ~23 KB per idle connection, 1.5 GB
)

// DefaultMax returns the connection limit for the process's
// RLIMIT_NOFILE. Go raises the soft limit to just below the hard one at
// startup (Go 1.19+, package syscall; on Linux and macOS), so this is sized
// from the raised soft limit and need not raise it.
func DefaultMax() int {
	soft, ok := nofileLimit()
	if !ok {
		soft = 1024 // the usual soft limit where there is none to read
	}
	return maxConnsFor(soft)
}

// maxConnsFor returns the connection limit for a soft RLIMIT_NOFILE of soft:
// it leaves a fifth of the descriptors, and at least fdReserve, to the rest
// of the process, since its Redis pool grows with GOMAXPROCS and metrics
// connections are not limited; but it keeps at least half when soft is small,
// and it stops at maxDefaultConns, where memory binds before descriptors.
func maxConnsFor(soft uint64) int {
	soft = min(soft, math.MaxInt32) // RLIM_INFINITY is all ones
	n := int(soft) - max(fdReserve, int(soft)/5)
	return min(max(1, int(soft)/2, n), maxDefaultConns)
}

// Limiter caps the server's open connections. Without a cap, idle
// keep-alive connections alone took the process to its descriptor limit
// (accept4: too many open files) and no new client was served.
//
// At the limit a new connection is kept and the connection idle the longest
// is closed to make room: an idle keep-alive connection costs its client at
// most a reconnect, while refusing the new client costs it the service. If
// every connection is busy, Accept holds the new connection unserved until one
// goes idle or closes; later clients wait in the kernel's listen backlog, where
// they cost no descriptor. The wait ends when a handler returns or a client
// stalls past ReadHeaderTimeout or ReadTimeout. So each limited listener holds
// at most max+1 connections.
//
// Use both Listener and ConnState on the same http.Server. A closed idle
// connection may race a request its client has just sent; the client sees the
// connection closed, as when IdleTimeout or Shutdown closes it.
//
// Every request moves its connection to active and back to idle: those two
// ConnState calls take no lock (an atomic store each), since a lock every
// connection's requests share was a measurable part of /info's cost. The
// lock is taken when a connection opens or closes, and at the limit, where
// finding the longest-idle connection is a scan of them all.
type Limiter struct {
	max int

	mu    sync.Mutex         // guards conns and every limitedListener's closed
	room  *sync.Cond         // on mu; broadcast when a connection goes idle or leaves while an Accept waits, or a listener closes
	conns map[*conn]struct{} // every open connection

	waiting atomic.Int64 // Accepts at the limit, waiting on room or about to; changed under mu, read without it
	idleSeq atomic.Int64 // the last idle stamp given: stamps order connections by when they went idle
}

// A conn is an open connection as Accept returns it, so that ConnState
// finds its state without a look-up.
type conn struct {
	net.Conn
	// idle is when the connection last went idle (an idleSeq stamp), or 0
	// while it is not idle; a shedding Accept claims it by swapping it to
	// 0 from the stamp it found.
	idle atomic.Int64
}

// CloseWrite half-closes the connection when the one it wraps can, so
// that net/http's graceful close (closeWriteAndWait) works through it.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// New returns a limiter of max open connections; max must be at
// least 1.
func New(max int) *Limiter {
	if max < 1 {
		panic("connlimit.New: max must be at least 1")
	}
	l := &Limiter{max: max, conns: make(map[*conn]struct{})}
	l.room = sync.NewCond(&l.mu)
	return l
}

// wake tells a waiting Accept that there may be room.
func (l *Limiter) wake() {
	if l.waiting.Load() > 0 {
		l.mu.Lock()
		l.room.Broadcast()
		l.mu.Unlock()
	}
}

// Listener returns inner with Accept limited by l.
func (l *Limiter) Listener(inner net.Listener) net.Listener {
	return &limitedListener{Listener: inner, lim: l}
}

// ConnState tracks which connections are idle; set it as the
// http.Server's ConnState.
func (l *Limiter) ConnState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return // not accepted by a limitedListener of l
	}
	switch s {
	case http.StateActive:
		c.idle.Store(0)
	case http.StateIdle:
		// Stored before waiting is read: an Accept that counts itself
		// waiting before this read finds the connection idle in its scan,
		// or is woken.
		c.idle.Store(l.idleSeq.Add(1))
		l.wake()
	case http.StateClosed, http.StateHijacked:
		c.idle.Store(0)
		l.mu.Lock()
		delete(l.conns, c) // already gone if shed
		l.room.Broadcast()
		l.mu.Unlock()
	}
}

// open returns the number of open connections l counts.
func (l *Limiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// longestIdle returns the open connection idle the longest and the stamp
// it went idle with, or nil. The caller holds l.mu.
func (l *Limiter) longestIdle() (*conn, int64) {
	var oldest *conn
	var stamp int64
	for c := range l.conns {
		if s := c.idle.Load(); s != 0 && (oldest == nil || s < stamp) {
			oldest, stamp = c, s
		}
	}
	return oldest, stamp
}

// add counts c as open, first closing the longest-idle connection if c would
// exceed the limit. If none is idle, it waits for one to go idle or close. It
// returns net.ErrClosed if ln is closed meanwhile.
func (l *Limiter) add(ln *limitedListener, c *conn) error {
	l.mu.Lock()
	var victim *conn
	if !ln.closed && len(l.conns) >= l.max {
		// Counted as waiting before the first scan: a connection that
		// goes idle after the scan has looked at it sees the count, and
		// wakes this Accept (ConnState).
		l.waiting.Add(1)
		for !ln.closed && len(l.conns) >= l.max {
			if v, stamp := l.longestIdle(); v != nil {
				if v.idle.CompareAndSwap(stamp, 0) { // else it went active meanwhile: look again
					victim = v
					delete(l.conns, v)
				}
				continue
			}
			l.room.Wait()
		}
		l.waiting.Add(-1)
	}
	if ln.closed {
		l.mu.Unlock()
		if victim != nil {
			victim.Close()
		}
		return net.ErrClosed
	}
	l.conns[c] = struct{}{}
	l.mu.Unlock()
	if victim != nil {
		victim.Close() // outside mu: a close is a system call
	}
	return nil
}

// limitedListener is a net.Listener whose Accept is limited by lim.
type limitedListener struct {
	net.Listener
	lim    *Limiter
	closed bool // guarded by lim.mu
}

// Accept accepts a connection, then waits for room for it under the limit.
func (ln *limitedListener) Accept() (net.Conn, error) {
	nc, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &conn{Conn: nc}
	if err := ln.lim.add(ln, c); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

// Close closes the listener and ends an Accept waiting for room.
func (ln *limitedListener) Close() error {
	ln.lim.mu.Lock()
	ln.closed = true
	ln.lim.room.Broadcast()
	ln.lim.mu.Unlock()
	return ln.Listener.Close()
}
