package login

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The tests run in synctest bubbles: time is fake, and synctest.Wait
// returns once every other goroutine is blocked, so "is waiting" and
// "returned at once" need no sleeps.

// wantStats fails the test unless a.stats() returns (running, waiting).
func wantStats(t *testing.T, a *Admission, running, waiting int) {
	t.Helper()
	if r, w := a.Stats(); r != running || w != waiting {
		t.Errorf("stats() = %d, %d; want %d, %d", r, w, running, waiting)
	}
}

// mustAcquire acquires a slot or fails the test.
func mustAcquire(t *testing.T, a *Admission) func() {
	t.Helper()
	release, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatalf("acquire() = _, %v; want a slot", err)
	}
	return release
}

// acquireAsync starts an acquire in a goroutine; its error arrives on the channel.
// On success the slot is released once the release channel is closed.
func acquireAsync(ctx context.Context, a *Admission, release <-chan struct{}) <-chan error {
	done := make(chan error, 1)
	go func() {
		rel, err := a.Acquire(ctx)
		done <- err
		if err == nil {
			<-release
			rel()
		}
	}()
	return done
}

func TestAdmissionSlotsHonored(t *testing.T) {
	for _, tt := range []struct {
		name        string
		slots, jobs int
		bubble      bool
	}{
		{"fake time", 3, 50, true},
		{"real time", 2, 20, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			run := func(t *testing.T) {
				a := NewAdmission(tt.slots, tt.jobs, time.Minute)
				var held, most atomic.Int64
				var wg sync.WaitGroup
				for range tt.jobs {
					wg.Go(func() {
						release, err := a.Acquire(context.Background())
						if err != nil {
							t.Errorf("acquire() = _, %v; want a slot", err)
							return
						}
						n := held.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						time.Sleep(time.Millisecond)
						held.Add(-1)
						release()
					})
				}
				wg.Wait()
				if m := most.Load(); m > int64(tt.slots) || (tt.bubble && m != int64(tt.slots)) {
					t.Errorf("most concurrent holders = %d; want %d", m, tt.slots)
				}
				wantStats(t, a, 0, 0)
			}
			if tt.bubble {
				synctest.Test(t, run)
			} else {
				run(t)
			}
		})
	}
}

func TestAdmissionQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdmission(1, 2, time.Hour)
		release := mustAcquire(t, a)
		letGo := make(chan struct{})
		w1 := acquireAsync(context.Background(), a, letGo)
		w2 := acquireAsync(context.Background(), a, letGo)
		synctest.Wait()
		wantStats(t, a, 1, 2)

		start := time.Now()
		if _, err := a.Acquire(context.Background()); err != errBusy {
			t.Errorf("acquire() with a full queue = _, %v; want errBusy", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("acquire() with a full queue took %v; want 0s", d)
		}
		wantStats(t, a, 1, 2)

		release()
		close(letGo)
		for _, w := range []<-chan error{w1, w2} {
			if err := <-w; err != nil {
				t.Errorf("queued acquire() = _, %v; want a slot", err)
			}
		}
		synctest.Wait()
		wantStats(t, a, 0, 0)
	})
}

func TestAdmissionZeroQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdmission(1, 0, time.Hour)
		release := mustAcquire(t, a)
		defer release()
		if _, err := a.Acquire(context.Background()); err != errBusy {
			t.Errorf("acquire() with queue 0 = _, %v; want errBusy", err)
		}
	})
}

func TestAdmissionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdmission(1, 1, 2*time.Second)
		release := mustAcquire(t, a)
		defer release()
		start := time.Now()
		if _, err := a.Acquire(context.Background()); err != errBusy {
			t.Errorf("acquire() with no slot freed = _, %v; want errBusy", err)
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Errorf("acquire() with no slot freed took %v; want 2s", d)
		}
		wantStats(t, a, 1, 0)
	})
}

func TestAdmissionContextDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdmission(1, 1, time.Hour)
		release := mustAcquire(t, a)
		defer release()

		ctx, cancel := context.WithCancel(context.Background())
		w := acquireAsync(ctx, a, nil)
		synctest.Wait()
		wantStats(t, a, 1, 1)
		cancel()
		if err := <-w; !errors.Is(err, context.Canceled) {
			t.Errorf("acquire(canceled ctx) = _, %v; want context.Canceled", err)
		}
		wantStats(t, a, 1, 0)

		ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := a.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("acquire(ctx with 100ms deadline) = _, %v; want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("acquire(ctx with 100ms deadline) took %v; want 100ms", d)
		}
	})
}

func TestAdmissionReleaseFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdmission(1, 1, time.Hour)
		release := mustAcquire(t, a)
		letGo := make(chan struct{})
		w := acquireAsync(context.Background(), a, letGo)
		synctest.Wait()
		wantStats(t, a, 1, 1)

		release()
		if err := <-w; err != nil {
			t.Errorf("waiting acquire() after release = _, %v; want a slot", err)
		}
		wantStats(t, a, 1, 0)
		release() // a second release must not free the waiter's slot
		wantStats(t, a, 1, 0)

		close(letGo)
		synctest.Wait()
		wantStats(t, a, 0, 0)
	})
}

func TestAdmissionFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdmission(1, 3, time.Hour)
		release := mustAcquire(t, a)
		var mu sync.Mutex // guards order
		var order []int
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				rel, err := a.Acquire(context.Background())
				if err != nil {
					t.Errorf("acquire() = _, %v; want a slot", err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				rel()
			})
			synctest.Wait() // waiter i is blocked before i+1 starts
		}
		release()
		wg.Wait()
		if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
			t.Errorf("waiters served in order %v; want [0 1 2]", order)
		}
	})
}

func TestNewAdmissionClamps(t *testing.T) {
	a := NewAdmission(0, -1, time.Second)
	if c, q := cap(a.slots), a.queue; c != 1 || q != 0 {
		t.Errorf("NewAdmission(0, -1, 1s) has %d slots, queue %d; want 1, 0", c, q)
	}
}

func TestAdmissionFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdmission(1, 1, time.Second)
		if a.full() {
			t.Fatalf("full() with a free slot = true; want false")
		}
		release := mustAcquire(t, a)
		if a.full() {
			t.Errorf("full() with the slot taken and the queue empty = true; want false")
		}
		releaseQueued := make(chan struct{})
		close(releaseQueued)
		done := acquireAsync(context.Background(), a, releaseQueued)
		synctest.Wait()
		if !a.full() {
			t.Errorf("full() with the slot taken and the queue full = false; want true")
		}
		release()
		if err := <-done; err != nil {
			t.Errorf("queued acquire = %v; want a slot", err)
		}
	})
}

func TestTarpit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := NewTarpit(250*time.Millisecond, 2)
		start := time.Now()
		tp.hold(context.Background())
		if d := time.Since(start); d != 250*time.Millisecond {
			t.Errorf("hold() took %v; want 250ms", d)
		}

		// Two held at once fill it: a third is refused at once.
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { tp.hold(context.Background()) })
		}
		synctest.Wait()
		start = time.Now()
		tp.hold(context.Background())
		if d := time.Since(start); d != 0 {
			t.Errorf("hold() with the tarpit full took %v; want 0", d)
		}
		wg.Wait()

		ctx, cancel := context.WithCancel(context.Background())
		start = time.Now()
		go func() { time.Sleep(10 * time.Millisecond); cancel() }()
		tp.hold(ctx)
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Errorf("hold() with ctx cancelled after 10ms took %v; want 10ms", d)
		}
	})
	if NewTarpit(0, 10) != nil {
		t.Errorf("NewTarpit(0, 10) != nil; want nil (refusals immediate)")
	}
	var off *Tarpit
	off.hold(context.Background()) // a nil tarpit holds nothing
}

// TestAdmissionSettlingBounded: at most slots+queue callers wait for the
// throttle's checks in flight at once; one that stops waiting frees its
// place.
func TestAdmissionSettlingBounded(t *testing.T) {
	a := NewAdmission(2, 1, time.Second)
	var dones []func()
	for i := range 3 {
		done, ok := a.startSettling()
		if !ok {
			t.Fatalf("startSettling() #%d with slots 2, queue 1 = false; want true", i+1)
		}
		dones = append(dones, done)
	}
	if _, ok := a.startSettling(); ok {
		t.Errorf("startSettling() #4 with slots 2, queue 1 = true; want false")
	}
	dones[0]()
	if _, ok := a.startSettling(); !ok {
		t.Errorf("startSettling() after one stopped waiting = false; want true")
	}
}
