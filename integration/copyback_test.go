package integration

// These tests send the process SIGHUP, which every server run in-process
// takes: they are not parallel, so that no other test's server is running.

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCopyBackAfterUserDel: `user del alice`, then an older users file
// copied back before the server reloads, does not bring alice's token back:
// the deletion's cut-off is kept outside the file, and the reload applies it
// (issue 19, point 7).
func TestCopyBackAfterUserDel(t *testing.T) {
	harness.Long(t)
	for _, cmd := range []string{"del", "disable", "logout"} {
		t.Run(cmd, func(t *testing.T) {
			path := harness.WriteTestUsers(t)
			// No reload but the one this test asks for: the server never sees the file without alice.
			base, log, stop := harness.StartServer(t, nil, "--users", path, "--cost", "4", "--reload-interval", "1h")
			defer stop()
			token := servertest.LoginToken(t, base, "alice", "alice-pw")
			older, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			harness.MustRunCLI(t, "", "user", cmd, "--users", path, "alice")
			if err := os.WriteFile(path, older, 0o600); err != nil {
				t.Fatal(err)
			}
			reloads := strings.Count(log.String(), "users file reloaded")
			syscall.Kill(os.Getpid(), syscall.SIGHUP)
			for deadline := time.Now().Add(10 * time.Second); strings.Count(log.String(), "users file reloaded") == reloads; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no reload within 10 s of SIGHUP; log:\n%s", log)
				}
			}
			if code, body := servertest.GetInfo(t, base, token, ""); code != http.StatusUnauthorized {
				t.Errorf("info with alice's token after `user %s alice` and the older file put back = %d %s; want 401 (dead stays dead)", cmd, code, body)
			}
			if code, _ := servertest.GetInfo(t, base, servertest.LoginToken(t, base, "bob", "bob-pw"), ""); code != http.StatusOK {
				t.Errorf("info with a new token of bob's = %d; want 200", code)
			}
		})
	}
}

// TestCopyBackKeepsDeletionsAndDisables: `user disable alice` and `user
// del bob`, then the users file from before them copied back: neither logs
// in, on the running server after its reload nor on one started on that
// file, and `user check` counts the file's users without bob. `user
// enable alice` and `user add bob` then work, and survive another copy of
// the older file: alice stays enabled, the old bob stays deleted, and the
// file that holds the new bob brings him (issue 28, point 8; API.md,
// Tokens: deletions and disables are kept outside the users file too).
// Before, the copy brought both logins back: only the cut-off was applied.
func TestCopyBackKeepsDeletionsAndDisables(t *testing.T) {
	harness.Long(t)
	path := harness.WriteTestUsers(t)
	base, log, stop := harness.StartServer(t, nil, "--users", path, "--cost", "4", "--reload-interval", "1h")
	defer stop()
	login := func(base, user, pw string) int {
		t.Helper()
		resp, _ := servertest.PostJSON(t, base+"/api/auth/login/", fmt.Sprintf(`{"username":%q,"password":%q}`, user, pw))
		return resp.StatusCode
	}
	want := func(when, base string, logins map[[2]string]int) {
		t.Helper()
		for up, code := range logins {
			if got := login(base, up[0], up[1]); got != code {
				t.Errorf("%s: login of %s with %q = %d; want %d", when, up[0], up[1], got, code)
			}
		}
	}
	older, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	putBack := func(data []byte) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		hupAndWait(t, log)
	}
	want("before", base, map[[2]string]int{{"alice", "alice-pw"}: 200, {"bob", "bob-pw"}: 200})

	harness.MustRunCLI(t, "", "user", "disable", "--users", path, "alice")
	harness.MustRunCLI(t, "", "user", "del", "--users", path, "bob")
	putBack(older)
	gone := map[[2]string]int{{"alice", "alice-pw"}: 401, {"bob", "bob-pw"}: 401}
	want("the older file put back, reloaded", base, gone)
	if out := harness.MustRunCLI(t, "", "user", "check", "--users", path); !strings.Contains(out, ": 2 users, valid") {
		t.Errorf("user check of the older file put back = %q; want 2 users (alice and carol), valid", out)
	}
	other, _, stopOther := harness.StartServer(t, nil, "--users", path, "--cost", "4", "--reload-interval", "1h")
	want("a server started on the older file", other, gone)
	stopOther()

	harness.MustRunCLI(t, "", "user", "enable", "--users", path, "alice")
	harness.AddUser(t, path, "bob", "bob-new-pw")
	hupAndWait(t, log)
	back := map[[2]string]int{{"alice", "alice-pw"}: 200, {"bob", "bob-new-pw"}: 200, {"bob", "bob-pw"}: 401}
	want("`user enable alice` and `user add bob`", base, back)
	newer, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	putBack(older)
	want("the older file put back once more", base, map[[2]string]int{{"alice", "alice-pw"}: 200, {"bob", "bob-new-pw"}: 401, {"bob", "bob-pw"}: 401})
	putBack(newer)
	want("the file with the new bob put back", base, back)
}
