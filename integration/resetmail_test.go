package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// TestResetByEmail is a user's whole journey through a real SMTP server:
// the request, the email arriving, the link from its body (the users file
// untouched by the request, the link kept beside it), the confirm on
// another instance, the old sessions and tokens dead, the login with the
// new password, the second factor still asked; and the same link refused
// again on both instances. A request for no one mails nothing and is
// answered the same.
func TestResetByEmail(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	smtp := testservers.SMTP(t, testservers.SMTPOptions{})
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil { // alice@example.com
		t.Fatal(err)
	}
	args := []string{"--cost", "4", "--users", path, "--reload-interval", "100ms",
		"--smtp-url", "smtp://127.0.0.1:" + smtp.Port + "?starttls=false", "--mail-from", "authsvc <noreply@example.com>",
		"--reset-url", "https://app.example.com/reset/{uid}/{token}"}
	// A serves its metrics on a listener of their own, B on its API's.
	baseA, logA, stopA := harness.StartServer(t, nil, append(args, "--metrics-addr", "127.0.0.1:0")...)
	defer stopA()
	metricsA := "http://" + logA.WaitFor(t, regexp.MustCompile(`msg="metrics listening" addr=(\S+)`))[1] + "/metrics"
	baseB, _, stopB := harness.StartServer(t, nil, args...)
	defer stopB()

	// alice has an authenticator, a session and a personal access token.
	session := harness.TokenOf(t, "alice on A", harness.Login(t, baseA, "alice"))
	status, body := harness.MFACall(t, "POST", baseA+"/api/auth/mfa/totp/", session, `{"password":"alice-pw"}`)
	if status != 200 {
		t.Fatalf("enrol = %d %v", status, body)
	}
	secret32 := body["secret"].(string)
	if status, body = harness.MFACall(t, "POST", baseA+"/api/auth/mfa/totp/confirm/", session, `{"code":"`+harness.TOTPCode(t, secret32, time.Now())+`"}`); status != 200 {
		t.Fatalf("confirm = %d %v", status, body)
	}
	time.Sleep(31 * time.Second / 30) // no code reuse below: the next one is checked against a later counter
	status, body = harness.MFACall(t, "POST", baseA+"/api/auth/tokens/", session, `{"name":"ci","password":"alice-pw","code":"`+harness.TOTPCode(t, secret32, time.Now().Add(30*time.Second))+`"}`)
	pat, _ := body["token"].(string)
	if status != 201 {
		t.Fatalf("mint = %d %v", status, body)
	}

	// The requests: alice's address (any case), and an address of no one.
	// Neither rewrites the users file (issue 37): the link is kept beside
	// it, in USERS.resets, and B confirms it all the same.
	before, beforeStat := readStat(t, path)
	for _, email := range []string{"ALICE@example.com", "nobody@example.com"} {
		if r := harness.Do(t, "POST", baseA+"/api/auth/password/reset/", "", `{"email":"`+email+`"}`); r.Status != 204 {
			t.Fatalf("reset request for %s = %s; want 204", email, r)
		}
	}
	var msgs []testservers.SMTPMessage
	for deadline := time.Now().Add(10 * time.Second); len(msgs) == 0 && time.Now().Before(deadline); msgs = smtp.Messages(t) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a mail to no one would have come by now
	if msgs = smtp.Messages(t); len(msgs) != 1 || len(msgs[0].RcptTos) != 1 || msgs[0].RcptTos[0] != "alice@example.com" {
		t.Fatalf("mails = %+v; want one, to alice@example.com", msgs)
	}
	if after, afterStat := readStat(t, path); !bytes.Equal(after, before) || !afterStat.ModTime().Equal(beforeStat.ModTime()) {
		t.Errorf("the users file after the reset requests: %d bytes, mtime %v; want the %d bytes and mtime %v of before: a reset request must not rewrite it",
			len(after), afterStat.ModTime(), len(before), beforeStat.ModTime())
	}
	if _, err := os.Stat(usersfile.ResetsPath(path)); err != nil {
		t.Errorf("the resets file beside the users file: %v; want it holding the link", err)
	}
	link := regexp.MustCompile(`https://app\.example\.com/reset/([A-Za-z0-9_-]+)/([A-Za-z0-9_-]{43})`).FindStringSubmatch(msgs[0].Body)
	if link == nil {
		t.Fatalf("the mail's body has no link:\n%s", msgs[0].Body)
	}
	confirm := `{"uid":"` + link[1] + `","token":"` + link[2] + `","new_password":"a brand new passphrase"}`

	// Confirmed on B, the instance that did not send it.
	if r := harness.Do(t, "POST", baseB+"/api/auth/password/reset/confirm/", "", confirm); r.Status != 204 {
		t.Fatalf("confirm on B = %s; want 204", r)
	}
	for _, base := range []string{baseA, baseB} {
		harness.WantInvalidTokenWithin(t, "alice's session after the reset", base, session)
		harness.WantInvalidTokenWithin(t, "alice's token after the reset", base, pat)
		if r := harness.Do(t, "POST", base+"/api/auth/password/reset/confirm/", "", confirm); r.Status != 400 || r.Code() != "invalid_token" {
			t.Errorf("the link again on %s = %s; want 400 invalid_token", base, r)
		}
	}
	if r := harness.Do(t, "POST", baseA+"/api/auth/login/", "", `{"username":"alice","password":"a brand new passphrase"}`); r.Status != 401 || r.Code() != "mfa_required" {
		t.Errorf("login with the new password = %s; want 401 mfa_required: the second factor stays", r)
	}
	if text := logA.String(); strings.Contains(text, link[2]) || strings.Contains(text, "alice@example.com") || strings.Contains(text, "nobody@") {
		t.Errorf("A's log holds the link or an address:\n%s", text)
	}
	if !strings.Contains(logA.String(), `msg="password reset request" outcome=accepted`) {
		t.Errorf("A's log lacks the requests' audit lines")
	}
	if r := harness.Do(t, "GET", metricsA, "", ""); !strings.Contains(r.Body, `authsvc_reset_mail_total{outcome="sent"} 1`) {
		t.Errorf("A's /metrics on --metrics-addr lacks authsvc_reset_mail_total{outcome=\"sent\"} 1")
	}
	// It tells who exists: never on the API listener (API.md, Operations).
	if r := harness.Do(t, "GET", baseB+"/metrics", "", ""); r.Status != 200 || strings.Contains(r.Body, "authsvc_reset_mail_total") {
		t.Errorf("B's /metrics on --addr = %d, with authsvc_reset_mail_total %v; want 200 without it", r.Status, strings.Contains(r.Body, "authsvc_reset_mail_total"))
	}
	if !strings.Contains(logA.String(), `msg="password reset mail sent" username=alice`) {
		t.Errorf("A's log lacks the mail's audit line")
	}
}

// TestResetRequestWithoutMail: without --smtp-url, asking for a link by
// email is 404, as API.md has it; the confirm is served all the same.
func TestResetRequestWithoutMail(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	path := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	base, _, stop := harness.StartServer(t, nil, "--cost", "4", "--users", path)
	defer stop()
	if r := harness.Do(t, "POST", base+"/api/auth/password/reset/", "", `{"email":"alice@example.com"}`); r.Status != 404 || r.Code() != "not_found" {
		t.Errorf("reset request without mail = %s; want 404 not_found", r)
	}
	link := strings.TrimSpace(harness.MustRunCLI(t, "", "user", "reset-link", "--users", path, "alice"))
	uid, token, _ := strings.Cut(link, "/")
	if r := harness.Do(t, "POST", base+"/api/auth/password/reset/confirm/", "", `{"uid":"`+uid+`","token":"`+token+`","new_password":"a brand new passphrase"}`); r.Status != 204 {
		t.Errorf("confirm of an operator's link = %s; want 204", r)
	}
}

// readStat returns the bytes and the file info of the file at path.
func readStat(t *testing.T, path string) ([]byte, os.FileInfo) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, fi
}
