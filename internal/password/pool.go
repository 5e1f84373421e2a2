package password

import (
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// A Pool runs password checks (bcrypt, argon2id, PBKDF2) in worker
// processes at the lowest CPU priority ("authsvc hash-worker",
// worker.go), one per worker. Under a login flood the kernel then gives
// the CPU to token checks first, while on an idle machine hashing still
// gets all of it. Threads of this process would not do: argon2 runs its
// lanes on goroutines of their own, which the runtime schedules on normal
// threads, and a niced thread holding a P stalls every stop-the-world of
// the garbage collector until the kernel lets it run (measured on 2 vCPUs
// under a 64-connection login flood: /info fell to 20% of its unloaded
// throughput with p99 near 50 ms on Go's scheduler alone). A worker that cannot
// be started, or dies, is replaced by a check in this process: slower
// token checks under a flood, never a wrong answer.
//
// A worker that has checked nothing for the pool's idle period exits, and
// the next check starts one again. A worker returns argon2id's memory a
// second after its last check (worker.go), but its process still holds
// about 6 MB, one per slot, on every instance of a quiet fleet. A start
// costs tens of ms on the first login after the pause (make bench measures
// it), once per idle period at most.
type Pool struct {
	jobs      chan verifyJob // unbuffered: a sent job is being hashed
	stop      chan struct{}  // closed by Close
	closeOnce sync.Once      // closes stop once, however often Close is called
	exe       string         // the binary to start workers from; "" checks in this process
	idle      time.Duration  // a worker idle this long exits; 0: never
	log       *slog.Logger

	mu    sync.Mutex         // guards procs
	procs map[*hashProc]bool // running workers, killed by Close
}

type verifyJob struct {
	hash     *Hash
	password []byte
	done     chan bool
}

// NewPool starts workers checkers (at least one), each with a worker
// process of exe started on its first job and stopped once it has been
// idle for idle (0: kept until Close).
func NewPool(workers int, exe string, idle time.Duration, log *slog.Logger) *Pool {
	p := &Pool{jobs: make(chan verifyJob), stop: make(chan struct{}), exe: exe, idle: max(0, idle), log: log, procs: map[*hashProc]bool{}}
	for range max(1, workers) {
		go p.work()
	}
	return p
}

// work is one checker: it owns its worker process, so a worker stopped for
// idleness is never one a job was just sent to.
func (p *Pool) work() {
	var proc *hashProc
	defer func() { p.drop(proc) }()
	idle := time.NewTimer(0)
	idle.Stop()
	for {
		var idleC <-chan time.Time // nil: no worker to stop, or never
		if proc != nil && p.idle > 0 {
			idle.Reset(p.idle)
			idleC = idle.C
		}
		select {
		case j := <-p.jobs:
			idle.Stop()
			var ok bool
			ok, proc = p.check(proc, j)
			j.done <- ok
		case <-idleC:
			p.drop(proc)
			proc = nil
		case <-p.stop:
			idle.Stop()
			return
		}
	}
}

// check runs j on proc, starting a worker process when there is none, and
// returns the answer and the worker to use next.
func (p *Pool) check(proc *hashProc, j verifyJob) (bool, *hashProc) {
	if proc == nil && p.exe != "" {
		var err error
		if proc, err = p.start(); err != nil {
			p.log.Warn("hash worker did not start; checking passwords in the server's process", "err", err)
		}
	}
	if proc == nil {
		return j.hash.Verify(j.password), nil
	}
	ok, err := proc.verify(j.hash, j.password)
	if err != nil {
		p.drop(proc)
		select {
		case <-p.stop: // Close killed it
			return false, nil
		default:
		}
		p.log.Warn("hash worker failed; checking this password in the server's process", "err", err)
		return j.hash.Verify(j.password), nil
	}
	return ok, proc
}

// start starts a worker process and registers it for Close.
func (p *Pool) start() (*hashProc, error) {
	proc, err := startHashProc(p.exe)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stop:
		proc.kill()
		return nil, errors.New("hasher closed")
	default:
	}
	p.procs[proc] = true
	return proc, nil
}

// drop kills proc (nil: nothing) and forgets it.
func (p *Pool) drop(proc *hashProc) {
	if proc == nil {
		return
	}
	p.mu.Lock()
	delete(p.procs, proc)
	p.mu.Unlock()
	proc.kill()
}

// Verify reports whether password matches hash, checked by a worker; a nil
// pool checks on the caller's goroutine. Once the pool is closed it reports
// false without waiting for a worker.
func (p *Pool) Verify(hash *Hash, password []byte) bool {
	if p == nil {
		return hash.Verify(password)
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

// Close stops the workers and kills their processes without waiting for
// the checks they are running: at cost 16 one takes seconds, longer than
// shutdown's grace.
func (p *Pool) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		close(p.stop)
		for proc := range p.procs {
			proc.kill()
		}
	})
	return nil
}

// A hashProc is one worker process and the pipes to it; one goroutine at a
// time uses it.
type hashProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   io.ReadCloser
	frame []byte // reused; cleared after each write, since it holds a password
}

// startHashProc starts "exe hash-worker" from a thread at the lowest
// priority, which the process and every thread it makes inherit.
func startHashProc(exe string) (*hashProc, error) {
	cmd := exec.Command(exe, WorkerCommand)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		in.Close()
		return nil, err
	}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the niced thread exits with this goroutine
		// rather than return to the runtime for other goroutines.
		runtime.LockOSThread()
		lowerThreadPriority()
		started <- cmd.Start() // forks from this thread
	}()
	if err := <-started; err != nil {
		in.Close()
		out.Close()
		return nil, err
	}
	go cmd.Wait() // reaps it once it exits
	return &hashProc{cmd: cmd, in: in, out: out}, nil
}

// verify sends one job and reads its answer.
func (w *hashProc) verify(h *Hash, password []byte) (bool, error) {
	w.frame = appendHashJob(w.frame[:0], h, password)
	_, err := w.in.Write(w.frame)
	clear(w.frame)
	if err != nil {
		return false, err
	}
	var answer [1]byte
	if _, err := io.ReadFull(w.out, answer[:]); err != nil {
		return false, err
	}
	switch answer[0] {
	case jobMatch:
		return true, nil
	case jobMismatch:
		return false, nil
	}
	return false, errors.New("hash worker: unexpected answer")
}

// kill ends the process; its pipes close with it.
func (w *hashProc) kill() {
	w.cmd.Process.Kill()
	w.in.Close()
}
