package cli

import (
	"context"
	"io"
	"log/slog"

	"authsvc/internal/httpapi"
	"authsvc/internal/mail"
	"authsvc/internal/resetmail"
	"authsvc/internal/users"
)

// buildResetMail wires the reset links mailed on request (API.md,
// "Password reset") when --smtp-url is set: the mail queue, sending
// through the SMTP server outside the requests, and the service that
// finds the users, makes their links and renders their messages. The
// closers stop the service, then drain the queue within the shutdown
// grace. Without --smtp-url it returns nil: the route answers 404.
func buildResetMail(cfg serveConfig, dir users.Directory, m *httpapi.Metrics, log *slog.Logger) (httpapi.ResetRequester, []io.Closer, error) {
	if cfg.smtpURL == "" {
		return nil, nil, nil
	}
	smtp, err := mail.ParseURL(cfg.smtpURL)
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := resetmail.LoadResetTemplate(cfg.resetMailTemplate)
	if err != nil {
		return nil, nil, err
	}
	q := mail.NewQueue(mail.NewSender(smtp), mail.QueueOptions{Logger: log,
		OnSent: func(o mail.Outcome) {
			m.Mailed("sent")
			// The audit line of a mail sent: the user, never the address or the link.
			log.Info("password reset mail sent", "username", o.Ref, "attempts", o.Attempts)
		},
		OnFailed:  func(o mail.Outcome) { m.Mailed("failed_" + o.Reason) },
		OnDropped: func(mail.Outcome) { m.Mailed("dropped") },
	})
	svc := resetmail.New(dir, resetmail.Config{
		URL: cfg.resetURL, TTL: cfg.resetTTL,
		Render: tmpl.Render,
		Send: func(msg resetmail.Message) bool {
			return q.Enqueue(mail.Message{From: cfg.mailFrom, To: msg.To, Subject: msg.Subject, Body: msg.Body, Ref: msg.Ref})
		},
	}, log)
	drain := closerFunc(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		return q.Close(ctx)
	})
	log.Info("password reset by email", "smtp", smtp.String(), "from", cfg.mailFrom)
	return svc, []io.Closer{svc, drain}, nil
}
