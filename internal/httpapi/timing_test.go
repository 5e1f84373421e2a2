package httpapi_test

import (
	"net/http"
	"testing"
	"time"
)

// TestLoginPaddingHoldsNoSlot: a failed login held up to the slowest
// check's time holds no hasher slot while it waits, so with one slot
// another login goes through meanwhile.
func TestLoginPaddingHoldsNoSlot(t *testing.T) {
	// Not parallel: other tests' hashing would stretch bob's check. The
	// pad is long so that a loaded machine (make test runs packages side
	// by side) still ends bob's cost-4 login well within it; a held
	// failure that kept the one slot would end bob's after it, however
	// slow the machine.
	const pad = 5 * time.Second
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.tokenTTL = time.Hour
		c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 4, 5*time.Second
	})
	// A first login starts the hasher's worker process, which under -race
	// on a loaded machine can take seconds: not what is measured here.
	if w := e.do("POST", "/api/auth/login/", `{"username":"bob","password":"bob-pw"}`, jsonCT); w.Code != http.StatusOK {
		t.Fatalf("bob's first login = %d %s; want 200", w.Code, w.Body)
	}
	e.users.Slowest().Took.Store(int64(pad)) // as if a check against the slowest hash took 5s
	failed := make(chan time.Time)
	go func() {
		e.do("POST", "/api/auth/login/", `{"username":"alice","password":"wrong"}`, jsonCT)
		failed <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond) // alice's check (bcrypt at cost 4) is over: she waits out the rest
	start := time.Now()
	if w := e.do("POST", "/api/auth/login/", `{"username":"bob","password":"bob-pw"}`, jsonCT); w.Code != http.StatusOK {
		t.Errorf("bob's login = %d %s; want 200", w.Code, w.Body)
	}
	took := time.Since(start)
	if end := <-failed; end.Before(start.Add(took)) {
		t.Errorf("bob's login while alice's failure was held took %v, ending after hers; want it to end first: the held failure holds no slot", took)
	}
}
