package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"authsvc/internal/testservers"
	"authsvc/internal/users/usersfile"
)

// patNoticeBound is what this test allows for a revocation to reach the
// other instance: API.md's bound is 100 ms (make bench's revocation row
// holds the fleet to it), but a go test run is on a loaded machine with
// the race detector, where 1 s has been exceeded; it prints what it
// measured. Any bound far below the instances' hour between reloads
// tells the notice apart from a reload.
const patNoticeBound = 5 * time.Second

// TestPATRevokeNotice: two instances on one users file and one Redis,
// neither reloading the file on its own (--reload-interval 1h), B with its
// token cache off (--store-cache 0). A personal access token minted on A
// works on B; revoked on A, it is refused by A at once and by B within
// patNoticeBound, which only A's notice through the token store can
// explain (API.md, "Personal access tokens": within Operations' 100 ms
// bound where the instances share a token store).
func TestPATRevokeNotice(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	args := []string{"--cost", "4", "--users", usersPath, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--reload-interval", "1h"}
	baseA, logA, stopA := harness.StartServer(t, nil, args...)
	baseB, logB, stopB := harness.StartServer(t, nil, append(args, "--store-cache", "0")...)
	defer func() {
		stopA()
		stopB()
		if t.Failed() {
			t.Logf("server A log:\n%s", logA)
			t.Logf("server B log:\n%s", logB)
		}
	}()

	session := harness.TokenOf(t, "alice on A", harness.Login(t, baseA, "alice"))
	r := harness.Do(t, "POST", baseA+"/api/auth/tokens/", session, `{"name":"ci","scopes":["info"],"password":"alice-pw"}`)
	var minted struct{ ID, Token string }
	if err := json.Unmarshal([]byte(r.Body), &minted); r.Status != 201 || err != nil || minted.Token == "" {
		t.Fatalf("POST /api/auth/tokens/ on A = %v; want 201 with a token", r)
	}
	harness.WantInfo(t, "A's personal access token on B", baseB, minted.Token, harness.AliceInfo)
	harness.WantInfo(t, "A's personal access token on A", baseA, minted.Token, harness.AliceInfo)

	if r := harness.Do(t, "DELETE", baseA+"/api/auth/tokens/"+minted.ID, session, ""); r.Status != 204 {
		t.Fatalf("DELETE /api/auth/tokens/{id} on A = %v; want 204", r)
	}
	revoked := time.Now()
	harness.WantInvalidToken(t, "the revoked token on A", baseA, minted.Token)
	wantRefusedWithin(t, "the revoked token", baseB, minted.Token, revoked)
}

// wantRefusedWithin polls info on base with token, live until then,
// until it is 401, and fails t unless that happens within patNoticeBound
// of since; it logs how long it took.
func wantRefusedWithin(t *testing.T, what, base, token string, since time.Time) {
	t.Helper()
	for {
		r := harness.Do(t, "GET", base+"/api/auth/info", token, "")
		took := time.Since(since)
		if r.Status == 401 {
			t.Logf("%s refused %v after the change", what, took.Round(time.Millisecond))
			if took > patNoticeBound {
				t.Errorf("%s refused after %v; want within %v", what, took, patNoticeBound)
			}
			return
		}
		if r.Status != 200 {
			t.Fatalf("info with %s = %v; want 200 then 401", what, r)
		}
		if took > 5*patNoticeBound {
			t.Fatalf("info with %s %v after the change = %v; want 401 within %v", what, took, r, patNoticeBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestResetNotice: a reset confirmed on B ends the user's session and
// personal access token on A, which shares B's Redis but does not reload
// the users file (--reload-interval 1h), within patNoticeBound: only B's
// Supersede (the session) and its user notice (the personal access token)
// through the store can explain it.
func TestResetNotice(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	usersPath, baseA, baseB := noticeFleet(t)
	session := harness.TokenOf(t, "alice on A", harness.Login(t, baseA, "alice"))
	r := harness.Do(t, "POST", baseA+"/api/auth/tokens/", session, `{"name":"ci","password":"alice-pw"}`)
	var minted struct{ Token string }
	if err := json.Unmarshal([]byte(r.Body), &minted); r.Status != 201 || err != nil {
		t.Fatalf("POST /api/auth/tokens/ on A = %v; want 201", r)
	}
	harness.WantInfo(t, "alice's session on A", baseA, session, harness.AliceInfo)
	harness.WantInfo(t, "alice's token on A", baseA, minted.Token, harness.AliceInfo)
	uid, token, _ := strings.Cut(strings.TrimSpace(harness.MustRunCLI(t, "", "user", "reset-link", "--users", usersPath, "alice")), "/")
	if r := harness.Do(t, "POST", baseB+"/api/auth/password/reset/confirm/", "", `{"uid":"`+uid+`","token":"`+token+`","new_password":"a brand new passphrase"}`); r.Status != 204 {
		t.Fatalf("confirm on B = %v; want 204", r)
	}
	confirmed := time.Now()
	wantRefusedWithin(t, "alice's session on A", baseA, session, confirmed)
	wantRefusedWithin(t, "alice's personal access token on A", baseA, minted.Token, confirmed)
}

// TestAdminChangeNotice: what an admin does over the API on B reaches A,
// which shares B's Redis but does not reload the users file
// (--reload-interval 1h), within patNoticeBound, as a reset does: a
// logout ends the user's sessions there and leaves their personal access
// token; a password set ends both; a disable ends the new ones too.
func TestAdminChangeNotice(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	_, baseA, baseB := noticeFleet(t)
	admin := harness.TokenOf(t, "bob on B", harness.Login(t, baseB, "bob"))
	act := func(method, path, body string) time.Time {
		t.Helper()
		r := harness.Do(t, method, baseB+"/api/admin/users/alice"+path, admin, body)
		if r.Status != 204 && r.Status != 200 {
			t.Fatalf("%s /api/admin/users/alice%s on B = %v; want 204 or 200", method, path, r)
		}
		return time.Now()
	}
	mint := func(name, session, password string) string {
		t.Helper()
		r := harness.Do(t, "POST", baseA+"/api/auth/tokens/", session, `{"name":"`+name+`","password":"`+password+`"}`)
		var minted struct{ Token string }
		if err := json.Unmarshal([]byte(r.Body), &minted); r.Status != 201 || err != nil {
			t.Fatalf("POST /api/auth/tokens/ on A = %v; want 201", r)
		}
		return minted.Token
	}

	session := harness.TokenOf(t, "alice on A", harness.Login(t, baseA, "alice"))
	pat := mint("ci", session, "alice-pw")
	wantRefusedWithin(t, "alice's session on A, after the admin's logout on B", baseA, session, act("POST", "/logout", ""))
	harness.WantInfo(t, "alice's personal access token on A, after the logout", baseA, pat, harness.AliceInfo)

	session = harness.TokenOf(t, "alice on A", harness.Login(t, baseA, "alice"))
	changed := act("POST", "/password", `{"new_password":"a brand new passphrase"}`)
	wantRefusedWithin(t, "alice's session on A, after the admin's password on B", baseA, session, changed)
	wantRefusedWithin(t, "alice's personal access token on A, after the admin's password on B", baseA, pat, changed)

	session = harness.WaitLogin(t, baseA, "alice", "a brand new passphrase")
	pat = mint("ci-2", session, "a brand new passphrase")
	disabled := act("PATCH", "", `{"disabled":true}`)
	wantRefusedWithin(t, "alice's session on A, after the admin's disable on B", baseA, session, disabled)
	wantRefusedWithin(t, "alice's personal access token on A, after the admin's disable on B", baseA, pat, disabled)
}

// noticeFleet starts two instances, A and B, on one users file of the
// test users and one Redis, neither reloading the file on its own
// (--reload-interval 1h): what reaches A from B can only have come
// through the store. They stop with the test.
func noticeFleet(t *testing.T) (usersPath, baseA, baseB string) {
	t.Helper()
	redisURL, _, _ := testservers.Redis(t)
	usersPath = filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	args := []string{"--cost", "4", "--users", usersPath, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--reload-interval", "1h"}
	baseA, _, stopA := harness.StartServer(t, nil, args...)
	t.Cleanup(func() { stopA() })
	baseB, _, stopB := harness.StartServer(t, nil, args...)
	t.Cleanup(func() { stopB() })
	return usersPath, baseA, baseB
}
