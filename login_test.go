package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestLoginParallelGuesses: ten wrong passwords sent at once for one user
// from one client, with the pair's limit at 5, get no more than five
// password checks (401) before the 429s begin.
func TestLoginParallelGuesses(t *testing.T) {
	e := newTestEnvConfig(t, nil, func(c *serveConfig) {
		c.tokenTTL = time.Hour
		c.passwordSlots, c.passwordQueue, c.passwordWait = 1, 16, 5*time.Second
	})
	// Hold the only hasher slot so that every admitted attempt waits for
	// it, all of them in flight at once.
	release, err := e.deps.Guard.Admission.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	codes := make(chan int, 10)
	for range 10 {
		wg.Go(func() {
			codes <- e.do("POST", "/api/auth/login/", `{"username":"alice","password":"wrong"}`, jsonCT).Code
		})
	}
	// The refused ones answer at once; wait for the rest to queue.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, waiting := e.deps.Guard.Admission.Stats()
		if waiting+len(codes) >= 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	if count[http.StatusUnauthorized] > 5 || count[http.StatusUnauthorized]+count[http.StatusTooManyRequests] != 10 {
		t.Errorf("10 parallel wrong passwords = %v; want at most 5 × 401 and the rest 429", count)
	}
}

// TestLoginNATNotThrottled: successful logins never count against a
// client's limit, so many people behind one address (a NAT, or a proxy
// without --trusted-proxy) log in at once, at the default limits.
func TestLoginNATNotThrottled(t *testing.T) {
	e := newTestEnvConfig(t, nil, func(c *serveConfig) {
		c.tokenTTL = time.Hour
		c.throttle = defaultServeConfig().throttle
	})
	for i := range 30 {
		w := e.do("POST", "/api/auth/login/", `{"username":"alice","password":"alice-pw"}`, jsonCT)
		if w.Code != http.StatusOK {
			t.Fatalf("good login %d from one address = %d %s; want 200", i+1, w.Code, w.Body)
		}
	}
	// Failures still count: the address's bucket (10 deep) empties.
	got, tries := 0, 0
	for range 12 {
		tries++
		body := fmt.Sprintf(`{"username":"nobody%d","password":"x"}`, tries) // a new username each time: no pair limit
		if e.do("POST", "/api/auth/login/", body, jsonCT).Code == http.StatusTooManyRequests {
			got++
		}
	}
	if got == 0 {
		t.Errorf("12 failed logins from one address: no 429; want the address's bucket to refuse")
	}
}
