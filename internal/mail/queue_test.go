package mail

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// outcomes records a Queue's hooks.
type outcomes struct {
	mu                    sync.Mutex
	sent, failed, dropped []Outcome
}

func (o *outcomes) options(log *logBuffer) QueueOptions {
	add := func(list *[]Outcome) func(Outcome) {
		return func(out Outcome) { o.mu.Lock(); *list = append(*list, out); o.mu.Unlock() }
	}
	return QueueOptions{
		Logger:   slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnSent:   add(&o.sent),
		OnFailed: add(&o.failed), OnDropped: add(&o.dropped),
	}
}

func (o *outcomes) snapshot() (sent, failed, dropped []Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Outcome(nil), o.sent...), append([]Outcome(nil), o.failed...), append([]Outcome(nil), o.dropped...)
}

// checkLogSecrets fails t if the log holds the body, the link, its token,
// the subject, the recipient's address or any of secrets.
func checkLogSecrets(t *testing.T, log string, m Message, secrets ...string) {
	t.Helper()
	link := strings.Fields(m.Body)[2] // resetMessage's link
	token := link[strings.LastIndex(link, "=")+1:]
	for _, s := range append([]string{link, token, m.Subject, "zoe@example.org", "Bonjour"}, secrets...) {
		if strings.Contains(log, s) {
			t.Errorf("log holds %q:\n%s", s, log)
		}
	}
}

func closeQueue(t *testing.T, q *Queue, within time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return q.Close(ctx)
}

func TestQueueRetriesUntilServerComesUp(t *testing.T) {
	testservers.NeedAiosmtpd(t)
	port := testservers.FreePort(t) // nothing listens yet
	var log logBuffer
	var o outcomes
	opts := o.options(&log)
	opts.Backoff, opts.Attempts = 500*time.Millisecond, 6
	q := NewQueue(NewSender(mustParseURL(t, "smtp://127.0.0.1:"+port+"?starttls=false")), opts)
	m := resetMessage()
	if !q.Enqueue(m) {
		t.Fatal("Enqueue = false; want true")
	}
	log.waitFor(t, "will retry")
	srv := testservers.SMTP(t, testservers.SMTPOptions{Port: port})
	if err := closeQueue(t, q, 20*time.Second); err != nil {
		t.Fatalf("Close = %v; want nil (drained)", err)
	}
	checkDelivered(t, srv, m)
	sent, failed, dropped := o.snapshot()
	if len(sent) != 1 || sent[0].Attempts < 2 || sent[0].Ref != "zoe" || len(failed) != 0 || len(dropped) != 0 {
		t.Errorf("outcomes sent %+v, failed %+v, dropped %+v; want one sent after 2 or more attempts", sent, failed, dropped)
	}
	checkLogSecrets(t, log.String(), m)
	if !strings.Contains(log.String(), "to="+RedactAddress(m.To)) {
		t.Errorf("log does not name the recipient as %s:\n%s", RedactAddress(m.To), log.String())
	}
}

func TestQueueGivesUpOnWrongPassword(t *testing.T) {
	cert := testservers.NewTestCert(t)
	srv := testservers.SMTP(t, testservers.SMTPOptions{Cert: &cert, User: "mailer", Password: "right-pw"})
	const wrong = "Wrong-Pw-4711"
	var log logBuffer
	var o outcomes
	opts := o.options(&log)
	opts.Backoff = 10 * time.Millisecond
	q := NewQueue(NewSender(trusting(mustParseURL(t, "smtp://mailer:"+wrong+"@127.0.0.1:"+srv.Port), cert)), opts)
	m := resetMessage()
	q.Enqueue(m)
	if err := closeQueue(t, q, 20*time.Second); err != nil {
		t.Fatalf("Close = %v; want nil", err)
	}
	_, failed, _ := o.snapshot()
	// 535 is permanent: one attempt, not DefaultAttempts.
	if len(failed) != 1 || failed[0].Reason != ReasonAuth || failed[0].Attempts != 1 {
		t.Fatalf("failed = %+v; want one with reason auth after 1 attempt", failed)
	}
	if got := srv.Messages(t); len(got) != 0 {
		t.Errorf("server received %d messages; want none", len(got))
	}
	if !strings.Contains(log.String(), "mail not sent") {
		t.Errorf("no log line for the failure:\n%s", log.String())
	}
	checkLogSecrets(t, log.String(), m, wrong)
}

func TestQueueFullDropsAndCounts(t *testing.T) {
	// Nothing listens and the retry waits a minute: the one worker holds
	// a message, the queue holds Size, the rest are dropped.
	var log logBuffer
	var o outcomes
	opts := o.options(&log)
	opts.Size, opts.Backoff = 2, time.Minute
	q := NewQueue(NewSender(mustParseURL(t, "smtp://127.0.0.1:"+testservers.FreePort(t)+"?starttls=false")), opts)
	taken := 0
	for range 10 {
		if q.Enqueue(resetMessage()) {
			taken++
		}
	}
	if taken < 2 || taken > 3 {
		t.Errorf("Enqueue took %d of 10; want 2 (Size) or 3 (one more with the worker)", taken)
	}
	_, _, dropped := o.snapshot()
	if len(dropped) != 10-taken {
		t.Errorf("OnDropped calls = %d; want %d", len(dropped), 10-taken)
	}
	for _, d := range dropped {
		if d.Reason != DropFull {
			t.Errorf("dropped reason = %q; want %q", d.Reason, DropFull)
		}
	}
	if err := closeQueue(t, q, 300*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v; want context.DeadlineExceeded (gave up)", err)
	}
	sent, failed, _ := o.snapshot()
	if len(sent) != 0 || len(failed) != taken {
		t.Errorf("after Close: OnSent calls %d, OnFailed calls %d; want 0 and %d", len(sent), len(failed), taken)
	}
	for _, f := range failed {
		if f.Reason != ReasonShutdown {
			t.Errorf("failed reason = %q; want %q", f.Reason, ReasonShutdown)
		}
	}
	if q.Enqueue(resetMessage()) {
		t.Error("Enqueue after Close = true; want false")
	}
	if _, _, dropped := o.snapshot(); dropped[len(dropped)-1].Reason != DropClosed {
		t.Errorf("dropped after Close reason = %q; want %q", dropped[len(dropped)-1].Reason, DropClosed)
	}
	checkLogSecrets(t, log.String(), resetMessage())
}
