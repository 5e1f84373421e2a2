package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"authsvc/internal/password/passwordtest"
	"authsvc/internal/servertest"
	"authsvc/internal/users"
	"authsvc/internal/users/usersfile"
)

// TestUnknownUserHoldsNoSlotForTheSlowestHash: with one check slot and no
// queue, a login of an unknown user, checked against the hash policy's
// dummy, gives the slot back long before the directory's slowest hash
// would, so a real login sent just after it is served, not refused at
// capacity; its failure is still held to the slowest check's time.
func TestUnknownUserHoldsNoSlotForTheSlowestHash(t *testing.T) {
	// Not parallel: it gives a cost-4 check 100ms to end, which other
	// tests' hashing would stretch.
	e := newTestEnvConfig(t, nil, func(c *envConfig) {
		c.passwordSlots, c.passwordQueue = 1, 0
	})
	list := append(servertest.TestUsers(t), users.User{Username: "slow", PasswordHash: passwordtest.MustHash(t, "slow-pw", 12), Groups: []string{}})
	if err := usersfile.Write(e.usersPath, list); err != nil {
		t.Fatal(err)
	}
	if err := e.users.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.login("bob") // starts the hash worker, and makes the policy's dummy hash
	unknown := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		e.do("POST", "/api/auth/login/", `{"username":"nobody","password":"whatever"}`, jsonCT)
		unknown <- time.Since(start)
	}()
	// alice logs in while the unknown user's failure is still held: the
	// dummy check (cost 4) ends long before the slowest check's time
	// (cost 12) that the failure is held to. Tried every 20 ms, since on
	// a loaded machine the dummy check itself may not be over at once (a
	// try in the meantime is 503 at capacity, and counts nothing).
	var took time.Duration
	served := false
	for !served {
		time.Sleep(20 * time.Millisecond)
		select {
		case took = <-unknown:
			t.Fatalf("the unknown user's failure ended (after %v) before alice could log in; want alice served while it is held (the dummy check holds the slot only at the policy's cost)", took)
		default:
		}
		w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT)
		switch w.Code {
		case http.StatusOK:
			served = true
		case http.StatusServiceUnavailable:
		default:
			t.Fatalf("login of alice while an unknown user's failure is held = %d %s; want 200", w.Code, w.Body)
		}
	}
	took = <-unknown
	slowest := time.Duration(e.users.Slowest().Took.Load())
	if took < slowest/2 {
		t.Errorf("unknown user's login took %v; want it held near the slowest check's %v", took, slowest)
	}
}
