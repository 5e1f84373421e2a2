package integration

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"testing"

	"authsvc/internal/users/usersfile"
)

// TestPasswordChangeReachesOtherInstance: two servers read one users file
// and keep their own tokens; a password change on one is in force on the
// other within 5 s, and the other's earlier tokens die.
func TestPasswordChangeReachesOtherInstance(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	usersPath := t.TempDir() + "/users.json"
	if err := usersfile.Write(usersPath, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	baseA, _, stopA := harness.StartServer(t, nil, "--users", usersPath, "--hash", "bcrypt", "--cost", "4")
	defer stopA()
	baseB, _, stopB := harness.StartServer(t, nil, "--users", usersPath, "--hash", "bcrypt", "--cost", "4")
	defer stopB()
	onB := servertest.LoginToken(t, baseB, "alice", "alice-pw")
	onA := servertest.LoginToken(t, baseA, "alice", "alice-pw")
	r := harness.Do(t, "POST", baseA+"/api/auth/password/", onA, harness.ChangeBody("alice-pw", harness.NewPassphrase))
	if r.Status != 200 {
		t.Fatalf("password change on A = %s; want 200", r)
	}
	harness.WaitInfo(t, baseB, onB, 401, "B's token after the change on A")
	harness.WaitLogin(t, baseB, "alice", harness.NewPassphrase)
}
