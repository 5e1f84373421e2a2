package httpapi_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/resetmail"
	"authsvc/internal/servertest"
	"authsvc/internal/users"
)

// publicSeries returns the series of the API listener's /metrics that
// requests can move, by name and labels: the Go runtime's and the
// process's figures, request times (the buckets and sums of the
// durations) and /metrics's own route, which move whoever is asked for,
// are left out.
func publicSeries(t *testing.T, e *testEnv) map[string]float64 {
	t.Helper()
	w := e.do("GET", "/metrics", "")
	if w.Code != 200 {
		t.Fatalf("GET /metrics = %d; want 200", w.Code)
	}
	series := make(map[string]float64)
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "authsvc_go_") || strings.HasPrefix(line, "authsvc_process_") ||
			strings.HasPrefix(line, "authsvc_http_request_duration_seconds_bucket") || strings.HasPrefix(line, "authsvc_http_request_duration_seconds_sum") ||
			strings.Contains(line, `route="/metrics"`) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		series[line[:i]] = v
	}
	return series
}

// seriesMoved returns how each series moved from before to after, the
// ones that did not move left out.
func seriesMoved(before, after map[string]float64) map[string]float64 {
	moved := make(map[string]float64)
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			moved[k] = d
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			moved[k] = -before[k]
		}
	}
	return moved
}

// movedText lists moved for a failure message, sorted.
func movedText(moved map[string]float64) string {
	var lines []string
	for k, d := range moved {
		lines = append(lines, k+" +"+strconv.FormatFloat(d, 'g', -1, 64))
	}
	slices.Sort(lines)
	return strings.Join(lines, ", ")
}

// TestMetricsNameNoUser: API.md, Operations: no metric on the API
// listener tells whether a user or an address exists. Each
// unauthenticated request that names a user (login, reset confirm, reset
// request) moves the public /metrics the same way for a user who exists
// as for one who does not, the mail sent to the one who exists included.
func TestMetricsNameNoUser(t *testing.T) {
	t.Parallel()
	// Each known case names a user of its own: no throttle's count of one
	// case weighs on another's.
	base := servertest.TestUsers(t)
	alice := base[0]
	var us []users.User
	for _, name := range []string{"alice", "dave", "erin", "frank", "gina"} {
		u := alice
		u.Username, u.Email = name, name+"@example.com"
		us = append(us, u)
	}
	us = append(us, base[2]) // carol, disabled
	mailed := make(chan struct{}, 10)
	var e *testEnv
	e = newMailEnv(t, func(c *envConfig) { c.users, c.tokenTTL = us, time.Hour }, func(resetmail.Message) bool {
		// As serve's mail queue counts a message the SMTP server took
		// (internal/cli's buildResetMail), here at once.
		e.deps.Metrics.Mailed("sent")
		mailed <- struct{}{}
		return true
	})
	waitMailed := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-mailed:
			case <-time.After(10 * time.Second):
				t.Fatal("no mail within 10 s of a reset request for a user with an address")
			}
		}
	}
	login := func(username, password string) func() {
		return func() {
			e.do("POST", "/api/auth/login/", `{"username":"`+username+`","password":"`+password+`"}`, jsonCT)
		}
	}
	uid := func(username string) string { return base64.RawURLEncoding.EncodeToString([]byte(username)) }
	if _, _, err := users.NewResetLink(context.Background(), e.users, "erin", time.Hour, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	confirm := func(username string) func() {
		return func() {
			e.do("POST", "/api/auth/password/reset/confirm/", `{"uid":"`+uid(username)+`","token":"`+strings.Repeat("A", 43)+`","new_password":"a brand new passphrase"}`, jsonCT)
		}
	}
	// A reset request is served outside the request, in order, by one
	// worker: each is followed by a request for flush (at most 3 an hour),
	// whose mail, once it is out, says that the one before has been
	// served too.
	resetRequest := func(body, flush string) func() {
		return func() {
			for _, b := range []string{body, `{"username":"` + flush + `"}`} {
				if w := e.do("POST", "/api/auth/password/reset/", b, jsonCT); w.Code != 204 {
					t.Fatalf("reset request %s = %d %s; want 204", b, w.Code, w.Body)
				}
			}
			waitMailed(1)
			if strings.Contains(body, "dave") {
				waitMailed(1)
			}
		}
	}
	for _, c := range []struct {
		name           string
		known, unknown func()
		others         []func() // further requests for no one, or for a user, that must move it alike
	}{
		{"login, wrong password", login("alice", "wrong"), login("nobody", "wrong"), []func(){login("carol", "wrong")}},
		{"reset confirm, wrong token", confirm("erin"), confirm("nobody"), []func(){confirm("alice")}},
		{"reset request by email", resetRequest(`{"email":"dave@example.com"}`, "frank"), resetRequest(`{"email":"nobody@example.com"}`, "frank"), nil},
		{"reset request by username", resetRequest(`{"username":"dave"}`, "gina"), resetRequest(`{"username":"nobody"}`, "gina"),
			[]func(){resetRequest(`{"username":"carol"}`, "gina")}}, // disabled, without an address
	} {
		before := publicSeries(t, e)
		c.known()
		mid := publicSeries(t, e)
		want := seriesMoved(before, mid)
		for i, f := range append([]func(){c.unknown}, c.others...) {
			f()
			after := publicSeries(t, e)
			if got := seriesMoved(mid, after); movedText(got) != movedText(want) {
				t.Errorf("%s: request %d for another than the user who exists moved /metrics by {%s}; want {%s}, as for the user", c.name, i, movedText(got), movedText(want))
			}
			mid = after
		}
	}
	if w := e.do("GET", "/metrics", ""); strings.Contains(w.Body.String(), "authsvc_reset_mail_total") {
		t.Errorf("/metrics on the API listener serves authsvc_reset_mail_total; want it on the metrics listener only")
	}
}

// TestMetricsHandlers: the metrics listener's handler serves every
// metric, the mail delivery counters included; the API listener's the
// same without them.
func TestMetricsHandlers(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, httpapi.TokenPolicy{TTL: time.Hour})
	m := e.deps.Metrics
	m.Mailed("sent")
	m.Mailed("failed_rejected")
	const mailed = `authsvc_reset_mail_total{outcome="sent"} 1`
	for _, c := range []struct {
		name     string
		h        http.Handler
		withMail bool
	}{
		{"Handler (the metrics listener)", m.Handler(), true},
		{"APIHandler", m.APIHandler(), false},
		{"the API listener's /metrics", e.handler, false},
	} {
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		body := w.Body.String()
		if w.Code != 200 || !strings.Contains(body, `authsvc_login_total{outcome="success"} 0`) {
			t.Errorf("%s = %d, login counters %v; want 200 with them", c.name, w.Code, strings.Contains(body, "authsvc_login_total"))
		}
		if got := strings.Contains(body, mailed) && strings.Contains(body, `authsvc_reset_mail_total{outcome="failed_rejected"} 1`); got != c.withMail {
			t.Errorf("%s serves the mail delivery counters = %v; want %v", c.name, got, c.withMail)
		}
		if !c.withMail && strings.Contains(body, "authsvc_reset_mail_total") {
			t.Errorf("%s serves authsvc_reset_mail_total; want it on the metrics listener only", c.name)
		}
	}
}
