package main

import (
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
	jobs chan compareJob
	stop chan struct{}
	wg   sync.WaitGroup
}

type compareJob struct {
	hash, password []byte
	done           chan error
}

// newHasherPool starts workers compare threads (at least one).
func newHasherPool(workers int) *hasherPool {
	p := &hasherPool{jobs: make(chan compareJob), stop: make(chan struct{})}
	for range max(1, workers) {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

func (p *hasherPool) work() {
	defer p.wg.Done()
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
// compares on the caller's goroutine.
func (p *hasherPool) compare(hash, password []byte) error {
	if p == nil {
		return bcrypt.CompareHashAndPassword(hash, password)
	}
	done := make(chan error, 1)
	p.jobs <- compareJob{hash: hash, password: password, done: done}
	return <-done
}

// Close stops the workers once they finish their compares.
func (p *hasherPool) Close() error {
	close(p.stop)
	p.wg.Wait()
	return nil
}
