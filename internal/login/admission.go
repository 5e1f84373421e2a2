package login

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errBusy reports that no password-check slot came free in time; the caller
// answers 503 unavailable with a Retry-After.
var errBusy = errors.New("password checking at capacity")

// An Admission bounds concurrent password checks: at most slots run at
// once, at most queue callers wait for a slot, each at most wait. A login
// flood then costs bounded CPU and memory and gets fast 503s instead of
// ever-growing latency.
//
// Choosing the numbers (the caller's defaults; benchmarks will settle them):
//
//   - slots = GOMAXPROCS: hashing is pure CPU, so more only adds latency.
//     The checks run in niced worker processes (password.Pool), so a flood
//     that keeps every slot busy still leaves the CPU to token checks.
//   - queue = 4×slots: a compare at cost 12 takes about 280 ms, so the last
//     caller in a full queue finishes after about 5×280 ms = 1.4 s, under
//     wait. A deeper queue only holds callers who would time out anyway.
//   - wait = 2s: a backstop for when hashing is slower than expected (CPU
//     contention, higher cost); beyond it a client is better off retrying.
//
// It also bounds the logins that wait, holding no slot, for the throttle's
// checks in flight to settle (Attempt.reserve): at most slots+queue at
// once, as many as there can be checks in flight here, each at most wait.
// A waiter asks the throttle again every few milliseconds, so a flood of
// them would cost CPU here (and round trips to a shared throttle's Redis)
// without bound.
type Admission struct {
	slots    chan struct{} // one element per running check: send to acquire, receive to release
	queue    int64
	wait     time.Duration
	waiting  atomic.Int64 // callers blocked in acquire, at most queue once they are admitted to wait
	settling atomic.Int64 // callers waiting for the throttle (startSettling), at most slots+queue once admitted
}

// NewAdmission returns an admission that allows at most slots (at least 1)
// password checks at once, and lets at most queue (at least 0) callers wait
// up to wait each for a slot.
func NewAdmission(slots, queue int, wait time.Duration) *Admission {
	return &Admission{
		slots: make(chan struct{}, max(1, slots)),
		queue: int64(max(0, queue)),
		wait:  wait,
	}
}

// Acquire reserves a slot, waiting for one if the queue has room. It returns
// errBusy at once if all slots are taken and the queue is full, errBusy after
// wait if no slot came free, or ctx.Err() if ctx is done first (the client
// went away or its deadline passed). Waiters get slots in the order they
// began to wait (a channel serves blocked senders first come, first served).
// After a nil error the caller must call release once the check is done;
// calling it more than once is harmless.
func (a *Admission) Acquire(ctx context.Context) (release func(), err error) {
	select {
	case a.slots <- struct{}{}:
		return a.releaser(), nil
	default:
	}

	if a.waiting.Add(1) > a.queue {
		a.waiting.Add(-1)
		return nil, errBusy
	}
	defer a.waiting.Add(-1)

	timer := time.NewTimer(a.wait)
	defer timer.Stop()
	select {
	case a.slots <- struct{}{}:
		return a.releaser(), nil
	case <-timer.C:
		return nil, errBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startSettling lets a caller wait for the throttle's checks in flight to
// settle, for at most a.wait, unless slots+queue callers wait for it
// already. After ok the caller must call done when it stops waiting.
func (a *Admission) startSettling() (done func(), ok bool) {
	if a.settling.Add(1) > int64(cap(a.slots))+a.queue {
		a.settling.Add(-1)
		return nil, false
	}
	return func() { a.settling.Add(-1) }, true
}

// full reports whether acquire would now return errBusy at once: every
// slot taken and the queue full. The login handler asks before it reads the
// body, so a flood beyond capacity costs as little as possible.
func (a *Admission) full() bool {
	return len(a.slots) == cap(a.slots) && a.waiting.Load() >= a.queue
}

// releaser returns a function that gives back one slot, once.
func (a *Admission) releaser() func() {
	var once sync.Once
	return func() { once.Do(func() { <-a.slots }) }
}

// Stats returns how many checks hold a slot and how many callers wait for one.
func (a *Admission) Stats() (running, waiting int) {
	return len(a.slots), int(a.waiting.Load())
}

// A Tarpit holds refused logins (429, and 503 at capacity) for a moment
// before their reply. A flooding client waits for each reply before it sends
// again, so its connections idle instead of cycling through instant refusals
// that would take the CPU from token checks; a held request costs a parked
// goroutine, no CPU. At most max are held at once; beyond that refusals are
// immediate, so the tarpit's memory stays bounded.
type Tarpit struct {
	delay time.Duration
	held  chan struct{} // one element per held request
}

// NewTarpit returns a tarpit, or nil (refusals immediate) when delay is 0.
func NewTarpit(delay time.Duration, max int) *Tarpit {
	if delay <= 0 || max <= 0 {
		return nil
	}
	return &Tarpit{delay: delay, held: make(chan struct{}, max)}
}

// hold waits for the delay, or less if ctx ends or too many are held.
func (t *Tarpit) hold(ctx context.Context) {
	if t == nil {
		return
	}
	select {
	case t.held <- struct{}{}:
	default:
		return
	}
	defer func() { <-t.held }()
	timer := time.NewTimer(t.delay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
