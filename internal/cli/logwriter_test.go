package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"authsvc/internal/servertest"
)

func TestLogWriter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out servertest.SyncBuffer
		l := newLogWriter(&out, 100*time.Millisecond)
		fmt.Fprintln(l, "first")
		if got := out.String(); got != "" {
			t.Errorf("output before the flush interval = %q; want nothing yet", got)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := out.String(); got != "first\n" {
			t.Errorf("output after the flush interval = %q; want %q", got, "first\n")
		}
		fmt.Fprintln(l, "last")
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != "first\nlast\n" {
			t.Errorf("output after Close = %q; want both lines", got)
		}
	})
}

// TestLogWriterConcurrentLines: lines written at once come out whole, none lost.
func TestLogWriterConcurrentLines(t *testing.T) {
	t.Parallel()
	var out servertest.SyncBuffer
	l := newLogWriter(&out, time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				fmt.Fprintf(l, "goroutine=%d line=%d %s\n", g, i, strings.Repeat("x", i%100))
			}
		})
	}
	wg.Wait()
	l.Close()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*2000 {
		t.Fatalf("got %d lines; want %d", len(lines), 8*2000)
	}
	for _, line := range lines {
		var g, i int
		var pad string
		if n, _ := fmt.Sscanf(line, "goroutine=%d line=%d %s", &g, &i, &pad); n < 2 || (i%100 != 0 && len(pad) != i%100) {
			t.Fatalf("line %q is not whole", line)
		}
	}
}

// TestLogWriterSynced: a line through synced is on the destination when
// Write returns, after the batched lines before it; batched lines wait.
func TestLogWriterSynced(t *testing.T) {
	t.Parallel()
	var dst servertest.SyncBuffer
	l := newLogWriter(&dst, time.Hour)
	defer l.Close()
	io.WriteString(l, "access 1\n")
	if got := dst.String(); got != "" {
		t.Fatalf("destination after a batched line = %q; want nothing yet", got)
	}
	io.WriteString(l.synced(), "audit\n")
	if got, want := dst.String(), "access 1\naudit\n"; got != want {
		t.Errorf("destination after a synced line = %q; want %q", got, want)
	}
	io.WriteString(l, "access 2\n")
	if got, want := dst.String(), "access 1\naudit\n"; got != want {
		t.Errorf("destination after another batched line = %q; want %q", got, want)
	}
}
