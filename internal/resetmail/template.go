package resetmail

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/template"
	"time"
)

// DefaultResetTemplate is the built-in reset message (--reset-mail-template
// not given). A template's output starts with a "Subject: " line, which
// is the message's subject; an empty line after it is skipped; the rest
// is the body. The subject lives in the template, not in the code, so
// that a deployment can word (and translate) both together.
const DefaultResetTemplate = `Subject: Reset your password
{{/* the Subject line above is the message's subject; the body follows */}}
Hello {{if .Name}}{{.Name}}{{else}}{{.Username}}{{end}},

someone, hopefully you, asked to reset the password of the account
"{{.Username}}". To choose a new password, open this link:

{{.URL}}

The link works once, until {{.Expires.UTC.Format "Mon, 02 Jan 2006 15:04:05 MST"}}.
If you did not ask for it, ignore this message: your password stays as
it is.
`

// A ResetTemplate renders reset messages. It is safe for concurrent use.
type ResetTemplate struct {
	t *template.Template
}

// LoadResetTemplate reads the template file at path, or takes
// DefaultResetTemplate when path is "".
func LoadResetTemplate(path string) (*ResetTemplate, error) {
	if path == "" {
		return ParseResetTemplate(DefaultResetTemplate)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reset mail template: %w", err)
	}
	return ParseResetTemplate(string(text))
}

// ParseResetTemplate parses text as a Go text/template and renders it
// once with sample data, so that a template naming an unknown field or
// lacking its Subject line fails at start, not at the first reset.
func ParseResetTemplate(text string) (*ResetTemplate, error) {
	t, err := template.New("reset mail").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("reset mail template: %w", err)
	}
	rt := &ResetTemplate{t: t}
	sample := Data{Username: "alice", Name: "Alice", URL: "https://example.com/reset/YWxpY2U/token", Expires: time.Now()}
	if _, _, err := rt.Render(sample); err != nil {
		return nil, err
	}
	return rt, nil
}

// Render returns the subject and the body of the message for d.
func (rt *ResetTemplate) Render(d Data) (subject, body string, err error) {
	var b bytes.Buffer
	if err := rt.t.Execute(&b, d); err != nil {
		// Not quoted as it is: text/template's error may quote a value
		// (the link); its field path is enough to fix the template.
		return "", "", errors.New("reset mail template: " + firstLine(err.Error()))
	}
	first, rest, _ := strings.Cut(b.String(), "\n")
	subject, ok := strings.CutPrefix(strings.TrimSuffix(first, "\r"), "Subject: ")
	if !ok || strings.TrimSpace(subject) == "" {
		return "", "", errors.New(`reset mail template: the output must start with a "Subject: …" line`)
	}
	if blank, after, ok := strings.Cut(rest, "\n"); ok && strings.TrimSpace(blank) == "" {
		rest = after
	}
	return strings.TrimSpace(subject), rest, nil
}

// firstLine returns s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
