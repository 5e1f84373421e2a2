package main

import (
	"runtime"
	"sync"
)

// A hasherPool runs password checks (bcrypt, argon2id, PBKDF2) on dedicated
// OS threads at the lowest scheduling priority. Under a login flood the
// kernel then gives the CPU to token checks first, while on an idle machine
// hashing still gets all of it: Go's scheduler alone cannot do this, since
// it preempts a running hash only about every 10 ms (FACTS.md: /info fell to
// 20% with p99 near 50 ms). An argon2 hash with p > 1 lanes runs its other
// lanes on goroutines of their own, which the runtime schedules normally.
// The workers hold Ps while they hash, so serve raises GOMAXPROCS by their
// number to leave the usual Ps for everything else.
type hasherPool struct {
	jobs      chan verifyJob // unbuffered: a sent job is being hashed
	stop      chan struct{}  // closed by Close
	closeOnce sync.Once      // closes stop once, however often Close is called
}

type verifyJob struct {
	hash     *passwordHash
	password []byte
	done     chan bool
}

// newHasherPool starts workers compare threads (at least one).
func newHasherPool(workers int) *hasherPool {
	p := &hasherPool{jobs: make(chan verifyJob), stop: make(chan struct{})}
	for range max(1, workers) {
		go p.work()
	}
	return p
}

func (p *hasherPool) work() {
	// Never unlocked: the niced thread exits with this goroutine rather
	// than return to the runtime for other goroutines.
	runtime.LockOSThread()
	lowerThreadPriority()
	for {
		select {
		case j := <-p.jobs:
			j.done <- j.hash.verify(j.password)
		case <-p.stop:
			return
		}
	}
}

// verify reports whether password matches hash, checked on a worker
// thread; a nil pool checks on the caller's goroutine. Once the pool is
// closed it reports false without waiting for a worker.
func (p *hasherPool) verify(hash *passwordHash, password []byte) bool {
	if p == nil {
		return hash.verify(password)
	}
	// Checked first: with a worker still free, the select below could pick
	// the job over stop.
	select {
	case <-p.stop:
		return false
	default:
	}
	done := make(chan bool, 1) // the worker never waits for a caller gone
	select {
	case p.jobs <- verifyJob{hash: hash, password: password, done: done}:
	case <-p.stop:
		return false
	}
	select {
	case ok := <-done:
		return ok
	case <-p.stop:
		return false
	}
}

// Close stops the workers without waiting for the checks they are running:
// at cost 16 one holds its thread for seconds, longer than shutdown's grace.
// Those threads end when they finish, or with the process.
func (p *hasherPool) Close() error {
	p.closeOnce.Do(func() { close(p.stop) })
	return nil
}
