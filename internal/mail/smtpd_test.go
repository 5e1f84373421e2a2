package mail

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
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
	"sync"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// debianPython is Debian's interpreter, where python3-aiosmtpd installs;
// a python3 found on PATH may be another one without it.
const debianPython = "/usr/bin/python3"

// needAiosmtpd skips t without Debian's aiosmtpd, or fails it when
// AUTHSVC_REQUIRE_SMTP=1 (.ci/run, which installs it).
func needAiosmtpd(t *testing.T) {
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

// A testCert is a throwaway self-signed certificate for 127.0.0.1, its
// PEM files, and a pool that trusts it.
type testCert struct {
	certFile, keyFile string
	pool              *x509.CertPool
}

// newTestCert makes a testCert in t's temporary directory.
func newTestCert(t *testing.T) testCert {
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
	c := testCert{certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem"), pool: x509.NewCertPool()}
	c.pool.AddCert(cert)
	writePEM(t, c.certFile, "CERTIFICATE", der)
	writePEM(t, c.keyFile, "PRIVATE KEY", keyDER)
	return c
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// smtpdOptions shape a test SMTP server.
type smtpdOptions struct {
	port           string    // a free one when empty
	cert           *testCert // STARTTLS required (or smtps) with it
	smtps          bool
	user, password string // AUTH required when user is set
}

// An smtpd is a running testdata/smtpd.py.
type smtpd struct {
	port string
	dir  string // where it saves what it receives
}

// startSMTPD starts testdata/smtpd.py (aiosmtpd) on 127.0.0.1, stopped
// when t ends.
func startSMTPD(t *testing.T, o smtpdOptions) *smtpd {
	t.Helper()
	needAiosmtpd(t)
	if o.port == "" {
		o.port = testservers.FreePort(t)
	}
	s := &smtpd{port: o.port, dir: t.TempDir()}
	args := []string{"testdata/smtpd.py", "--port", o.port, "--dir", s.dir}
	if o.cert != nil {
		args = append(args, "--tls-cert", o.cert.certFile, "--tls-key", o.cert.keyFile)
	}
	if o.smtps {
		args = append(args, "--smtps")
	}
	if o.user != "" {
		args = append(args, "--user", o.user)
	}
	cmd := exec.Command(debianPython, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1", "AUTHSVC_TEST_SMTP_PASSWORD="+o.password)
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

// A received message, as the server saved it.
type received struct {
	MailFrom string   `json:"mail_from"`
	RcptTos  []string `json:"rcpt_tos"`
	Login    *string  `json:"login"`
	TLS      bool     `json:"tls"`
	msg      *netmail.Message
	body     string // decoded, "\n" line ends
}

// messages returns what s has received, in order.
func (s *smtpd) messages(t *testing.T) []received {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s.dir, "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []received
	for _, f := range files {
		var r received
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
		if r.msg, err = netmail.ReadMessage(bytes.NewReader(raw)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		body, err := io.ReadAll(quotedprintable.NewReader(r.msg.Body))
		if err != nil {
			t.Fatalf("%s: quoted-printable body: %v", f, err)
		}
		r.body = strings.ReplaceAll(string(body), "\r\n", "\n")
		out = append(out, r)
	}
	return out
}

// subject returns r's Subject header decoded.
func (r received) subject(t *testing.T) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(r.msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A logBuffer collects a slog text handler's lines, safe for the queue's
// workers to write while the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor waits up to 10 s for the log to hold s.
func (l *logBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(l.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within 10s; log:\n%s", s, l.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// trusting returns cfg trusting c.
func trusting(cfg Config, c testCert) Config {
	cfg.TLS = &tls.Config{RootCAs: c.pool}
	return cfg
}
