package cli

import (
	"bufio"
	"context"
	"io"
	"sync"
	"time"

	"authsvc/internal/tick"
)

// A logWriter batches log lines: one write system call per batch rather
// than per line (a few percent of /info's CPU under load), each line at most
// interval late. Close writes what is left; serve closes it last.
type logWriter struct {
	mu  sync.Mutex    // guards buf
	buf *bufio.Writer // writes through to the destination when full

	stop context.CancelFunc // ends the periodic flush
	done chan struct{}      // closed once it has ended
}

// newLogWriter returns a logWriter onto w, flushed every interval.
func newLogWriter(w io.Writer, interval time.Duration) *logWriter {
	ctx, stop := context.WithCancel(context.Background())
	l := &logWriter{buf: bufio.NewWriterSize(w, 64<<10), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick.Every(ctx, interval, func(time.Time) { l.flush() })
	}()
	return l
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// synced returns a writer onto l that writes each line through at once,
// after the lines before it: for audit lines, which must be on the
// destination before their request's reply is sent, so that a process
// killed right after replying has logged them.
func (l *logWriter) synced() io.Writer { return syncedLogWriter{l} }

type syncedLogWriter struct{ l *logWriter }

func (w syncedLogWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	n, err := w.l.buf.Write(p)
	if err == nil {
		err = w.l.buf.Flush()
	}
	return n, err
}

func (l *logWriter) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Flush()
}

// Close stops the periodic flush and writes every buffered line.
func (l *logWriter) Close() error {
	l.stop()
	<-l.done
	return l.flush()
}
