package password

import (
	"fmt"
	"runtime"
	"sync"
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
	for _, p := range []*Pool{NewPool(2, exe, 0, discardLog), NewPool(1, "", 0, discardLog), nil} {
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
// The worker is stopped (SIGSTOP) mid-check, so the check can never end
// by itself: a Close that waited for it would never return. (Before, the
// test raced the kill's own false answer against Close's return.)
func TestHasherPoolCloseDoesNotWait(t *testing.T) {
	p := NewPool(1, testBinary(t), 0, discardLog)
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
	// The jobs channel is unbuffered: once the send is done the worker
	// has the job, and starts its process for it.
	p.jobs <- slow
	stopWorkers(t, p)

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
	case <-time.After(time.Minute):
		t.Fatal("Close still running a minute after it was called, beside a check that cannot end; want it to return at once")
	}
	select {
	case ok := <-slow.done:
		if ok {
			t.Errorf("the check Close killed = true; want false")
		}
	case <-time.After(time.Minute):
		t.Errorf("the check Close killed had no answer a minute later; want false at once")
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

// stopWorkers waits for p's worker processes to be started, then stops
// them (SIGSTOP): whatever they are checking is never answered.
func stopWorkers(t *testing.T, p *Pool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		n := len(p.procs)
		for proc := range p.procs {
			if err := proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Errorf("stopping a worker: %v", err)
			}
		}
		p.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no worker process a minute after a job was taken")
		}
	}
}

// TestHasherPoolIdleWorkerExits: a worker idle for the pool's idle period
// exits (its process is gone, not only forgotten), and the next check
// starts one again and answers right.
func TestHasherPoolIdleWorkerExits(t *testing.T) {
	p := NewPool(1, testBinary(t), 20*time.Millisecond, discardLog)
	defer p.Close()
	h, _ := ParseHash(testHash)
	if !p.Verify(h, []byte("pw")) {
		t.Fatal("verify(right) = false; want true")
	}
	first := hashProcs(p)
	if len(first) != 1 {
		t.Fatalf("worker processes = %v; want 1", first)
	}
	// The deadline only keeps a broken pool from hanging the test.
	deadline := time.Now().Add(time.Minute)
	for processExists(first[0]) || len(hashProcs(p)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the last check, worker processes = %v, process %d exists = %v; want none, gone",
				hashProcs(p), first[0], processExists(first[0]))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, tc := range []struct {
		password string
		want     bool
	}{{"pw", true}, {"wrong", false}} {
		if got := p.Verify(h, []byte(tc.password)); got != tc.want {
			t.Errorf("after the idle worker exited, verify(%q) = %v; want %v", tc.password, got, tc.want)
		}
	}
	// It ran in a new worker, not in this process.
	if now := hashProcs(p); len(now) > 1 || len(now) == 1 && now[0] == first[0] {
		t.Errorf("worker processes after the idle exit = %v; want at most one new one (not %d)", now, first[0])
	}
}

// TestHasherPoolIdleConcurrent: checks from many goroutines while workers
// come and go (an idle period of a millisecond) all get the right answer;
// under -race, the pool's bookkeeping is checked too.
func TestHasherPoolIdleConcurrent(t *testing.T) {
	p := NewPool(2, testBinary(t), time.Millisecond, discardLog)
	defer p.Close()
	h, _ := ParseHash(testHash)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 6 {
				if i%3 == g%3 {
					time.Sleep(3 * time.Millisecond) // let a worker go idle
				}
				pw, want := "pw", true
				if (g+i)%2 == 1 {
					pw, want = "wrong", false
				}
				if got := p.Verify(h, []byte(pw)); got != want {
					t.Errorf("goroutine %d check %d: verify(%q) = %v; want %v", g, i, pw, got, want)
				}
			}
		})
	}
	wg.Wait()
	left := hashProcs(p)
	p.Close()
	// Every worker still running when Close was called is killed. The
	// deadline only keeps a broken pool from hanging the test.
	for _, pid := range left {
		for deadline := time.Now().Add(time.Minute); processExists(pid); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("worker process %d still exists a minute after Close; want it gone", pid)
			}
		}
	}
}

// processExists reports whether pid is a process, a zombie not yet reaped
// included.
func processExists(pid int) bool {
	return syscall.Kill(pid, 0) != syscall.ESRCH
}
