package main

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// An smtpSink is a mail server that accepts every message and keeps none:
// enough SMTP for net/smtp without STARTTLS or AUTH (EHLO or HELO, MAIL,
// RCPT, DATA, RSET, NOOP, QUIT), so that the reset-flood part's authsvc
// mails every link it makes, as with a real relay, at no cost to measure.
type smtpSink struct {
	ln       net.Listener
	messages atomic.Int64 // accepted with 250 after DATA
	wg       sync.WaitGroup
}

// startSMTPSink listens on a free loopback port and serves until close.
func startSMTPSink() (*smtpSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &smtpSink{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return // closed
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(conn)
			}()
		}
	}()
	return s, nil
}

// url is the sink's --smtp-url.
func (s *smtpSink) url() string { return "smtp://" + s.ln.Addr().String() + "?starttls=false" }

// close stops listening and waits for the open sessions, each bounded by
// its deadline.
func (s *smtpSink) close() {
	s.ln.Close()
	s.wg.Wait()
}

// serve runs one SMTP session: every command but DATA's and QUIT's gets
// 250, so that no message is refused.
func (s *smtpSink) serve(conn net.Conn) {
	defer conn.Close()
	// A client that stalls cannot hold close forever.
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)
	w := bufio.NewWriter(conn)
	reply := func(lines ...string) bool {
		for _, l := range lines {
			w.WriteString(l + "\r\n")
		}
		return w.Flush() == nil
	}
	if !reply("220 bench-sink ESMTP") {
		return
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		verb, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			if !reply("250-bench-sink", "250 8BITMIME") {
				return
			}
		case "DATA":
			if !reply("354 end with <CRLF>.<CRLF>") {
				return
			}
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if strings.TrimRight(l, "\r\n") == "." {
					break
				}
			}
			s.messages.Add(1)
			if !reply("250 accepted") {
				return
			}
		case "QUIT":
			reply("221 bye")
			return
		default: // HELO, MAIL, RCPT, RSET, NOOP, and anything else
			if !reply("250 ok") {
				return
			}
		}
	}
}
