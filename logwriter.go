package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// A logWriter batches log lines: one write system call per batch rather
// than per line (a few percent of /info's CPU under load), each line at most
// interval late. Close writes what is left; serve closes it last.
type logWriter struct {
	mu  sync.Mutex    // guards buf
	buf *bufio.Writer // writes through to the destination when full

	stop chan struct{}
	done chan struct{}
}

// newLogWriter returns a logWriter onto w, flushed every interval.
func newLogWriter(w io.Writer, interval time.Duration) *logWriter {
	l := &logWriter{buf: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go l.flushEvery(interval)
	return l
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logWriter) flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Flush()
}

func (l *logWriter) flushEvery(interval time.Duration) {
	defer close(l.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			l.flush()
		case <-l.stop:
			return
		}
	}
}

// Close stops the periodic flush and writes every buffered line.
func (l *logWriter) Close() error {
	close(l.stop)
	<-l.done
	return l.flush()
}
