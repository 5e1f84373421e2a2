package integration

import (
	"authsvc/integration/harness"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
)

// TestPATFleet: personal access tokens across two instances that share a
// directory, as a fleet runs them (API.md, "Personal access tokens"): a
// token minted on A works on B at once; B introspects it and A's
// sessions; it survives a SIGHUP and a restart of both; revoked on A it is
// refused by A at once and by B within 5 s (within 100 ms where they share
// a Redis token store); a user with a second factor mints one only with a
// code.
func TestPATFleet(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	harness.RequireBinary(t)
	for _, tc := range []struct {
		name string
		// directory returns the --users value and the store's flags.
		directory func(t *testing.T, dir string) (string, []string)
		file      bool // a users file: SIGHUP reloads it, and logs that
		shared    bool // the instances share a token store (else each has its memory store)
	}{
		{"users file", func(_ *testing.T, dir string) (string, []string) { return filepath.Join(dir, "users.json"), nil }, true, false},
		{"postgres+redis", func(t *testing.T, _ string) (string, []string) {
			pgURL := testservers.SharedPostgres(t)
			redisURL, _, _ := testservers.Redis(t)
			return testservers.NewDatabase(t, pgURL), []string{"--store", redisURL, "--store-prefix", testservers.UniquePrefix()}
		}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			usersArg, store := tc.directory(t, dir)
			harness.WriteKeyFile(t, filepath.Join(dir, "fleet.key"))
			for _, name := range []string{"alice", "bob"} {
				harness.AddUser(t, usersArg, name, name+"-pat-fleet-passphrase")
			}
			args := append([]string{"--users", usersArg, "--secret-key-file", filepath.Join(dir, "fleet.key"), "--cost", "4"}, store...)
			a, b := startPATServer(t, "A", args), startPATServer(t, "B", args)
			testPATFleet(t, a, b, tc.file, tc.shared)
		})
	}
}

func testPATFleet(t *testing.T, a, b *patServer, file, shared bool) {
	alicePW := "alice-pat-fleet-passphrase"
	sessA := harness.TokenOf(t, "alice on A", harness.Do(t, "POST", a.base()+"/api/auth/login/", "", fmt.Sprintf(`{"username":"alice","password":%q}`, alicePW)))

	// Minted on A, it works on B at once, and B introspects it and A's session.
	ci := mintPAT(t, a, sessA, `{"name":"ci","scopes":["info","introspect"],"password":"`+alicePW+`"}`)
	harness.WantInfo(t, "B, at once, with the token minted on A", b.base(), ci.Token, aliceInfo)
	wantIntrospect(t, "B about the token minted on A", b, ci.Token, ci.Token, `"active":true,"token_type":"pat","username":"alice"`)
	if shared {
		wantIntrospect(t, "B about A's session, in the store they share", b, ci.Token, sessA, `"active":true,"token_type":"session","username":"alice"`)
	} else {
		wantIntrospect(t, "B about A's session, in A's memory store", b, ci.Token, sessA, `{"active":false}`)
	}
	deploy := mintPAT(t, b, harness.WaitLogin(t, b.base(), "alice", alicePW), `{"name":"deploy","password":"`+alicePW+`"}`)
	wantIntrospect(t, "B about the token minted on B", b, ci.Token, deploy.Token, `"active":true,"token_type":"pat","username":"alice","sub":"alice"`)

	// A SIGHUP, then a restart of both: they live in the directory.
	for _, s := range []*patServer{a, b} {
		s.hup(t, file)
		harness.WantInfo(t, s.name+", after a SIGHUP, with the token minted on A", s.base(), ci.Token, aliceInfo)
	}
	for _, s := range []*patServer{a, b} {
		s.restart(t)
	}
	for _, s := range []*patServer{a, b} {
		harness.WantInfo(t, s.name+", restarted, with the token minted on A", s.base(), ci.Token, aliceInfo)
		harness.WantInfo(t, s.name+", restarted, with the token minted on B", s.base(), deploy.Token, aliceInfo)
	}

	// Revoked on A: refused by A at once, by B within 5 s, for info and
	// for introspection alike; the other token lives on.
	sessA = harness.WaitLogin(t, a.base(), "alice", alicePW)
	watcher := mintPAT(t, a, sessA, `{"name":"watcher","scopes":["introspect"],"password":"`+alicePW+`"}`)
	if r := harness.Do(t, "DELETE", a.base()+"/api/auth/tokens/"+ci.ID, sessA, ""); r.Status != 204 {
		t.Fatalf("DELETE /api/auth/tokens/%s on A = %v; want 204", ci.ID, r)
	}
	revoked := time.Now()
	harness.WantInvalidToken(t, "A, at once, with the token it revoked", a.base(), ci.Token)
	wantIntrospect(t, "A, at once, about the token it revoked", a, watcher.Token, ci.Token, `{"active":false}`)
	bound := directoryBound
	if shared {
		bound = storeBound // a notice through the store
	}
	for {
		r := harness.Do(t, "GET", b.base()+"/api/auth/info", ci.Token, "")
		if r.Status == 401 && r.Code() == "invalid_token" {
			break
		}
		if time.Since(revoked) > bound+grace {
			t.Fatalf("B with the token revoked on A: info = %v %v after the revocation; want 401 invalid_token within %v", r, time.Since(revoked).Round(time.Millisecond), bound)
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("B refused the token revoked on A %v after the revocation (bound: %v)", time.Since(revoked).Round(time.Millisecond), bound)
	wantIntrospect(t, "B about the token revoked on A", b, watcher.Token, ci.Token, `{"active":false}`)
	harness.WantInfo(t, "B with the token not revoked", b.base(), deploy.Token, aliceInfo)

	// bob enrols a second factor on A: a token needs a code from then on.
	bobPW := "bob-pat-fleet-passphrase"
	sessBob := harness.WaitLogin(t, a.base(), "bob", bobPW)
	st, enrol := harness.MFACall(t, "POST", a.base()+"/api/auth/mfa/totp/", sessBob, `{"password":"`+bobPW+`"}`)
	secret, _ := enrol["secret"].(string)
	if st != 200 || secret == "" {
		t.Fatalf("POST /api/auth/mfa/totp/ on A = %d %v; want 200 with a secret", st, enrol)
	}
	st, confirm := harness.MFACall(t, "POST", a.base()+"/api/auth/mfa/totp/confirm/", sessBob, `{"code":"`+harness.TOTPCode(t, secret, time.Now())+`"}`)
	codes, _ := confirm["recovery_codes"].([]any)
	if st != 200 || len(codes) == 0 {
		t.Fatalf("POST /api/auth/mfa/totp/confirm/ on A = %d %v; want 200 with recovery codes", st, confirm)
	}
	mint := `{"name":"bob-ci","password":"` + bobPW + `"%s}`
	if r := harness.Do(t, "POST", a.base()+"/api/auth/tokens/", sessBob, fmt.Sprintf(mint, "")); r.Status != 401 || r.Code() != "mfa_required" || strings.Contains(r.Body, "mfa_token") {
		t.Errorf("POST /api/auth/tokens/ on A for bob, with a second factor, without a code = %v; want 401 mfa_required without an mfa_token", r)
	}
	if r := harness.Do(t, "POST", a.base()+"/api/auth/tokens/", sessBob, fmt.Sprintf(mint, `,"code":"000000"`)); r.Status != 401 || r.Code() != "invalid_credentials" {
		t.Errorf("POST /api/auth/tokens/ on A for bob with a wrong code = %v; want 401 invalid_credentials", r)
	}
	// B asks for the code once it has seen the factor (within 5 s); bob
	// logs in there with a recovery code, and mints with another.
	deadline := time.Now().Add(directoryBound)
	var mfaToken string
	for {
		r := harness.Do(t, "POST", b.base()+"/api/auth/login/", "", `{"username":"bob","password":"`+bobPW+`"}`)
		var reply struct {
			MFAToken string `json:"mfa_token"`
		}
		if r.Status == 401 && r.Code() == "mfa_required" && json.Unmarshal([]byte(r.Body), &reply) == nil {
			mfaToken = reply.MFAToken
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("login of bob on B, 5 s after his second factor on A = %v; want 401 mfa_required", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sessBobB := harness.TokenOf(t, "bob's second step on B", harness.Do(t, "POST", b.base()+"/api/auth/login/mfa/", "", `{"mfa_token":"`+mfaToken+`","code":"`+codes[0].(string)+`"}`))
	if r := harness.Do(t, "POST", b.base()+"/api/auth/tokens/", sessBobB, fmt.Sprintf(mint, "")); r.Status != 401 || r.Code() != "mfa_required" {
		t.Errorf("POST /api/auth/tokens/ on B for bob without a code = %v; want 401 mfa_required", r)
	}
	bobCI := mintPAT(t, b, sessBobB, fmt.Sprintf(mint, `,"code":"`+codes[1].(string)+`"`))
	harness.WantInfo(t, "A with bob's token minted on B with a recovery code", a.base(), bobCI.Token, bobInfo)
}

// aliceInfo and bobInfo are the users' info replies as `user add` makes them.
const (
	aliceInfo = `{"username":"alice","name":"","email":"","groups":[],"admin":false}`
	bobInfo   = `{"username":"bob","name":"","email":"","groups":[],"admin":false}`
)

// A patToken is a create reply's token and id.
type patToken struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// mintPAT mints a personal access token on s with session and body, and
// fails t unless it gets 201.
func mintPAT(t *testing.T, s *patServer, session, body string) patToken {
	t.Helper()
	r := harness.Do(t, "POST", s.base()+"/api/auth/tokens/", session, body)
	var p patToken
	if r.Status != 201 || json.Unmarshal([]byte(r.Body), &p) != nil || !validPAT(p.Token) || p.ID == "" {
		t.Fatalf("POST /api/auth/tokens/ on %s = %v; want 201 with a token and its id", s.name, r)
	}
	return p
}

// wantIntrospect introspects token on s with caller's token, form-encoded,
// and wants a 200 whose body contains want.
func wantIntrospect(t *testing.T, what string, s *patServer, caller, token, want string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.base()+"/api/auth/introspect/", strings.NewReader("token="+url.QueryEscape(token)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+caller)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
		t.Errorf("%s: POST /api/auth/introspect/ = %d %s; want 200 with %s", what, resp.StatusCode, body, want)
	}
}

// A patServer is one instance of the binary that the test can signal and
// restart.
type patServer struct {
	name string
	args []string
	proc *harness.ServerProcess
	log  *servertest.LineLog
}

func startPATServer(t *testing.T, name string, args []string) *patServer {
	s := &patServer{name: name, args: args}
	s.start(t)
	return s
}

func (s *patServer) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(harness.Binary(), append([]string{"serve", "--addr", "127.0.0.1:0"}, s.args...)...)
	s.log = servertest.NewLineLog()
	cmd.Stderr = s.log
	s.proc = harness.StartServerProcess(t, cmd, s.log.String)
}

func (s *patServer) base() string { return s.proc.Base }

// restart kills the instance (SIGKILL: nothing is written on the way out)
// and starts it again.
func (s *patServer) restart(t *testing.T) {
	t.Helper()
	s.proc.Kill()
	s.start(t)
}

// hup sends SIGHUP and, with a users file, waits for the reload it logs.
func (s *patServer) hup(t *testing.T, file bool) {
	t.Helper()
	before := strings.Count(s.log.String(), "reason=SIGHUP")
	s.proc.Cmd.Process.Signal(syscall.SIGHUP)
	if !file {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(s.log.String(), "reason=SIGHUP") == before {
		if time.Now().After(deadline) {
			t.Fatalf("%s logged no reload within 5 s of a SIGHUP:\n%s", s.name, harness.Tail(s.log.String(), 20))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
