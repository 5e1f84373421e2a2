package mail

import (
	"bytes"
	"crypto/tls"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// A logBuffer collects a slog text handler's lines, safe for the queue's
// workers to write while the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits up to 10 s for the log to hold s.
func (l *logBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(l.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within 10s; log:\n%s", s, l.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// trusting returns cfg trusting c.
func trusting(cfg Config, c testservers.TestCert) Config {
	cfg.TLS = &tls.Config{RootCAs: c.Pool}
	return cfg
}
