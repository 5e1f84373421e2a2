package django

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"authsvc/internal/users/usersfile"
)

// TestCLIConcurrentAdd runs 20 user add processes at once on one file: the
// lock must keep every entry.
func TestCLIConcurrentAdd(t *testing.T) {
	harness.Long(t)
	if testing.Short() {
		t.Skip("runs 20 processes")
	}
	t.Parallel()
	harness.RequireBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")

	const n = 20
	cmds := make([]*exec.Cmd, n)
	outs := make([]bytes.Buffer, n)
	for i := range cmds {
		cmd := exec.Command(harness.Binary(), "user", "add", "--users", path, "--cost", "4", fmt.Sprintf("u%02d", i))
		cmd.Env = []string{} // nothing from the real environment
		cmd.Stdin = strings.NewReader(fmt.Sprintf("long-enough-pw%02d\n", i))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		cmds[i] = cmd
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, n)
	for i, cmd := range cmds {
		wg.Go(func() {
			<-start
			errs[i] = cmd.Run()
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("user add u%02d = %v; want success; output:\n%s", i, err, outs[i].String())
		}
	}

	users, err := usersfile.Read(path)
	if err != nil {
		t.Fatalf("usersfile.Read after %d concurrent adds = %v", n, err)
	}
	seen := make(map[string]bool)
	for _, u := range users {
		seen[u.Username] = true
	}
	if len(users) != n || len(seen) != n {
		t.Errorf("after %d concurrent user adds: %d entries, %d distinct; want %d, %d", n, len(users), len(seen), n, n)
	}
	for i := range n {
		name := fmt.Sprintf("u%02d", i)
		if !seen[name] {
			t.Errorf("after %d concurrent user adds: %s missing", n, name)
		}
	}
	servertest.CheckMode(t, path, 0o600)
	for _, name := range servertest.DirNames(t, dir) {
		if strings.HasSuffix(name, ".tmp") {
			t.Errorf("temporary file %s left behind", name)
		}
	}
}
