package main

import (
	"errors"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestHasherPoolCompares(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	for _, p := range []*hasherPool{newHasherPool(2), nil} {
		if err := p.compare(hash, []byte("right")); err != nil {
			t.Errorf("compare(right) = %v; want nil", err)
		}
		if err := p.compare(hash, []byte("wrong")); err == nil {
			t.Errorf("compare(wrong) = nil; want a mismatch")
		}
		if p != nil {
			p.Close()
		}
	}
}

func TestLowerThreadPriority(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread priorities are Linux's")
	}
	got := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the niced thread dies with this goroutine
		lowerThreadPriority()
		// The raw syscall returns 20 - nice.
		prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
		if err != nil {
			prio = -1
		}
		got <- 20 - prio
	}()
	if nice := <-got; nice != 19 {
		t.Errorf("nice after lowerThreadPriority() = %d; want 19", nice)
	}
	// The test's own thread keeps its priority.
	prio, _ := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if 20-prio == 19 {
		t.Errorf("the process's main thread was niced too")
	}
}

// TestHasherPoolCloseDoesNotWait: shutdown must not wait for a password
// check, which at the highest accepted cost holds a thread for seconds.
func TestHasherPoolCloseDoesNotWait(t *testing.T) {
	p := newHasherPool(1)
	// testHash's salt and digest at cost 16: about 4 s to find it wrong.
	slow := compareJob{hash: []byte("$2a$16" + testHash[6:]), password: []byte("pw"), done: make(chan error, 1)}
	// The jobs channel is unbuffered: once the send is done the worker is
	// hashing.
	p.jobs <- slow

	// A second compare waits for the busy worker.
	queued := make(chan error, 1)
	go func() { queued <- p.compare([]byte(testHash), []byte("pw")) }()

	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case err := <-slow.done:
		t.Errorf("the cost-16 compare ended (%v) before Close returned; want Close not to wait for it", err)
		<-closed
	}
	select {
	case err := <-slow.done:
		t.Errorf("the cost-16 compare ended (%v) before Close returned; want Close not to wait for it", err)
	default:
	}

	// The timeouts only keep a broken pool from hanging the test.
	select {
	case err := <-queued:
		if !errors.Is(err, errHasherClosed) {
			t.Errorf("compare queued behind the busy worker, pool closed = %v; want %v", err, errHasherClosed)
		}
	case <-time.After(time.Minute):
		t.Errorf("compare queued behind the busy worker still blocked a minute after Close; want an error at once")
	}
	after := make(chan error, 1)
	go func() { after <- p.compare([]byte(testHash), []byte("pw")) }()
	select {
	case err := <-after:
		if !errors.Is(err, errHasherClosed) {
			t.Errorf("compare after Close = %v; want %v", err, errHasherClosed)
		}
	case <-time.After(time.Minute):
		t.Errorf("compare after Close still blocked after a minute; want an error at once")
	}
}
