package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"authsvc/internal/httpapi"
	"authsvc/internal/testservers"
	"authsvc/internal/tokens"
	"authsvc/internal/users/usersfile"
)

// TestSessionsAcrossInstances: two instances on one Redis. An admin on A
// lists and ends one of alice's sessions; that token is dead on B at once.
func TestSessionsAcrossInstances(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	args := []string{"--cost", "4", "--users", usersPath, "--store", redisURL, "--store-prefix", testservers.UniquePrefix()}
	baseA, _, stopA := harness.StartServer(t, nil, args...)
	defer stopA()
	baseB, _, stopB := harness.StartServer(t, nil, args...)
	defer stopB()
	aliceTok := servertest.LoginToken(t, baseB, "alice", "alice-pw")
	bobTok := servertest.LoginToken(t, baseA, "bob", "bob-pw")

	r := harness.Do(t, "GET", baseA+"/api/auth/sessions/?username=alice", bobTok, "")
	var list struct{ Sessions []httpapi.SessionReply }
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &list) != nil || len(list.Sessions) != 1 {
		t.Fatalf("admin on A lists alice's sessions = %s; want one session", r)
	}
	if s := list.Sessions[0]; s.Client != "127.0.0.1" || s.Current || s.ID == (tokens.SessionID{}) {
		t.Errorf("alice's session = %+v; want client 127.0.0.1, an id, not current", s)
	}
	if r := harness.Do(t, "DELETE", baseA+"/api/auth/sessions/"+list.Sessions[0].ID.String()+"?username=alice", bobTok, ""); r.Status != 204 {
		t.Fatalf("admin on A ends alice's session = %s; want 204", r)
	}
	harness.WantInvalidToken(t, "B, right after the revocation on A", baseB, aliceTok)
	harness.WantInvalidToken(t, "A", baseA, aliceTok)
}

// TestTokenIdleRedis: with the Redis store, a token in use stays alive
// past the idle limit, and an unused one dies within the limit plus its lag.
func TestTokenIdleRedis(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	const idle = 2 * time.Second // lag: a quarter, 500 ms
	base, _, stop := harness.StartServer(t, nil, "--cost", "4", "--users", usersPath, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--token-idle", idle.String())
	defer stop()
	// unused first: busy must not sit idle while another login runs, which
	// on a loaded machine has taken longer than the limit.
	unused := servertest.LoginToken(t, base, "alice", "alice-pw")
	busy := servertest.LoginToken(t, base, "alice", "alice-pw")
	start := time.Now()
	for time.Since(start) < 3*idle {
		if code, body := servertest.GetInfo(t, base, busy, ""); code != 200 {
			t.Fatalf("a token used every 300 ms under a %v idle limit, after %v = %d %s; want 200", idle, time.Since(start), code, body)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if code, _ := servertest.GetInfo(t, base, unused, ""); code != 401 {
		t.Errorf("a token unused for %v under a %v idle limit = %d; want 401", 3*idle, idle, code)
	}
}

// TestTokenIdleFleet: a token used only on instance B stays alive on
// instance A, which cached it long ago: A's cached last use is stale, and
// A re-reads the store before it refuses (and revokes) a token for
// idleness. Without that, A would end a token in use everywhere.
func TestTokenIdleFleet(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	redisURL, _, _ := testservers.Redis(t)
	usersPath := filepath.Join(t.TempDir(), "users.json")
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	const idle = time.Second // lag: a quarter, 250 ms
	args := []string{"--cost", "4", "--users", usersPath, "--store", redisURL, "--store-prefix", testservers.UniquePrefix(), "--token-idle", idle.String()}
	baseA, _, stopA := harness.StartServer(t, nil, args...)
	defer stopA()
	baseB, _, stopB := harness.StartServer(t, nil, args...)
	defer stopB()
	token := servertest.LoginToken(t, baseA, "alice", "alice-pw")
	// A caches it (the second check is answered from A's cache).
	for range 2 {
		if code, body := servertest.GetInfo(t, baseA, token, ""); code != 200 {
			t.Fatalf("info on A = %d %s; want 200", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	for time.Since(start) < 3*idle {
		if code, body := servertest.GetInfo(t, baseB, token, ""); code != 200 {
			t.Fatalf("a token used on B every 200 ms under a %v idle limit, after %v = %d %s; want 200", idle, time.Since(start), code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body := servertest.GetInfo(t, baseA, token, ""); code != 200 {
		t.Errorf("on A, a token used on B all along, %v after A last saw it = %d %s; want 200 (A judged its cached last use)", 3*idle, code, body)
	}
}
