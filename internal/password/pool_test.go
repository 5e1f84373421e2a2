package password

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func TestHasherPoolVerifies(t *testing.T) {
	raw, _ := bcrypt.GenerateFromPassword([]byte("right"), bcrypt.MinCost)
	hash, err := ParseHash(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	exe := testBinary(t)
	for _, p := range []*Pool{NewPool(2, exe, discardLog), NewPool(1, "", discardLog), nil} {
		if !p.Verify(hash, []byte("right")) {
			t.Errorf("verify(right) = false; want true")
		}
		if p.Verify(hash, []byte("wrong")) {
			t.Errorf("verify(wrong) = true; want a mismatch")
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
	p := NewPool(1, testBinary(t), discardLog)
	// testHash's salt and digest at MaxBcryptCost: about a second to find it wrong.
	slowHash, err := ParseHash(fmt.Sprintf("$2a$%d", MaxBcryptCost) + testHash[6:])
	if err != nil {
		t.Fatal(err)
	}
	fast, err := ParseHash(testHash)
	if err != nil {
		t.Fatal(err)
	}
	slow := verifyJob{hash: slowHash, password: []byte("pw"), done: make(chan bool, 1)}
	// The jobs channel is unbuffered: once the send is done the worker is
	// hashing.
	p.jobs <- slow

	// A second compare waits for the busy worker.
	queued := make(chan bool, 1)
	go func() { queued <- p.Verify(fast, []byte("pw")) }()

	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case ok := <-slow.done:
		t.Errorf("the slowest check ended (%v) before Close returned; want Close not to wait for it", ok)
		<-closed
	}
	select {
	case ok := <-slow.done:
		t.Errorf("the slowest check ended (%v) before Close returned; want Close not to wait for it", ok)
	default:
	}

	// The timeouts only keep a broken pool from hanging the test.
	select {
	case ok := <-queued:
		if ok {
			t.Errorf("verify queued behind the busy worker, pool closed = true; want false")
		}
	case <-time.After(time.Minute):
		t.Errorf("verify queued behind the busy worker still blocked a minute after Close; want an error at once")
	}
	after := make(chan bool, 1)
	go func() { after <- p.Verify(fast, []byte("pw")) }()
	select {
	case ok := <-after:
		if ok {
			t.Errorf("verify after Close = true; want false")
		}
	case <-time.After(time.Minute):
		t.Errorf("verify after Close still blocked after a minute; want an error at once")
	}
}
