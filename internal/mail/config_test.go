package mail

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want Config
		str  string
	}{
		{"smtp://mail.example.com:587", Config{Host: "mail.example.com", Port: "587", Security: StartTLS}, "smtp://mail.example.com:587"},
		{"SMTP://mail.example.com:587/", Config{Host: "mail.example.com", Port: "587", Security: StartTLS}, "smtp://mail.example.com:587"},
		{"smtp://mail.example.com:587?starttls=true", Config{Host: "mail.example.com", Port: "587", Security: StartTLS}, "smtp://mail.example.com:587"},
		{"smtp://127.0.0.1:25?starttls=false", Config{Host: "127.0.0.1", Port: "25", Security: Plain}, "smtp://127.0.0.1:25?starttls=false"},
		{"smtp://u:p@localhost:25/?starttls=false", Config{Host: "localhost", Port: "25", Security: Plain, Username: "u", Password: "p"}, "smtp://u:xxxxx@localhost:25?starttls=false"},
		{"smtps://mailer:s%2Fe%40c:ret@[::1]:465", Config{Host: "::1", Port: "465", Security: ImplicitTLS, Username: "mailer", Password: "s/e@c:ret"}, "smtps://mailer:xxxxx@[::1]:465"},
		// An unescaped "@" in the user name, "/", "?" and "#" in the password: the last "@" ends them.
		{"smtp://me@example.com:p/w?x#y@smtp.example.com:587", Config{Host: "smtp.example.com", Port: "587", Security: StartTLS, Username: "me@example.com", Password: "p/w?x#y"}, "smtp://me%40example.com:xxxxx@smtp.example.com:587"},
	} {
		got, err := ParseURL(tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
			continue
		}
		if s := got.String(); s != tc.str {
			t.Errorf("ParseURL(%q).String() = %q; want %q", tc.raw, s, tc.str)
		}
	}
}

func TestParseURLRefuses(t *testing.T) {
	const pw = "Hunter2Secret"
	for _, raw := range []string{
		"",
		"mail.example.com:587",
		"http://mail.example.com:587",
		"smtp://mail.example.com",              // no port
		"smtp://mail.example.com:0",            // port out of range
		"smtp://mail.example.com:smtp",         // port not a number
		"smtp://:587",                          // no host
		"smtp://mail.example.com:587/path",     // a path
		"smtp://mail.example.com:587#frag",     // a fragment
		"smtp://mail.example.com:587?tls=true", // an unknown option
		"smtp://mail.example.com:587?starttls=no",
		"smtp://mail.example.com:587?starttls=false&starttls=true",
		"smtps://mail.example.com:465?starttls=false",
		"smtp://u:" + pw + "@mail.example.com:587?starttls=false", // a password in clear to a remote host
		"smtp://u:" + pw + "%zz@mail.example.com:587",             // a bad escape in the password
		"smtp://u:" + pw + "mail.example.com:587",                 // the "@" forgotten
		"smtp://u" + pw + "@mail.example.com",                     // a user without a password, no port
		"smtp://:" + pw + "@mail.example.com:587",                 // a password without a user
	} {
		cfg, err := ParseURL(raw)
		if err == nil {
			t.Errorf("ParseURL(%q) = %+v, nil; want an error", raw, cfg)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("ParseURL(%q) error %q quotes the password", raw, err)
		}
	}
}

func TestConfigFormsHidePassword(t *testing.T) {
	const pw = "Hunter2Secret"
	cfg := mustParseURL(t, "smtps://mailer:"+pw+"@mail.example.com:465")
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("mail", "smtp", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%v", &cfg), logged.String()} {
		if strings.Contains(s, pw) || !strings.Contains(s, "mail.example.com:465") {
			t.Errorf("a form of the Config = %q; want the host without the password", s)
		}
	}
}

// mustParseURL is ParseURL that fails t on an error.
func mustParseURL(t *testing.T, raw string) Config {
	t.Helper()
	cfg, err := ParseURL(raw)
	if err != nil {
		t.Fatalf("ParseURL: %v", err)
	}
	return cfg
}
