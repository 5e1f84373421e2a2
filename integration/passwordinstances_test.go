package integration

import (
	"testing"

	"authsvc/internal/users/usersfile"
)

// TestPasswordChangeReachesOtherInstance: two servers read one users file
// and keep their own tokens; a password change on one is in force on the
// other within 5 s, and the other's earlier tokens die.
func TestPasswordChangeReachesOtherInstance(t *testing.T) {
	t.Parallel()
	usersPath := t.TempDir() + "/users.json"
	if err := usersfile.Write(usersPath, testUsers(t)); err != nil {
		t.Fatal(err)
	}
	baseA, _, stopA := startServer(t, nil, "--users", usersPath, "--hash", "bcrypt", "--cost", "4")
	defer stopA()
	baseB, _, stopB := startServer(t, nil, "--users", usersPath, "--hash", "bcrypt", "--cost", "4")
	defer stopB()
	onB := loginToken(t, baseB, "alice", "alice-pw")
	onA := loginToken(t, baseA, "alice", "alice-pw")
	r := miDo(t, "POST", baseA+"/api/auth/password/", onA, changeBody("alice-pw", newPassphrase))
	if r.status != 200 {
		t.Fatalf("password change on A = %s; want 200", r)
	}
	waitInfo(t, baseB, onB, 401, "B's token after the change on A")
	waitLogin(t, baseB, "alice", newPassphrase)
}
