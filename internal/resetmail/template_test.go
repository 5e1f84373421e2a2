package resetmail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultResetTemplate(t *testing.T) {
	rt, err := LoadResetTemplate("")
	if err != nil {
		t.Fatal(err)
	}
	paris := time.FixedZone("CEST", 2*3600)
	d := Data{Username: "zoe", Name: "Zoë", URL: "https://auth.example.com/reset/em9l/tok", Expires: time.Date(2026, 5, 4, 14, 30, 0, 0, paris)}
	subject, body, err := rt.Render(d)
	if err != nil {
		t.Fatal(err)
	}
	if subject != "Reset your password" {
		t.Errorf("Render subject = %q; want %q", subject, "Reset your password")
	}
	for _, want := range []string{"Hello Zoë,\n", "\nhttps://auth.example.com/reset/em9l/tok\n", "Mon, 04 May 2026 12:30:00 UTC", `"zoe"`} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	if strings.HasPrefix(body, "\n") || strings.Contains(body, "Subject:") {
		t.Errorf("body = %q; want it to start after the Subject line and the blank one", body)
	}
	d.Name = ""
	if _, body, _ := rt.Render(d); !strings.HasPrefix(body, "Hello zoe,\n") {
		t.Errorf("body without a name starts %q; want %q", firstLine(body), "Hello zoe,")
	}
}

func TestResetTemplateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reset.tmpl")
	text := "Subject: Mot de passe de {{.Username}}\r\n\r\nLien : {{.URL}}\nExpire : {{.Expires.UTC.Format \"2006-01-02 15:04\"}}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	rt, err := LoadResetTemplate(path)
	if err != nil {
		t.Fatal(err)
	}
	subject, body, err := rt.Render(Data{Username: "zoe", URL: "https://x/r", Expires: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)})
	if err != nil || subject != "Mot de passe de zoe" || body != "Lien : https://x/r\nExpire : 2026-01-02 03:04\n" {
		t.Errorf("Render = %q, %q, %v; want the subject line apart and the rest as the body", subject, body, err)
	}
}

func TestResetTemplateRefused(t *testing.T) {
	for name, text := range map[string]string{
		"no subject line":   "Hello {{.Username}}\n{{.URL}}\n",
		"empty subject":     "Subject: \n\n{{.URL}}\n",
		"unknown field":     "Subject: x\n\n{{.Token}}\n",
		"syntax error":      "Subject: x\n\n{{.URL\n",
		"subject not first": "\nSubject: x\n\n{{.URL}}\n",
	} {
		if _, err := ParseResetTemplate(text); err == nil {
			t.Errorf("ParseResetTemplate(%s) = nil error; want one", name)
		}
	}
	if _, err := LoadResetTemplate(filepath.Join(t.TempDir(), "missing.tmpl")); err == nil {
		t.Error("LoadResetTemplate(a missing file) = nil error; want one")
	}
}
