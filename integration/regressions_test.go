package integration

import (
	"authsvc/integration/harness"
	"strings"
	"testing"
)

// modelRegressions are walks that failed before a fix, shrunk by
// TestModelFleet's shrinking and kept as they were printed: each replays on
// a fresh fleet of its topology in every make test, whatever seeds the
// budget draws.
var modelRegressions = []struct {
	name, topology string
	seed           uint64
	steps          string
}{
	// A password change's token, refused (and revoked fleet-wide) by an
	// instance that had not reloaded the users file yet (issue 28, point 1).
	{"fresh token on a lagging instance", "file+redis", 2, "password bob @A pick=284 alt=118"},
	{"fresh token on a lagging instance, cluster", "file+cluster", 1, "password bob @A pick=284 alt=118"},
	// The token that confirmed an authenticator, the same way.
	{"re-bound token on a lagging instance", "file+redis", 1, "mfa-enrol alice @C pick=0 alt=0; hup carol @A pick=0 alt=0; mfa-confirm alice @A pick=0 alt=0"},
	// A user passwd loaded by the server's own next write, never told to
	// the token store, whose older stamp then refused the new password.
	{"user passwd loaded by the server's own write", "single", 2, "password alice @A pick=0 alt=0; cli-passwd alice @A pick=0 alt=0; password bob @A pick=0 alt=0"},
	// A token handed out while the user was disabled, by an instance that
	// had not seen the disable, lived on after user enable.
	{"disabled and enabled within a reload", "single", 2, "password alice @A pick=0 alt=0; cli-disable alice @A pick=0 alt=0; cli-enable alice @A pick=0 alt=0; password bob @A pick=0 alt=0"},
	// A reset link made before user disable worked again after user
	// enable (issue 31): a disable now ends it.
	{"reset link across a disable", "postgres+redis", 1, "cli-reset-link alice @A pick=0 alt=0; cli-disable alice @A pick=0 alt=0; cli-enable alice @A pick=0 alt=0; reset-confirm alice @B pick=0 alt=12"},
	// The admin API's password change answered 404 for a user the CLI had
	// just added, before the instance reloaded (issue 32).
	{"admin password of a user not yet reloaded", "single", 2, "login carol @A pick=566 alt=847; cli-del carol @A pick=508 alt=511; restart bob @A pick=542 alt=8; login bob @A pick=335 alt=63; cli-logout bob @A pick=916 alt=494; cli-add carol @A pick=729 alt=633; admin-read carol @A pick=680 alt=690; cli-reset-mfa carol @A pick=510 alt=367; admin-password carol @A pick=433 alt=330"},
}

// TestModelRegressions replays modelRegressions against the model.
func TestModelRegressions(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	harness.RequireBinary(t)
	for _, reg := range modelRegressions {
		t.Run(reg.name, func(t *testing.T) {
			t.Parallel()
			var topo *topology
			for i := range topologies {
				if topologies[i].name == reg.topology {
					topo = &topologies[i]
				}
			}
			if topo == nil {
				t.Fatalf("no topology %q", reg.topology)
			}
			var steps []step
			for _, line := range strings.Split(reg.steps, ";") {
				s, err := parseStep(line)
				if err != nil {
					t.Fatalf("step %q: %v", line, err)
				}
				steps = append(steps, s)
			}
			res := walk(t, *topo, topo.prepare(t), reg.seed, steps, len(steps))
			if res.failure != nil {
				t.Errorf("%s", report(*topo, reg.seed, res, res))
			}
		})
	}
}
