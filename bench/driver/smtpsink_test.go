package main

import (
	"net/smtp"
	"strings"
	"testing"
)

// TestSMTPSinkTakesNetSMTP sends messages through net/smtp, as authsvc's
// mailer does without STARTTLS, and counts them at the sink.
func TestSMTPSinkTakesNetSMTP(t *testing.T) {
	s, err := startSMTPSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	addr := strings.TrimSuffix(strings.TrimPrefix(s.url(), "smtp://"), "?starttls=false")
	msgs := []string{
		"Subject: one\r\n\r\nbody\r\n",
		"Subject: two\r\n\r\n..a line that starts with a dot\r\n.\r\n",
	}
	for _, m := range msgs {
		if err := smtp.SendMail(addr, nil, "from@example.com", []string{"to@example.com"}, []byte(m)); err != nil {
			t.Fatalf("smtp.SendMail(%q) = %v; want nil", m, err)
		}
	}
	if got := s.messages.Load(); got != int64(len(msgs)) {
		t.Errorf("sink messages = %d; want %d", got, len(msgs))
	}
}
