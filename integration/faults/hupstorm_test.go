package faults

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"encoding/json"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSIGHUPStorm: a hundred SIGHUPs a second while logins and token
// checks go on give no error reply: every reload swaps the users whole,
// and no request sees a half-loaded directory (issue 19, point 11, one of
// the fault cases).
func TestSIGHUPStorm(t *testing.T) {
	harness.Long(t)
	// The storm's last SIGHUPs may arrive after the server has stopped
	// listening for them, which would kill the test binary (SIGHUP's
	// default): a listener of the test's own, never stopped, drops them.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	path := harness.WriteTestUsers(t)
	base, log, stop := harness.StartServer(t, nil, "--users", path, "--cost", "4", "--login-rate", "1000", "--login-burst", "1000")
	defer stop()
	token := servertest.LoginToken(t, base, "alice", "alice-pw")

	done := make(chan struct{})
	var hups atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				syscall.Kill(os.Getpid(), syscall.SIGHUP)
				hups.Add(1)
			}
		}
	})
	var (
		mu       sync.Mutex // guards statuses
		statuses = map[string]map[int]int{"info": {}, "login": {}}
	)
	count := func(kind string, code int) {
		mu.Lock()
		statuses[kind][code]++
		mu.Unlock()
	}
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				code, _ := servertest.GetInfo(t, base, token, "")
				count("info", code)
				resp, body := servertest.PostJSON(t, base+"/api/auth/login/", `{"username":"bob","password":"bob-pw"}`)
				var reply struct{ Token string }
				if resp.StatusCode == http.StatusOK && json.Unmarshal([]byte(body), &reply) != nil {
					t.Errorf("login reply %q is not JSON", body)
				}
				count("login", resp.StatusCode)
			}
		})
	}
	time.Sleep(3 * time.Second)
	close(done)
	wg.Wait()
	log.WaitFor(t, regexp.MustCompile(`users file reloaded`))
	t.Logf("%d SIGHUPs; replies %v", hups.Load(), statuses)
	for kind, byStatus := range statuses {
		for code, n := range byStatus {
			if code != http.StatusOK {
				t.Errorf("%s during the SIGHUP storm: %d × %d; want only 200s", kind, n, code)
			}
		}
		if byStatus[http.StatusOK] == 0 {
			t.Errorf("%s during the SIGHUP storm: no 200 at all", kind)
		}
	}
}
