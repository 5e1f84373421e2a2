// Package resetmail serves requests for password reset links by email
// (API.md, "Password reset"): outside the request that asked, it finds the
// users an address or a name stands for, makes each a link (at most three
// mailed an hour, counted in the user's record), renders the message and
// hands it to a mail queue. Nothing it does reaches the reply: the request
// was answered 204 before, whoever exists.
//
// It knows nothing of SMTP (internal/mail sends) nor of HTTP (internal/
// httpapi takes the requests); no log line of it holds a link, a token or
// an address.
package resetmail

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"authsvc/internal/users"
)

// Data is what a reset message is rendered from: what a reset template
// (ResetTemplate) sees.
type Data struct {
	Username string
	Name     string    // may be empty
	URL      string    // the link
	Expires  time.Time // when the link dies
}

// A Message is a rendered reset message for one user; Ref names the user
// in the mail queue's log lines, never the address.
type Message struct {
	To, Subject, Body, Ref string
}

// Config is how a Service makes links and messages.
type Config struct {
	URL     string        // --reset-url: {uid} and {token} are filled in
	TTL     time.Duration // --reset-ttl
	Render  func(Data) (subject, body string, err error)
	Send    func(Message) bool // queues the message; false when the queue dropped it
	Now     func() time.Time
	Backlog int // requests waiting for the worker at most; 0: 1000
}

// Counts are what a Service did, for metrics.
type Counts struct {
	Requests, Dropped, Limited, Queued, Failed int64
}

// A Service serves reset requests with one worker, from New to Close.
type Service struct {
	dir    users.Directory
	cfg    Config
	log    *slog.Logger
	jobs   chan job
	cancel context.CancelFunc
	done   chan struct{}

	requests, dropped, limited, queued, failed atomic.Int64
}

// job is one request: by "email" or "username", value.
type job struct{ by, value, requestID string }

// New returns a Service making links in dir, its worker started.
func New(dir users.Directory, cfg Config, log *slog.Logger) *Service {
	if cfg.Backlog <= 0 {
		cfg.Backlog = 1000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{dir: dir, cfg: cfg, log: log, jobs: make(chan job, cfg.Backlog), cancel: cancel, done: make(chan struct{})}
	go func() { s.run(ctx); close(s.done) }()
	return s
}

// Close stops the worker, after the request it is serving; requests
// still waiting are dropped (their replies went out long ago).
func (s *Service) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// RequestReset queues a request without blocking; a full backlog drops
// it (counted, logged without the address).
func (s *Service) RequestReset(by, value, requestID string) {
	s.requests.Add(1)
	select {
	case s.jobs <- job{by: by, value: value, requestID: requestID}:
	default:
		s.dropped.Add(1)
		s.log.Warn("password reset request dropped: the backlog is full", "request_id", requestID)
	}
}

// Counts returns what the Service has done so far.
func (s *Service) Counts() Counts {
	return Counts{Requests: s.requests.Load(), Dropped: s.dropped.Load(), Limited: s.limited.Load(),
		Queued: s.queued.Load(), Failed: s.failed.Load()}
}

// run serves the requests until ctx is done.
func (s *Service) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-s.jobs:
			s.serve(ctx, j)
		}
	}
}

// serve finds the users of j and mails each a link.
func (s *Service) serve(ctx context.Context, j job) {
	names, err := s.find(ctx, j)
	if err != nil {
		s.failed.Add(1)
		s.log.Warn("password reset request: cannot read the users", "request_id", j.requestID, "err", err)
		return
	}
	for _, name := range names {
		s.mail(ctx, name, j.requestID)
	}
}

// find returns the names of the enabled users with an address that j
// names: by address (ignoring case), or the user of that name.
func (s *Service) find(ctx context.Context, j job) ([]string, error) {
	if j.by == "email" {
		return users.UsersByEmail(ctx, s.dir, j.value)
	}
	u, err := s.dir.Lookup(ctx, users.NormalizeUsername(j.value))
	switch {
	case errors.Is(err, users.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case u.Disabled() || u.Info().Email == "":
		return nil, nil
	}
	return []string{u.Username()}, nil
}

// mail makes a link for the user named name and queues its message.
func (s *Service) mail(ctx context.Context, name, requestID string) {
	now := s.cfg.Now()
	uid, token, err := users.NewMailedResetLink(ctx, s.dir, name, s.cfg.TTL, now)
	switch {
	case errors.Is(err, users.ErrResetMailLimit):
		s.limited.Add(1)
		s.log.Info("password reset mail not sent: three this hour already", "username", name, "request_id", requestID)
		return
	case errors.Is(err, users.ErrNoEmail), errors.Is(err, users.ErrDisabled), errors.Is(err, users.ErrNotFound):
		return // changed since it was found
	case err != nil:
		s.failed.Add(1)
		s.log.Warn("password reset mail not sent: cannot record the link", "username", name, "request_id", requestID, "err", err)
		return
	}
	u, err := s.dir.Lookup(ctx, name)
	if err != nil {
		s.failed.Add(1)
		s.log.Warn("password reset mail not sent: cannot read the user", "username", name, "request_id", requestID, "err", err)
		return
	}
	info := u.Info()
	subject, body, err := s.cfg.Render(Data{Username: name, Name: info.Name, URL: users.FormatResetURL(s.cfg.URL, uid, token),
		Expires: now.Add(s.cfg.TTL).UTC()})
	if err != nil {
		s.failed.Add(1)
		s.log.Warn("password reset mail not sent: the template failed", "username", name, "request_id", requestID, "err", err)
		return
	}
	if !s.cfg.Send(Message{To: info.Email, Subject: subject, Body: body, Ref: name}) {
		s.failed.Add(1)
		s.log.Warn("password reset mail not sent: the mail queue is full", "username", name, "request_id", requestID)
		return
	}
	s.queued.Add(1)
	s.log.Info("password reset mail queued", "username", name, "request_id", requestID)
}
