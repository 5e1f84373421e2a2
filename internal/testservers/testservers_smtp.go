package testservers

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	_ "embed"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"mime"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smtpdScript is smtpd.py: a real SMTP server (Debian's aiosmtpd) that
// saves what it receives, for the tests that send mail.
//
//go:embed smtpd.py
var smtpdScript []byte

// debianPython is Debian's interpreter, where python3-aiosmtpd installs;
// a python3 found on PATH may be another one without it.
const debianPython = "/usr/bin/python3"

// NeedAiosmtpd skips t without Debian's aiosmtpd, or fails it when
// AUTHSVC_REQUIRE_SMTP=1 (.ci/run, which installs it).
func NeedAiosmtpd(t *testing.T) {
	t.Helper()
	out, err := exec.Command(debianPython, "-c", "import aiosmtpd").CombinedOutput()
	if err == nil {
		return
	}
	if os.Getenv("AUTHSVC_REQUIRE_SMTP") == "1" {
		t.Fatalf("%s lacks aiosmtpd (apt-get install python3-aiosmtpd) and AUTHSVC_REQUIRE_SMTP=1: %v\n%s", debianPython, err, out)
	}
	t.Skipf("%s lacks aiosmtpd (apt-get install python3-aiosmtpd; AUTHSVC_REQUIRE_SMTP=1 fails instead): %v", debianPython, err)
}

// A TestCert is a throwaway self-signed certificate for 127.0.0.1, its
// PEM files, and a Pool that trusts it.
type TestCert struct {
	CertFile, KeyFile string
	Pool              *x509.CertPool
}

// NewTestCert makes a TestCert in t's temporary directory.
func NewTestCert(t *testing.T) TestCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "authsvc mail test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := TestCert{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), Pool: x509.NewCertPool()}
	c.Pool.AddCert(cert)
	writePEM(t, c.CertFile, "CERTIFICATE", der)
	writePEM(t, c.KeyFile, "PRIVATE KEY", keyDER)
	return c
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// SMTPOptions shape a test SMTP server.
type SMTPOptions struct {
	Port           string    // a free one when empty
	Cert           *TestCert // STARTTLS required (or smtps) with it
	SMTPS          bool
	User, Password string // AUTH required when User is set
}

// An smtpd is a running testdata/smtpd.py.
type SMTPServer struct {
	Port string
	Dir  string // where it saves what it receives
}

// SMTP starts testdata/smtpd.py (aiosmtpd) on 127.0.0.1, stopped
// when t ends.
func SMTP(t *testing.T, o SMTPOptions) *SMTPServer {
	t.Helper()
	NeedAiosmtpd(t)
	if o.Port == "" {
		o.Port = FreePort(t)
	}
	s := &SMTPServer{Port: o.Port, Dir: t.TempDir()}
	script := filepath.Join(t.TempDir(), "smtpd.py")
	if err := os.WriteFile(script, smtpdScript, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{script, "--port", o.Port, "--dir", s.Dir}
	if o.Cert != nil {
		args = append(args, "--tls-cert", o.Cert.CertFile, "--tls-key", o.Cert.KeyFile)
	}
	if o.SMTPS {
		args = append(args, "--smtps")
	}
	if o.User != "" {
		args = append(args, "--user", o.User)
	}
	cmd := exec.Command(debianPython, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1", "AUTHSVC_TEST_SMTP_PASSWORD="+o.Password)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", debianPython, err)
	}
	t.Cleanup(func() {
		stdin.Close() // smtpd.py stops when its stdin closes
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("smtpd.py did not start: %q\n%s", line, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("smtpd.py not ready within 15s\n%s", stderr.String())
	}
	return s
}

// A SMTPMessage message, as the server saved it.
type SMTPMessage struct {
	MailFrom string   `json:"mail_from"`
	RcptTos  []string `json:"rcpt_tos"`
	Login    *string  `json:"login"`
	TLS      bool     `json:"tls"`
	Msg      *netmail.Message
	Body     string // decoded, "\n" line ends
}

// messages returns what s has SMTPMessage, in order.
func (s *SMTPServer) Messages(t *testing.T) []SMTPMessage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s.Dir, "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []SMTPMessage
	for _, f := range files {
		var r SMTPMessage
		meta, err := os.ReadFile(strings.TrimSuffix(f, ".eml") + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(meta, &r); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if r.Msg, err = netmail.ReadMessage(bytes.NewReader(raw)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		body, err := io.ReadAll(quotedprintable.NewReader(r.Msg.Body))
		if err != nil {
			t.Fatalf("%s: quoted-printable body: %v", f, err)
		}
		r.Body = strings.ReplaceAll(string(body), "\r\n", "\n")
		out = append(out, r)
	}
	return out
}

// Subject returns r's Subject header decoded.
func (r SMTPMessage) Subject(t *testing.T) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(r.Msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
