package faults

import (
	"authsvc/integration/harness"
	"net/http"
	"testing"
	"time"

	"authsvc/internal/testservers"
)

// sentinelHealBound is API.md's (Operations) bound for a Sentinel-managed
// primary: service back within 10 s of the new primary, no restart.
const sentinelHealBound = 10 * time.Second

// sentinelLossWindow: tokens issued longer than this before the primary's
// kill must survive the failover (issue 22, point 2). Replication is
// asynchronous: what the primary had not yet sent its replica dies with it.
const sentinelLossWindow = time.Second

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// firstOK returns when the earliest 200 reply of kind to a request sent
// after from arrived, and whether there was one.
func firstOK(replies []faultReply, kind string, from time.Time) (time.Time, bool) {
	var first time.Time
	for _, r := range replies {
		if r.kind == kind && r.status == http.StatusOK && r.sent.After(from) && (first.IsZero() || r.got.Before(first)) {
			first = r.got
		}
	}
	return first, !first.IsZero()
}

// TestFaultSentinelFailover (issue 22, point 2): two instances on
// --store redis+sentinel://, a primary, a replica and three sentinels as
// real processes. Under login and /info load on both, the primary is
// killed with SIGKILL. While there is no primary only 503 unavailable
// answers, never another 5xx, and never a 200 for a token revoked before
// the kill; logins and /info with live tokens answer 200 again on both
// instances within 10 s of the sentinels' promotion, neither instance
// restarted; and every token issued more than a second before the kill
// still works. The time to heal is logged ("sentinel time to heal"), as
// make bench prints it.
func TestFaultSentinelFailover(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	g := testservers.Sentinel(t)
	args := []string{"--cost", "4", "--users", harness.WriteTestUsers(t), "--store", g.URL, "--store-prefix", testservers.UniquePrefix(),
		"--cost", "4", "--max-tokens-per-user", "0", "--login-rate", "1000", "--login-burst", "1000"}
	baseA, logA, stopA := harness.StartServer(t, nil, args...)
	defer stopA()
	baseB, logB, stopB := harness.StartServer(t, nil, args...)
	defer stopB()
	bases := []string{baseA, baseB}
	defer func() {
		if t.Failed() {
			t.Logf("instance A's log, access lines left out:\n%s", logExcerpt(logA.String()))
			t.Logf("instance B's log, access lines left out:\n%s", logExcerpt(logB.String()))
		}
	}()

	// One load per instance, so that each instance's replies, and its
	// healing, can be told apart.
	loads := []*faultLoad{newFaultLoad(), newFaultLoad()}
	for _, l := range loads {
		defer l.close() // before the servers stop: defers run last-in first-out
	}
	const workers = 4
	names := []string{"alice", "bob"}
	old := make([]string, workers) // issued well before the kill: must never be refused
	for w := range old {
		r := loads[w%2].login(bases[w%2], names[w%2], names[w%2]+"-pw")
		if r.status != http.StatusOK || r.err != nil {
			t.Fatalf("login before the load = %d %q %v; want 200", r.status, r.code, r.err)
		}
		old[w] = r.token
	}
	// A token revoked before the kill: the new primary must know it dead.
	dead := loads[0].login(baseA, "alice", "alice-pw")
	if dead.status != http.StatusOK {
		t.Fatalf("login of the token to revoke = %d %q %v; want 200", dead.status, dead.code, dead.err)
	}
	if r := loads[0].do("logout", "POST", baseA+"/api/auth/logout/", "alice", dead.token, ""); r.status != http.StatusNoContent {
		t.Fatalf("logout = %d %q %v; want 204", r.status, r.code, r.err)
	}

	// Each worker logs in on one instance and presents its tokens, and the
	// dead one, to both.
	latest := make([]string, workers) // each worker's own newest token
	stop := make(chan struct{})
	wait := runLoads(loads, bases, workers, stop, func(w int, own, other *faultLoad, ownBase, otherBase string) {
		user := names[w%2]
		if r := own.login(ownBase, user, user+"-pw"); r.status == http.StatusOK && r.err == nil {
			latest[w] = r.token
		}
		other.info("info-old", otherBase, user, old[w])
		own.info("info-dead", ownBase, "alice", dead.token)
		if latest[w] != "" {
			if r := other.info("info-new", otherBase, user, latest[w]); r.status == http.StatusUnauthorized {
				latest[w] = "" // lost with the primary's last writes: checked below
			}
		}
		time.Sleep(2 * time.Millisecond)
	})

	time.Sleep(sentinelLossWindow + 500*time.Millisecond) // tokens older than the loss window exist
	killed := time.Now()
	oldPrimary := g.KillPrimary() // SIGKILL, and the process is gone
	killDone := time.Now()
	newPrimary, promoted := g.WaitForNewPrimary(oldPrimary, 60*time.Second)
	if newPrimary == "" {
		close(stop)
		wait()
		t.FailNow()
	}
	// Heal, or give up at twice the bound (the checks below name it).
	for _, i := range []int{0, 1} {
		for deadline := time.Now().Add(2 * sentinelHealBound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			l := loads[i].login(bases[i], "bob", "bob-pw")
			o := loads[i].info("info-old", bases[i], "alice", old[0])
			if l.status == http.StatusOK && o.status == http.StatusOK {
				break
			}
		}
	}
	time.Sleep(time.Second)
	close(stop)
	wait()

	// promotedBefore: the sentinels are asked one after the other every
	// 10 ms, so the first of them to report the promotion did so up to a
	// round of questions before it was seen; a reply in that margin may
	// come from the new primary already.
	promotedBefore := promoted.Add(-50 * time.Millisecond)
	issued := map[string]time.Time{} // token → its login's reply
	var all []faultReply
	for _, l := range loads {
		for _, r := range l.all() {
			all = append(all, r)
			if r.kind == "login" && r.status == http.StatusOK {
				issued[r.token] = r.got
			}
		}
	}
	mayBeLost := func(token string) bool {
		at, ok := issued[token]
		return ok && at.After(killed.Add(-sentinelLossWindow)) && at.Before(promoted)
	}
	errs := faultErrors{t: t, max: 10}
	var unavailable int
	var last503 time.Time
	for _, r := range all {
		noPrimary := r.sent.After(killDone) && r.got.Before(promotedBefore)
		// A live token's check may be answered from the instance's token
		// cache until it notices that its invalidation link died with the
		// primary (linkBound, as in TestMultiInstance); a dead token never
		// is (the case above the noPrimary one).
		cachedLive := r.status == http.StatusOK && (r.kind == "info-old" || r.kind == "info-new") && r.got.Before(killDone.Add(harness.LinkBound))
		switch {
		case r.status == 0 || r.err != nil:
			errs.errorf("%s %s sent %v after the kill: no reply: %v", r.kind, r.reqID, r.sent.Sub(killed), r.err)
		case r.status == http.StatusServiceUnavailable:
			unavailable++
			last503 = later(last503, r.got)
			if r.got.Before(killed) {
				errs.errorf("%s %s = 503 %q before the kill; want 503s only while there is no primary", r.kind, r.reqID, r.code)
			}
			if r.code != "unavailable" {
				errs.errorf("%s %s = 503 %q; want code \"unavailable\"", r.kind, r.reqID, r.code)
			}
		case r.status >= 500:
			errs.errorf("%s %s = %d %q (sent %v after the kill); want 503, never another 5xx", r.kind, r.reqID, r.status, r.code, r.sent.Sub(killed))
		case r.kind == "info-dead" && r.status == http.StatusOK:
			errs.errorf("info with the token revoked before the kill %s = 200 (sent %v after the kill); want 401, or 503 while there is no primary: a dead token answered", r.reqID, r.sent.Sub(killed))
		case noPrimary && !cachedLive:
			errs.errorf("%s %s = %d %q, sent %v after the kill and answered %v before the promotion was seen; want 503 while there is no primary",
				r.kind, r.reqID, r.status, r.code, r.sent.Sub(killed), promoted.Sub(r.got))
		case r.kind == "login" && r.status != http.StatusOK:
			errs.errorf("login %s = %d %q; want 200, or 503 while there is no primary", r.reqID, r.status, r.code)
		case r.kind == "info-old" && r.status != http.StatusOK:
			errs.errorf("info with a token issued before the load %s = %d %q (sent %v after the kill); want 200, or 503 while there is no primary",
				r.reqID, r.status, r.code, r.sent.Sub(killed))
		case r.kind == "info-new" && r.status == http.StatusUnauthorized && !mayBeLost(r.token):
			errs.errorf("info-new %s = 401 %q (sent %v after the kill, token issued %v before it); want 200 or 503: a live token refused",
				r.reqID, r.code, r.sent.Sub(killed), killed.Sub(issued[r.token]))
		case r.kind == "info-new" && r.status != http.StatusOK && r.status != http.StatusUnauthorized:
			errs.errorf("info-new %s = %d %q; want 200, or 503 while there is no primary", r.reqID, r.status, r.code)
		}
	}
	errs.done()
	if unavailable == 0 {
		t.Errorf("no 503 after the kill: the test did not see the failover (%s)", faultTally(all))
	}
	if last503.After(promoted.Add(sentinelHealBound)) {
		t.Errorf("a 503 came %v after the promotion; API.md: service back within %v of the new primary", last503.Sub(promoted), sentinelHealBound)
	}

	// Healed: on each instance, a login and an /info with a live token
	// answered 200, for requests sent after the kill.
	var healed time.Time
	for i, name := range []string{"A", "B"} {
		replies := loads[i].all()
		login, okL := firstOK(replies, "login", killDone)
		info, okI := firstOK(replies, "info-old", killDone)
		if !okL || !okI {
			t.Errorf("instance %s: no 200 after the kill (login %v, /info %v; %s); want service back within %v of the promotion, no restart",
				name, okL, okI, faultTally(replies), sentinelHealBound)
			continue
		}
		healed = later(healed, later(login, info))
	}
	afterKill, afterPromotion := healed.Sub(killed), healed.Sub(promoted)
	if !healed.IsZero() && afterPromotion > sentinelHealBound {
		t.Errorf("service back %v after the promotion; API.md: within %v", afterPromotion, sentinelHealBound)
	}

	// Every token issued before the loss window, or after the promotion,
	// answers on both instances now; of those issued inside it, count the
	// survivors. The dead one stays dead.
	windowed, windowKept := 0, 0
	lostErrs := faultErrors{t: t, max: 10}
	var live []faultReply
	for _, r := range successfulLogins(all) {
		if r.token != dead.token {
			live = append(live, r)
		}
	}
	for _, base := range bases {
		for _, r := range infoAll(base, live) {
			switch {
			case mayBeLost(r.token):
				windowed++
				if r.status == http.StatusOK {
					windowKept++
				}
			case r.status != http.StatusOK:
				lostErrs.errorf("token issued %v before the kill (negative: after) = %d %q on %s after the failover; want 200",
					killed.Sub(issued[r.token]).Round(time.Millisecond), r.status, r.code, base)
			}
		}
		if r := loads[0].info("after", base, "alice", dead.token); r.status != http.StatusUnauthorized {
			t.Errorf("info with the token revoked before the kill, on %s after the failover = %d %q; want 401", base, r.status, r.code)
		}
	}
	lostErrs.done()
	audited, _ := checkLoginAudit(t, func() string { return logA.String() + "\n" + logB.String() }, all)
	t.Logf("sentinel time to heal: %v after the kill, %v after the promotion (new primary reported %v after the kill)",
		afterKill.Round(time.Millisecond), afterPromotion.Round(time.Millisecond), promoted.Sub(killed).Round(time.Millisecond))
	t.Logf("primary %s killed, %s promoted; %s; %d × 503 in all; %d tokens checked after on both instances, %d issued in the last %v before the kill of which %d kept; %d logins audited",
		oldPrimary, newPrimary, faultTally(all), unavailable, len(issued), windowed/2, sentinelLossWindow, windowKept/2, audited)
}

// runLoads starts n workers on two instances (loads[i] records the
// replies of bases[i]), worker w sending to instance w%2 (own) and the
// other one, each calling step in a loop until stop is closed, and
// returns a function that waits for them.
func runLoads(loads []*faultLoad, bases []string, n int, stop <-chan struct{}, step func(w int, own, other *faultLoad, ownBase, otherBase string)) (wait func()) {
	waits := make([]func(), 0, len(loads))
	for i := range loads {
		waits = append(waits, loads[i].run(n/len(loads), stop, func(j int) {
			w := j*len(loads) + i
			step(w, loads[i], loads[1-i], bases[i], bases[1-i])
		}))
	}
	return func() {
		for _, wait := range waits {
			wait()
		}
	}
}
