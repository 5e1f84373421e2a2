package main

import (
	"runtime"
	"syscall"
	"testing"

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
