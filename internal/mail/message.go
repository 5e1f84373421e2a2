package mail

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	netmail "net/mail"
	"strings"
	"time"
	"unicode/utf8"
)

// A Message is one plain-text email.
type Message struct {
	From    string // an address, optionally with a name: "authsvc <noreply@example.com>"
	To      string // likewise
	Subject string
	Body    string // UTF-8 text; "\n" or "\r\n" line ends

	// Ref is an opaque label for the sender's own logs and hooks (the
	// username, say); it is never part of the email.
	Ref string
}

// errMessage marks a message that cannot be sent as it is: no retry helps.
var errMessage = errors.New("invalid message")

// envelope is a Message ready for SMTP: its addresses and its bytes.
type envelope struct {
	from, to string
	data     []byte
}

// build checks m and returns its envelope, with the headers a mail reader
// expects. Header values holding CR or LF are refused, so that no value
// can add a header (a Bcc:, say) of its own.
//
// The body goes quoted-printable: its bytes stay 7-bit and its lines at
// most 76 characters whatever the text (non-ASCII names, a long reset
// link), so it passes every server unchanged. 8bit would need the
// server's 8BITMIME and would still break on a line over SMTP's 998
// octets; every mail reader decodes quoted-printable.
func (m Message) build(now time.Time) (envelope, error) {
	for _, h := range [...]struct{ name, value string }{{"From", m.From}, {"To", m.To}, {"Subject", m.Subject}} {
		if strings.ContainsAny(h.value, "\r\n") {
			return envelope{}, fmt.Errorf("%w: the %s header has a line break", errMessage, h.name)
		}
		if !utf8.ValidString(h.value) {
			return envelope{}, fmt.Errorf("%w: the %s header is not UTF-8", errMessage, h.name)
		}
	}
	if !utf8.ValidString(m.Body) {
		return envelope{}, fmt.Errorf("%w: the body is not UTF-8", errMessage)
	}
	from, err := netmail.ParseAddress(m.From)
	if err != nil {
		return envelope{}, fmt.Errorf("%w: the From address: %v", errMessage, err)
	}
	to, err := netmail.ParseAddress(m.To)
	if err != nil {
		// Not quoted: the recipient's address stays out of logs.
		return envelope{}, fmt.Errorf("%w: the To address is malformed", errMessage)
	}
	id, err := messageID(from.Address)
	if err != nil {
		return envelope{}, err
	}
	var b bytes.Buffer
	header := func(name, value string) { b.WriteString(name + ": " + value + "\r\n") }
	header("Date", now.Format(time.RFC1123Z))
	header("From", from.String())
	header("To", to.String())
	header("Subject", mime.QEncoding.Encode("utf-8", m.Subject))
	header("Message-ID", id)
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	// RFC 3834: no auto-reply (an absence notice) back to the sender.
	header("Auto-Submitted", "auto-generated")
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	qp.Write([]byte(m.Body)) // "\n" and "\r\n" alike become CRLF
	qp.Close()
	return envelope{from: from.Address, to: to.Address, data: b.Bytes()}, nil
}

// messageID returns a new Message-ID in the domain of the From address.
func messageID(from string) (string, error) {
	domain := from[strings.LastIndexByte(from, '@')+1:]
	var r [16]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	return "<" + hex.EncodeToString(r[:]) + "@" + domain + ">", nil
}
