package mail

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// resetMessage is a message like a reset one: a non-ASCII subject and
// name, and a link longer than a quoted-printable line, with "=" in it.
func resetMessage() Message {
	return Message{
		From:    "authsvc <noreply@example.com>",
		To:      "Zoë Müller <zoe@example.org>",
		Subject: "Réinitialisation du mot de passe",
		Body: "Bonjour Zoë,\n\nhttps://auth.example.com/reset/?uid=em9l&token=" +
			strings.Repeat("AbCdEfGhIj", 8) + "\n\n.\nA line with only a dot above.\n",
		Ref: "zoe",
	}
}

// sendOne sends m with a Sender for cfg and fails t on an error.
func sendOne(t *testing.T, cfg Config, m Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := NewSender(cfg).Send(ctx, m); err != nil {
		t.Fatalf("Send = %v; want nil", err)
	}
}

// checkDelivered checks that srv holds exactly m, with the headers a mail
// reader relies on, and returns it.
func checkDelivered(t *testing.T, srv *testservers.SMTPServer, m Message) testservers.SMTPMessage {
	t.Helper()
	got := srv.Messages(t)
	if len(got) != 1 {
		t.Fatalf("server received %d messages; want 1", len(got))
	}
	r := got[0]
	if r.MailFrom != "noreply@example.com" || len(r.RcptTos) != 1 || r.RcptTos[0] != "zoe@example.org" {
		t.Errorf("envelope = %q → %q; want noreply@example.com → [zoe@example.org]", r.MailFrom, r.RcptTos)
	}
	if s := r.Subject(t); s != m.Subject {
		t.Errorf("Subject = %q; want %q", s, m.Subject)
	}
	if r.Body != m.Body {
		t.Errorf("body = %q; want %q", r.Body, m.Body)
	}
	h := r.Msg.Header
	for name, want := range map[string]string{
		"MIME-Version":              "1.0",
		"Content-Type":              "text/plain; charset=utf-8",
		"Content-Transfer-Encoding": "quoted-printable",
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s = %q; want %q", name, got, want)
		}
	}
	if d, err := h.Date(); err != nil || time.Since(d).Abs() > time.Minute {
		t.Errorf("Date = %q (%v); want about now", h.Get("Date"), err)
	}
	if id := h.Get("Message-ID"); !strings.HasPrefix(id, "<") || !strings.HasSuffix(id, "@example.com>") {
		t.Errorf("Message-ID = %q; want <…@example.com>", id)
	}
	if to, err := h.AddressList("To"); err != nil || len(to) != 1 || to[0].Name != "Zoë Müller" {
		t.Errorf("To = %q (%v); want Zoë Müller <zoe@example.org>", h.Get("To"), err)
	}
	return r
}

func TestSendPlainWhenStartTLSFalse(t *testing.T) {
	srv := testservers.SMTP(t, testservers.SMTPOptions{})
	m := resetMessage()
	sendOne(t, mustParseURL(t, "smtp://127.0.0.1:"+srv.Port+"?starttls=false"), m)
	if r := checkDelivered(t, srv, m); r.TLS {
		t.Error("session TLS = true; want a clear session")
	}
}

func TestSendPlainWithPasswordToLoopback(t *testing.T) {
	srv := testservers.SMTP(t, testservers.SMTPOptions{User: "mailer", Password: "s3cret pw"})
	m := resetMessage()
	sendOne(t, mustParseURL(t, "smtp://mailer:s3cret%20pw@127.0.0.1:"+srv.Port+"?starttls=false"), m)
	if r := checkDelivered(t, srv, m); r.Login == nil || *r.Login != "mailer" {
		t.Errorf("login = %v; want mailer", r.Login)
	}
}

func TestSendRefusesServerWithoutStartTLS(t *testing.T) {
	srv := testservers.SMTP(t, testservers.SMTPOptions{})
	err := NewSender(mustParseURL(t, "smtp://127.0.0.1:"+srv.Port)).Send(context.Background(), resetMessage())
	var se *SendError
	if !errors.As(err, &se) || se.Reason != ReasonTLS || !se.Permanent {
		t.Fatalf("Send = %v; want a permanent SendError with reason tls", err)
	}
	if got := srv.Messages(t); len(got) != 0 {
		t.Errorf("server received %d messages; want none in clear", len(got))
	}
}

func TestSendStartTLS(t *testing.T) {
	cert := testservers.NewTestCert(t)
	srv := testservers.SMTP(t, testservers.SMTPOptions{Cert: &cert, User: "mailer", Password: "pw:with@signs"})
	m := resetMessage()
	sendOne(t, trusting(mustParseURL(t, "smtp://mailer:pw%3Awith%40signs@127.0.0.1:"+srv.Port), cert), m)
	r := checkDelivered(t, srv, m)
	if !r.TLS || r.Login == nil || *r.Login != "mailer" {
		t.Errorf("session TLS, login = %v, %v; want true, mailer", r.TLS, r.Login)
	}
}

func TestSendSMTPS(t *testing.T) {
	cert := testservers.NewTestCert(t)
	srv := testservers.SMTP(t, testservers.SMTPOptions{Cert: &cert, SMTPS: true, User: "mailer", Password: "pw"})
	m := resetMessage()
	sendOne(t, trusting(mustParseURL(t, "smtps://mailer:pw@127.0.0.1:"+srv.Port), cert), m)
	r := checkDelivered(t, srv, m)
	if !r.TLS || r.Login == nil || *r.Login != "mailer" {
		t.Errorf("session TLS, login = %v, %v; want true, mailer", r.TLS, r.Login)
	}
}

func TestSendRefusesUntrustedCertificate(t *testing.T) {
	cert := testservers.NewTestCert(t)
	srv := testservers.SMTP(t, testservers.SMTPOptions{Cert: &cert})
	err := NewSender(mustParseURL(t, "smtp://127.0.0.1:"+srv.Port)).Send(context.Background(), resetMessage())
	var se *SendError
	if !errors.As(err, &se) || se.Reason != ReasonTLS || !se.Permanent {
		t.Fatalf("Send = %v; want a permanent SendError with reason tls", err)
	}
	if got := srv.Messages(t); len(got) != 0 {
		t.Errorf("server received %d messages; want none", len(got))
	}
}

func TestSendWrongPassword(t *testing.T) {
	cert := testservers.NewTestCert(t)
	srv := testservers.SMTP(t, testservers.SMTPOptions{Cert: &cert, User: "mailer", Password: "right-pw"})
	const wrong = "Wrong-Pw-4711"
	cfg := trusting(mustParseURL(t, "smtp://mailer:"+wrong+"@127.0.0.1:"+srv.Port), cert)
	err := NewSender(cfg).Send(context.Background(), resetMessage())
	var se *SendError
	if !errors.As(err, &se) || se.Reason != ReasonAuth || !se.Permanent {
		t.Fatalf("Send = %v; want a permanent SendError with reason auth", err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), "zoe@") {
		t.Errorf("error %q quotes the password or the recipient", err)
	}
	if got := srv.Messages(t); len(got) != 0 {
		t.Errorf("server received %d messages; want none", len(got))
	}
}

func TestSendRefusesHeaderInjection(t *testing.T) {
	// Nothing listens: a refused message must not even dial.
	cfg := mustParseURL(t, "smtp://127.0.0.1:"+testservers.FreePort(t)+"?starttls=false")
	for _, edit := range []func(*Message){
		func(m *Message) { m.Subject = "Hi\r\nBcc: victim@example.net" },
		func(m *Message) { m.Subject = "Hi\nBcc: victim@example.net" },
		func(m *Message) { m.To = "zoe@example.org\r\nBcc: victim@example.net" },
		func(m *Message) { m.From = "noreply@example.com\rX: y" },
		func(m *Message) { m.To = "not an address" },
	} {
		m := resetMessage()
		edit(&m)
		err := NewSender(cfg).Send(context.Background(), m)
		var se *SendError
		if !errors.As(err, &se) || se.Reason != ReasonMessage || !se.Permanent {
			t.Errorf("Send(From %q, To %q, Subject %q) = %v; want a permanent SendError with reason message", m.From, m.To, m.Subject, err)
		}
	}
}

func TestSendTimeoutOnSilentServer(t *testing.T) {
	// A TCP peer that accepts and never greets: net/smtp alone would wait forever.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	cfg := mustParseURL(t, "smtp://127.0.0.1:"+port)
	cfg.Timeout = 300 * time.Millisecond
	start := time.Now()
	err = NewSender(cfg).Send(context.Background(), resetMessage())
	var se *SendError
	if !errors.As(err, &se) || se.Reason != ReasonTimeout || se.Permanent {
		t.Fatalf("Send = %v; want a transient SendError with reason timeout", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Send took %v; want about the 300ms Timeout", took)
	}
}

func TestRedactAddress(t *testing.T) {
	a, b := RedactAddress("Zoe@Example.org"), RedactAddress("Zoë <zoe@example.org>")
	if a != b || !strings.HasSuffix(a, "@example.org") || strings.Contains(a, "zoe") || len(a) != 12+len("@example.org") {
		t.Errorf("RedactAddress = %q, %q; want one 12-hex-digit hash @example.org for both", a, b)
	}
}
