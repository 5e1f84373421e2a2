// Package mail sends API.md's password reset emails: ParseURL reads
// --smtp-url, a Sender delivers one plain-text message over SMTP (net/smtp,
// with STARTTLS required unless the URL says otherwise, or TLS from the
// first byte), and a Queue sends outside the caller's request with bounded
// room and retries; internal/resetmail renders the message. No error, log
// line or String form carries the SMTP password, and no log line carries a
// message's body (the reset link).
package mail

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// A Security is how a Sender protects the SMTP session.
type Security int

const (
	// StartTLS (smtp://) upgrades the session with STARTTLS and refuses
	// to go on when the server does not offer it.
	StartTLS Security = iota
	// ImplicitTLS (smtps://) speaks TLS from the first byte.
	ImplicitTLS
	// Plain (smtp://…?starttls=false) sends in clear, for a local relay.
	Plain
)

// The bounds a Config gets unless its own are set: a mail queue works
// outside any request, so they only keep a stuck server from holding a
// worker for long.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultTimeout     = 30 * time.Second
)

// Config is where and how a Sender delivers: --smtp-url parsed, plus what
// a URL cannot say. Its String form leaves the password out.
type Config struct {
	Host     string // a name or an IP address, without brackets
	Port     string
	Security Security
	Username string // PLAIN authentication when not empty
	Password string

	// TLS, when not nil, is the base of the client's TLS configuration
	// (RootCAs, for one: tests trust a throwaway certificate this way);
	// ServerName is always set to Host.
	TLS *tls.Config
	// DialTimeout bounds the TCP connect (DefaultDialTimeout when 0);
	// Timeout bounds a whole delivery, connect to QUIT (DefaultTimeout
	// when 0). net/smtp has no bound of its own.
	DialTimeout time.Duration
	Timeout     time.Duration
	// HelloName is the name given in EHLO ("localhost" when empty).
	HelloName string
}

// ParseURL parses smtp://[user:pass@]host:port[?starttls=false] or
// smtps://[user:pass@]host:port. The port is required; the user name and
// password are %-escaped (an "@" in a user name may also be left as it
// is: the last "@" ends them). Credentials over a clear session
// (starttls=false) are refused unless the host is the loopback one, as
// net/smtp's PLAIN refuses them. Its errors never quote the URL beyond
// its scheme: a malformed URL may hold the password anywhere.
func ParseURL(raw string) (Config, error) {
	var cfg Config
	scheme, rest, ok := strings.Cut(raw, "://")
	switch strings.ToLower(scheme) {
	case "smtp":
		cfg.Security = StartTLS
	case "smtps":
		cfg.Security = ImplicitTLS
	default:
		ok = false
	}
	if !ok {
		return Config{}, errors.New("SMTP URL: want smtp://[user:pass@]host:port[?starttls=false] or smtps://[user:pass@]host:port")
	}
	// The last "@" ends the credentials, so that an unescaped "/", "?" or
	// "#" in the password is not taken for the end of the host.
	at := strings.LastIndexByte(rest, '@')
	end := len(rest)
	if i := strings.IndexAny(rest[at+1:], "/?#"); i >= 0 {
		end = at + 1 + i
	}
	if at >= 0 {
		if err := cfg.setCredentials(rest[:at]); err != nil {
			return Config{}, err
		}
	}
	if err := cfg.setHostPort(rest[at+1 : end]); err != nil {
		return Config{}, err
	}
	if err := cfg.setOptions(rest[end:]); err != nil {
		return Config{}, err
	}
	if cfg.Username != "" && cfg.Security == Plain && !isLoopback(cfg.Host) {
		return Config{}, errors.New("SMTP URL: a password would go in clear to a host that is not the loopback one: use STARTTLS (drop starttls=false) or smtps://")
	}
	return cfg, nil
}

// setCredentials sets the user name and password from userinfo.
func (c *Config) setCredentials(userinfo string) error {
	user, pass, hasPass := strings.Cut(userinfo, ":")
	var err error
	if c.Username, err = url.PathUnescape(user); err != nil {
		return errors.New("SMTP URL: the user name has a bad %-escape")
	}
	if c.Password, err = url.PathUnescape(pass); err != nil {
		// Neither the password nor the escape is quoted: both are secret.
		return errors.New("SMTP URL: the password has a bad %-escape")
	}
	if c.Username == "" || !hasPass || c.Password == "" {
		return errors.New("SMTP URL: credentials need both a user name and a password (user:pass@)")
	}
	return nil
}

// setHostPort sets the host and the port from hostport.
func (c *Config) setHostPort(hostport string) error {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || host == "" || port == "" {
		// Not quoted: without its "@" the host part holds the password.
		return errors.New("SMTP URL: want host:port after the credentials, with the port given")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return errors.New("SMTP URL: the port is not a number from 1 to 65535")
	}
	c.Host, c.Port = host, port
	return nil
}

// setOptions reads what follows the host: nothing, "/", or
// ?starttls=true|false on smtp://. Anything else is an error rather
// than something silently ignored.
func (c *Config) setOptions(tail string) error {
	path, query, _ := strings.Cut(tail, "?")
	if path != "" && path != "/" {
		return errors.New("SMTP URL: a path or a fragment is not allowed")
	}
	if strings.Contains(query, "#") {
		return errors.New("SMTP URL: a fragment is not allowed")
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return errors.New("SMTP URL: the query is malformed")
	}
	for key, vals := range values {
		if key != "starttls" {
			return fmt.Errorf("SMTP URL: unknown option %q (only starttls=false is known)", key)
		}
		if c.Security == ImplicitTLS {
			return errors.New("SMTP URL: starttls= is for smtp://; smtps:// is TLS from the first byte")
		}
		if len(vals) != 1 || (vals[0] != "true" && vals[0] != "false") {
			return errors.New("SMTP URL: starttls must be given once, true or false")
		}
		if vals[0] == "false" {
			c.Security = Plain
		}
	}
	return nil
}

// isLoopback reports whether host is one net/smtp's PLAIN sends a
// password to in clear.
func isLoopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// String returns the URL the Config was parsed from, with the password
// replaced by "xxxxx" (as url.URL.Redacted does).
func (c Config) String() string {
	scheme, query := "smtp", ""
	switch c.Security {
	case ImplicitTLS:
		scheme = "smtps"
	case Plain:
		query = "?starttls=false"
	}
	creds := ""
	if c.Username != "" {
		creds = url.UserPassword(c.Username, "xxxxx").String() + "@"
	}
	return scheme + "://" + creds + net.JoinHostPort(c.Host, c.Port) + query
}

// GoString is String, so that %#v leaves the password out too.
func (c Config) GoString() string { return "mail.Config(" + c.String() + ")" }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// tlsConfig returns the client TLS configuration for c.
func (c Config) tlsConfig() *tls.Config {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLS != nil {
		tc = c.TLS.Clone()
		if tc.MinVersion == 0 {
			tc.MinVersion = tls.VersionTLS12
		}
	}
	tc.ServerName = c.Host
	return tc
}
