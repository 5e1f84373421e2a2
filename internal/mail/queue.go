package mail

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// The defaults of QueueOptions.
const (
	DefaultQueueSize  = 1000
	DefaultWorkers    = 1
	DefaultAttempts   = 5
	DefaultBackoff    = 1 * time.Second
	DefaultMaxBackoff = 1 * time.Minute
)

// Why Enqueue dropped a message (Outcome.Reason).
const (
	DropFull   = "full"
	DropClosed = "closed"
)

// QueueOptions shape a Queue; a zero field takes its default.
type QueueOptions struct {
	Size     int // messages waiting at most (DefaultQueueSize); a full queue drops a new one
	Workers  int // goroutines sending (DefaultWorkers)
	Attempts int // tries per message, the first included (DefaultAttempts)
	// Backoff is the wait before the second try (DefaultBackoff), doubled
	// before each next one up to MaxBackoff (DefaultMaxBackoff).
	Backoff    time.Duration
	MaxBackoff time.Duration

	// Logger gets a line per failed try and per message given up, with
	// the message's Ref, its recipient redacted (RedactAddress), the
	// reason and the error; never the body, the subject or the address.
	// Nil: no lines.
	Logger *slog.Logger

	// The hooks, each called once per message from a worker (OnDropped
	// from Enqueue's caller), for metrics and audit lines. They must be
	// quick and safe for concurrent use; nil ones are skipped.
	OnSent    func(Outcome)
	OnFailed  func(Outcome) // after the last try, or when Close gave up
	OnDropped func(Outcome) // Enqueue refused the message (full, closed)
}

// An Outcome is what became of one message.
type Outcome struct {
	Ref      string // the Message's Ref
	To       string // the recipient, redacted (RedactAddress)
	Attempts int    // tries made
	// Reason is empty for a message sent, a Reason constant for one that
	// failed (ReasonShutdown: Close gave up before it went), DropFull or
	// DropClosed for one dropped.
	Reason string
	Err    error // the last try's error (a *SendError) when it failed
}

// A Queue sends messages outside the caller's request: Enqueue never
// waits, workers send with retries, Close drains.
type Queue struct {
	sender *Sender
	opts   QueueOptions
	ch     chan Message

	mu     sync.Mutex // guards closed, so that Enqueue never sends on a closed ch
	closed bool

	ctx    context.Context // canceled when Close gives up: sends and waits end
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewQueue starts a Queue's workers, sending with s.
func NewQueue(s *Sender, opts QueueOptions) *Queue {
	setDefault(&opts.Size, DefaultQueueSize)
	setDefault(&opts.Workers, DefaultWorkers)
	setDefault(&opts.Attempts, DefaultAttempts)
	setDefault(&opts.Backoff, DefaultBackoff)
	setDefault(&opts.MaxBackoff, DefaultMaxBackoff)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	q := &Queue{sender: s, opts: opts, ch: make(chan Message, opts.Size)}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.wg.Add(opts.Workers)
	for range opts.Workers {
		go q.work()
	}
	return q
}

// setDefault sets *v to def when it is not positive.
func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Enqueue hands m to the workers and reports whether it was taken; a full
// or closed queue drops it (counted, OnDropped called).
func (q *Queue) Enqueue(m Message) bool {
	q.mu.Lock()
	reason := DropClosed
	if !q.closed {
		select {
		case q.ch <- m:
			q.mu.Unlock()
			return true
		default:
			reason = DropFull
		}
	}
	q.mu.Unlock()
	out := Outcome{Ref: m.Ref, To: RedactAddress(m.To), Reason: reason}
	q.opts.Logger.Warn("mail dropped", "ref", out.Ref, "to", out.To, "reason", reason)
	if q.opts.OnDropped != nil {
		q.opts.OnDropped(out)
	}
	return false
}

// Close stops taking messages and waits for the workers to send those
// taken, retries included, until ctx is done; then it gives up the rest
// (counted failed, ReasonShutdown) and returns ctx's error.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
		q.cancel()
		return nil
	case <-ctx.Done():
		q.cancel()
		<-done // quick: every send and wait of the workers watches q.ctx
		return ctx.Err()
	}
}

// work sends the queue's messages until it is closed and empty.
func (q *Queue) work() {
	defer q.wg.Done()
	for m := range q.ch {
		q.deliver(m)
	}
}

// deliver sends m, trying again after a growing wait while the failure
// may pass, and records the outcome.
func (q *Queue) deliver(m Message) {
	out := Outcome{Ref: m.Ref, To: RedactAddress(m.To)}
	log := q.opts.Logger.With("ref", out.Ref, "to", out.To)
	wait := q.opts.Backoff
	for q.ctx.Err() == nil {
		out.Attempts++
		err := q.sender.Send(q.ctx, m)
		if err == nil {
			log.Debug("mail sent", "attempts", out.Attempts)
			if q.opts.OnSent != nil {
				q.opts.OnSent(out)
			}
			return
		}
		out.Err, out.Reason = err, ReasonConnect
		var se *SendError
		if errors.As(err, &se) {
			out.Reason = se.Reason
		}
		if out.Attempts >= q.opts.Attempts || (se != nil && se.Permanent) || q.ctx.Err() != nil {
			break
		}
		log.Warn("mail delivery failed, will retry", "attempt", out.Attempts, "max_attempts", q.opts.Attempts,
			"retry_in", wait, "reason", out.Reason, "error", err)
		if !q.sleep(wait) {
			break
		}
		wait = min(2*wait, q.opts.MaxBackoff)
	}
	if q.ctx.Err() != nil {
		out.Reason = ReasonShutdown
	}
	log.Error("mail not sent", "attempts", out.Attempts, "reason", out.Reason, "error", out.Err)
	if q.opts.OnFailed != nil {
		q.opts.OnFailed(out)
	}
}

// sleep waits d and reports whether it did, rather than Close giving up.
func (q *Queue) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-q.ctx.Done():
		return false
	}
}
