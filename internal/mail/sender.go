package mail

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"net"
	netmail "net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"strings"
	"time"
)

// The reasons a delivery fails, for the logs and for the outcome label of
// authsvc_reset_mail_total ("failed_" and the reason).
const (
	ReasonMessage  = "message"  // the message itself is invalid (an address, a header)
	ReasonConnect  = "connect"  // no TCP connection, greeting or EHLO
	ReasonTLS      = "tls"      // no STARTTLS offered, a failed handshake, an untrusted certificate
	ReasonAuth     = "auth"     // no AUTH offered, or the credentials refused
	ReasonRejected = "rejected" // the server refused the sender, the recipient or the data
	ReasonTimeout  = "timeout"  // a bound (Config's, the context's) ran out
	ReasonCanceled = "canceled" // the context was canceled
	ReasonShutdown = "shutdown" // the Queue was closed before the message could go
)

var (
	errNoStartTLS = errors.New("the server does not offer STARTTLS (smtp://…?starttls=false sends in clear)")
	errNoAuth     = errors.New("the server does not offer AUTH, and the URL has credentials")
)

// A SendError is a failed delivery. Its message names neither the SMTP
// password nor the recipient's full address (only its domain).
type SendError struct {
	Reason string // one of the Reason constants
	// Permanent reports whether sending the same message again cannot
	// help: a 5xx reply, an invalid message, a server without STARTTLS
	// or AUTH, an untrusted certificate.
	Permanent bool
	msg       string
	err       error
}

func (e *SendError) Error() string { return e.msg }
func (e *SendError) Unwrap() error { return e.err }

// A Sender delivers messages as its Config says, one SMTP session each.
// It is safe for concurrent use.
type Sender struct {
	cfg Config
}

// NewSender returns a Sender for cfg.
func NewSender(cfg Config) *Sender {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.HelloName == "" {
		cfg.HelloName = "localhost"
	}
	return &Sender{cfg: cfg}
}

// Send delivers m in one SMTP session, within the Config's Timeout and
// ctx. Its errors are *SendError.
func (s *Sender) Send(ctx context.Context, m Message) error {
	env, err := m.build(time.Now())
	if err != nil {
		return s.fail(ctx, ReasonMessage, err, "")
	}
	deadline := time.Now().Add(s.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn, reason, err := s.dial(ctx, deadline)
	if err != nil {
		return s.fail(ctx, reason, err, env.to)
	}
	// A canceled ctx ends a session blocked in a read or a write.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c, err := smtp.NewClient(conn, s.cfg.Host)
	if err != nil {
		conn.Close()
		return s.fail(ctx, ReasonConnect, err, env.to)
	}
	defer c.Close()
	if reason, err := s.session(c, env); err != nil {
		return s.fail(ctx, reason, err, env.to)
	}
	return nil
}

// dial connects to the server, with TLS at once for smtps://, and sets
// the session's deadline.
func (s *Sender) dial(ctx context.Context, deadline time.Time) (net.Conn, string, error) {
	d := net.Dialer{Timeout: s.cfg.DialTimeout, Deadline: deadline}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(s.cfg.Host, s.cfg.Port))
	if err != nil {
		return nil, ReasonConnect, err
	}
	conn.SetDeadline(deadline)
	if s.cfg.Security != ImplicitTLS {
		return conn, "", nil
	}
	tc := tls.Client(conn, s.cfg.tlsConfig())
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, ReasonTLS, err
	}
	return tc, "", nil
}

// session runs EHLO, STARTTLS, AUTH and the transaction on c, and
// returns the reason of a failure.
func (s *Sender) session(c *smtp.Client, env envelope) (string, error) {
	if err := c.Hello(s.cfg.HelloName); err != nil {
		return ReasonConnect, err
	}
	if s.cfg.Security == StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return ReasonTLS, errNoStartTLS
		}
		if err := c.StartTLS(s.cfg.tlsConfig()); err != nil {
			return ReasonTLS, err
		}
	}
	if s.cfg.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return ReasonAuth, errNoAuth
		}
		// PlainAuth sends the password only under TLS or to the loopback
		// host, which ParseURL insists on.
		if err := c.Auth(smtp.PlainAuth("", s.cfg.Username, s.cfg.Password, s.cfg.Host)); err != nil {
			return ReasonAuth, err
		}
	}
	if err := c.Mail(env.from); err != nil {
		return ReasonRejected, err
	}
	if err := c.Rcpt(env.to); err != nil {
		return ReasonRejected, err
	}
	w, err := c.Data()
	if err != nil {
		return ReasonRejected, err
	}
	if _, err := w.Write(env.data); err != nil {
		return ReasonConnect, err
	}
	if err := w.Close(); err != nil { // the server's verdict on the message
		return ReasonRejected, err
	}
	// The message is accepted: a failed QUIT changes nothing.
	c.Quit()
	return "", nil
}

// fail returns err as a *SendError, its text rid of the password and the
// recipient's full address.
func (s *Sender) fail(ctx context.Context, reason string, err error, to string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	switch {
	case errors.Is(err, context.Canceled):
		reason = ReasonCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		reason = ReasonTimeout
	}
	msg := "send mail: " + reason + ": " + err.Error()
	if s.cfg.Password != "" {
		msg = strings.ReplaceAll(msg, s.cfg.Password, "xxxxx")
	}
	if to != "" {
		msg = strings.ReplaceAll(msg, to, RedactAddress(to))
	}
	return &SendError{Reason: reason, Permanent: permanent(err), msg: msg, err: err}
}

// permanent reports whether err is one a retry cannot cure.
func permanent(err error) bool {
	var reply *textproto.Error
	if errors.As(err, &reply) {
		return reply.Code >= 500
	}
	var unknownCA x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	return errors.Is(err, errMessage) || errors.Is(err, errNoStartTLS) || errors.Is(err, errNoAuth) ||
		errors.As(err, &unknownCA) || errors.As(err, &invalid) || errors.As(err, &hostname)
}

// RedactAddress returns addr ("alice@example.com" or "Alice
// <alice@example.com>") as logs may show it: the first 12 hex digits of
// the SHA-256 of the bare address in lower case, then its domain
// ("ff8d9819fc0e@example.com"), so that an operator can match a line
// with a user's address without the line holding it.
func RedactAddress(addr string) string {
	if a, err := netmail.ParseAddress(addr); err == nil {
		addr = a.Address
	}
	addr = strings.ToLower(strings.TrimSpace(addr))
	sum := sha256.Sum256([]byte(addr))
	domain := "?"
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		domain = addr[i+1:]
	}
	return hex.EncodeToString(sum[:6]) + "@" + domain
}
