package main

import (
	"errors"
	"runtime"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// A hasherPool runs bcrypt compares on dedicated OS threads at the lowest
// scheduling priority. Under a login flood the kernel then gives the CPU to
// token checks first, while on an idle machine bcrypt still gets all of it:
// Go's scheduler alone cannot do this, since it preempts a running bcrypt
// only about every 10 ms (FACTS.md: /info fell to 20% with p99 near 50 ms).
// The workers hold Ps while they hash, so serve raises GOMAXPROCS by their
// number to leave the usual Ps for everything else.
type hasherPool struct {
	jobs      chan compareJob // unbuffered: a sent job is being hashed
	stop      chan struct{}   // closed by Close
	closeOnce sync.Once       // closes stop once, however often Close is called
}

// errHasherClosed: a compare on a closed pool, or one cut short by Close.
var errHasherClosed = errors.New("password hasher closed")

type compareJob struct {
	hash, password []byte
	done           chan error
}

// newHasherPool starts workers compare threads (at least one).
func newHasherPool(workers int) *hasherPool {
	p := &hasherPool{jobs: make(chan compareJob), stop: make(chan struct{})}
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
			j.done <- bcrypt.CompareHashAndPassword(j.hash, j.password)
		case <-p.stop:
			return
		}
	}
}

// compare is bcrypt.CompareHashAndPassword on a worker thread; a nil pool
// compares on the caller's goroutine. Once the pool is closed it returns
// errHasherClosed without waiting for a worker.
func (p *hasherPool) compare(hash, password []byte) error {
	if p == nil {
		return bcrypt.CompareHashAndPassword(hash, password)
	}
	// Checked first: with a worker still free, the select below could pick
	// the job over stop.
	select {
	case <-p.stop:
		return errHasherClosed
	default:
	}
	done := make(chan error, 1) // the worker never waits for a caller gone
	select {
	case p.jobs <- compareJob{hash: hash, password: password, done: done}:
	case <-p.stop:
		return errHasherClosed
	}
	select {
	case err := <-done:
		return err
	case <-p.stop:
		return errHasherClosed
	}
}

// Close stops the workers without waiting for the compares they are running:
// at cost 16 one holds its thread for seconds, longer than shutdown's grace.
// Those threads end when they finish, or with the process.
func (p *hasherPool) Close() error {
	p.closeOnce.Do(func() { close(p.stop) })
	return nil
}
