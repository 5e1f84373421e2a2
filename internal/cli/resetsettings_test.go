package cli

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestServeResetSettings: serve's reset and mail settings take their
// flags and AUTHSVC_* variables, default as API.md says, and refuse what
// cannot work as a usage error that never shows the SMTP password.
func TestServeResetSettings(t *testing.T) {
	t.Parallel()
	c := defaultServeConfig()
	if c.resetURL != "{uid}/{token}" || c.resetTTL != time.Hour || c.smtpURL != "" || c.mailFrom != "" || c.resetMailTemplate != "" {
		t.Errorf("defaults = url %q, ttl %v, smtp %q, from %q, template %q; want {uid}/{token}, 1h and the rest empty",
			c.resetURL, c.resetTTL, c.smtpURL, c.mailFrom, c.resetMailTemplate)
	}
	env := map[string]string{
		"AUTHSVC_RESET_URL":           "https://app.example/r/{uid}/{token}",
		"AUTHSVC_RESET_TTL":           "30m",
		"AUTHSVC_SMTP_URL":            "smtp://mailer:s3cret-pw@127.0.0.1:2525?starttls=false",
		"AUTHSVC_MAIL_FROM":           "authsvc@example.com",
		"AUTHSVC_RESET_MAIL_TEMPLATE": "/etc/authsvc/reset.tmpl",
	}
	c, err := parseServeFlags([]string{"--reset-ttl", "2h"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("parseServeFlags with every reset variable set = %v", err)
	}
	if c.resetURL != env["AUTHSVC_RESET_URL"] || c.resetTTL != 2*time.Hour || c.smtpURL != env["AUTHSVC_SMTP_URL"] ||
		c.mailFrom != env["AUTHSVC_MAIL_FROM"] || c.resetMailTemplate != env["AUTHSVC_RESET_MAIL_TEMPLATE"] {
		t.Errorf("parsed = url %q, ttl %v, smtp %q, from %q, template %q; want the variables' values, and 2h (the flag wins)",
			c.resetURL, c.resetTTL, c.smtpURL, c.mailFrom, c.resetMailTemplate)
	}

	const from = "--mail-from=a@example.com"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--reset-url", "https://app.example/r/{token}"}, "--reset-url"},
		{[]string{"--reset-url", "{uid}/{token}\r\n"}, "--reset-url"},
		{[]string{"--reset-ttl", "0"}, "--reset-ttl"},
		{[]string{"--smtp-url", "smtp://u:s3cret-pw@mail.example:587"}, "--mail-from is required with --smtp-url"},
		{[]string{"--smtp-url", "smtp://u:s3cret-pw@mail.example:587", "--mail-from", "not an address"}, "--mail-from"},
		{[]string{"--smtp-url", "http://u:s3cret-pw@mail.example:587", from}, "--smtp-url: want"},
		{[]string{"--smtp-url", "smtp://u:s3cret-pw@mail.example", from}, "--smtp-url: want"},
		{[]string{"--smtp-url", "smtps://u:s3cret-pw@mail.example:465?starttls=false", from}, "--smtp-url: want"},
		{[]string{"--smtp-url", "smtp://u:s3cret-pw@mail.example:587?starttls=maybe", from}, "--smtp-url: want"},
		{[]string{"--smtp-url", "smtp://u:s3cret-pw@mail.example:587/x", from}, "--smtp-url: want"},
		{[]string{"--smtp-url", "smtp://u:s3cret-pw@[::1:587\x7f", from}, "--smtp-url: want"},
	} {
		_, err := parseServeFlags(tt.args, func(string) string { return "" }, io.Discard)
		if _, ok := err.(*usageError); !ok || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseServeFlags(%q) = %v; want a usage error naming %q", tt.args, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("parseServeFlags(%q) = %v; the message shows the SMTP password", tt.args, err)
		}
	}
	for _, ok := range []string{"smtp://127.0.0.1:25?starttls=false", "smtps://u:p@mail.example:465", "smtp://mail.example:587/"} {
		if _, err := parseServeFlags([]string{"--smtp-url", ok, from}, func(string) string { return "" }, io.Discard); err != nil {
			t.Errorf("parseServeFlags(--smtp-url %s) = %v; want nil", ok, err)
		}
	}
}

// TestServeHelpHidesNoSMTPPassword: --help with AUTHSVC_SMTP_URL set shows
// the built-in default, never the variable's value.
func TestServeHelpHidesNoSMTPPassword(t *testing.T) {
	t.Parallel()
	env := map[string]string{"AUTHSVC_SMTP_URL": "smtp://u:s3cret-pw@mail.example:587", "AUTHSVC_MAIL_FROM": "a@example.com"}
	code, stdout, stderr := runCLI(t, "", env, "serve", "--help")
	if code != 0 || strings.Contains(stdout+stderr, "s3cret-pw") {
		t.Errorf("serve --help with AUTHSVC_SMTP_URL set = exit %d, output holds the password: %v; want exit 0, no password",
			code, strings.Contains(stdout+stderr, "s3cret-pw"))
	}
}
