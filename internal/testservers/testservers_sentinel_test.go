package testservers

import (
	"strings"
	"testing"
	"time"
)

// TestSentinel: the group starts with the sentinels agreeing on the
// primary, and after KillPrimary they promote the replica within
// seconds: what the failover tests of the store rest on.
func TestSentinel(t *testing.T) {
	g := Sentinel(t)
	if !strings.HasPrefix(g.URL, "redis+sentinel://127.0.0.1:") || !strings.HasSuffix(g.URL, "/"+SentinelMaster+"/0") || len(g.Sentinels) != 3 {
		t.Errorf("Sentinel(t).URL = %q, %d sentinels; want redis+sentinel://127.0.0.1:…/%s/0, 3", g.URL, len(g.Sentinels), SentinelMaster)
	}
	old, err := g.Primary()
	if err != nil {
		t.Fatal(err)
	}
	if reply, err := RESP(old, "SET", "k", "v"); reply != "OK" || err != nil {
		t.Fatalf("SET k v on the primary %s = %v, %v; want OK", old, reply, err)
	}
	killed := time.Now()
	if got := g.KillPrimary(); got != old {
		t.Errorf("KillPrimary() = %s; want %s, the primary", got, old)
	}
	if err := pingRESP(old); err == nil {
		t.Errorf("the killed primary %s still answers PING", old)
	}
	addr, seen := g.WaitForNewPrimary(old, 30*time.Second)
	if addr == "" {
		t.FailNow()
	}
	t.Logf("new primary %s reported %v after the kill", addr, seen.Sub(killed).Round(time.Millisecond))
	// The sentinels report it once it is promoted: it takes writes, and
	// kept what the old one had.
	if reply, err := RESP(addr, "GET", "k"); reply != "v" || err != nil {
		t.Errorf("GET k on the new primary %s = %v, %v; want \"v\"", addr, reply, err)
	}
	if reply, err := RESP(addr, "SET", "k", "w"); reply != "OK" || err != nil {
		t.Errorf("SET k w on the new primary %s = %v, %v; want OK", addr, reply, err)
	}
}
