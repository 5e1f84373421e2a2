package connlimit

import (
	"math"
	"net"
	"net/http"
	"sync"
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
type Limiter struct {
	max int

	mu      sync.Mutex              // guards conns, idle, waiting and every limitedListener's closed
	room    *sync.Cond              // on mu; broadcast when a connection goes idle or leaves while an Accept waits, or a listener closes
	waiting int                     // Accepts waiting on room
	conns   map[net.Conn]*connEntry // every open connection
	idle    connEntry               // the idle connections' ring, longest idle first after it; its own c is nil
	nIdle   int
}

// A connEntry is an open connection, linked into the idle ring while idle.
// Made once per connection: going idle and active again, as a keep-alive
// connection does every request, allocates nothing.
type connEntry struct {
	c          net.Conn
	prev, next *connEntry // nil while not idle
}

// New returns a limiter of max open connections; max must be at
// least 1.
func New(max int) *Limiter {
	if max < 1 {
		panic("connlimit.New: max must be at least 1")
	}
	l := &Limiter{max: max, conns: make(map[net.Conn]*connEntry)}
	l.idle.prev, l.idle.next = &l.idle, &l.idle
	l.room = sync.NewCond(&l.mu)
	return l
}

// goIdle links e at the back of the idle ring. The caller holds l.mu.
func (l *Limiter) goIdle(e *connEntry) {
	if e.next != nil {
		return
	}
	e.prev, e.next = l.idle.prev, &l.idle
	l.idle.prev.next = e
	l.idle.prev = e
	l.nIdle++
}

// goActive unlinks e from the idle ring. The caller holds l.mu.
func (l *Limiter) goActive(e *connEntry) {
	if e.next == nil {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	l.nIdle--
}

// wake tells a waiting Accept that there may be room. The caller holds l.mu.
func (l *Limiter) wake() {
	if l.waiting > 0 {
		l.room.Broadcast()
	}
}

// Listener returns inner with Accept limited by l.
func (l *Limiter) Listener(inner net.Listener) net.Listener {
	return &limitedListener{Listener: inner, lim: l}
}

// ConnState tracks which connections are idle; set it as the
// http.Server's ConnState.
func (l *Limiter) ConnState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.conns[c]
	if !ok {
		return // shed already: its server goroutine is only now noticing
	}
	switch s {
	case http.StateActive:
		l.goActive(e)
	case http.StateIdle:
		l.goIdle(e)
		l.wake()
	case http.StateClosed, http.StateHijacked:
		l.goActive(e)
		delete(l.conns, c)
		l.wake()
	}
	// StateNew: Accept counted the connection already.
}

// open returns the number of open connections l counts.
func (l *Limiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// add counts c as open, first closing the longest-idle connection if c would
// exceed the limit. If none is idle, it waits for one to go idle or close. It
// returns net.ErrClosed if ln is closed meanwhile.
func (l *Limiter) add(ln *limitedListener, c net.Conn) error {
	l.mu.Lock()
	for !ln.closed && len(l.conns) >= l.max && l.nIdle == 0 {
		l.waiting++
		l.room.Wait()
		l.waiting--
	}
	if ln.closed {
		l.mu.Unlock()
		return net.ErrClosed
	}
	var victim net.Conn
	if len(l.conns) >= l.max {
		e := l.idle.next
		l.goActive(e)
		victim = e.c
		delete(l.conns, victim)
	}
	l.conns[c] = &connEntry{c: c}
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
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := ln.lim.add(ln, c); err != nil {
		c.Close()
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
