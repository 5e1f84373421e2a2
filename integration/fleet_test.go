package integration

import (
	"authsvc/integration/harness"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/secret"
	"authsvc/internal/testservers"
)

// A topology is one way to run a fleet: where its users and tokens live.
type topology struct {
	name string
	// prepare starts the servers every fleet of this topology shares (a
	// Redis, a PostgreSQL, a Cluster) once per test, and returns a
	// function that makes one fleet's directory and store settings.
	prepare func(t *testing.T) func(t *testing.T, dir string) (users string, serve []string)
	// n is how many instances a fleet of this topology runs for a seed.
	n func(seed uint64) int
	// file reports whether the directory is a users file (whose reload a
	// SIGHUP makes and logs).
	file bool
	// sharedStore reports whether the instances share a token store.
	sharedStore bool
	// reload, if not nil, is the reload interval's flags of every seed's
	// fleet, in place of reloadInterval's.
	reload []string
	// seeds, if not 0, is how many seeds the walk takes when the
	// environment does not say (make test's budget), in place of the
	// config's default.
	seeds int
}

// reloadFlags are the reload interval's flags of topo's fleet for seed.
func (topo topology) reloadFlags(seed uint64) []string {
	if topo.reload != nil {
		return topo.reload
	}
	return reloadInterval(seed)
}

// reloadInterval is the users file's reload interval for a seed: as users
// run it (the default, 1 s) for most, and quicker or slower for others.
func reloadInterval(seed uint64) []string {
	switch seed % 4 {
	case 1:
		return []string{"--reload-interval", "200ms"}
	case 3:
		return []string{"--reload-interval", "3s"}
	}
	return nil
}

var topologies = []topology{
	{
		name: "single",
		prepare: func(t *testing.T) func(*testing.T, string) (string, []string) {
			return func(_ *testing.T, dir string) (string, []string) {
				return filepath.Join(dir, "users.json"), nil
			}
		},
		n:    func(uint64) int { return 1 },
		file: true,
	},
	{
		name: "file+redis",
		prepare: func(t *testing.T) func(*testing.T, string) (string, []string) {
			redisURL, _, _ := testservers.Redis(t)
			return func(_ *testing.T, dir string) (string, []string) {
				return filepath.Join(dir, "users.json"), []string{"--store", redisURL, "--store-prefix", testservers.UniquePrefix()}
			}
		},
		n:           func(seed uint64) int { return 2 + int(seed%2) },
		file:        true,
		sharedStore: true,
	},
	{
		// Instances that reload as soon as the users file changes: they
		// read it during the writes of the others (issue 37: a reload
		// between an edit's cut-off record and its users file ended
		// the fresh token of a password change).
		name: "file+redis-5ms",
		prepare: func(t *testing.T) func(*testing.T, string) (string, []string) {
			redisURL, _, _ := testservers.Redis(t)
			return func(_ *testing.T, dir string) (string, []string) {
				return filepath.Join(dir, "users.json"), []string{"--store", redisURL, "--store-prefix", testservers.UniquePrefix()}
			}
		},
		n:           func(uint64) int { return 2 },
		file:        true,
		sharedStore: true,
		reload:      []string{"--reload-interval", "5ms"},
		seeds:       1, // beside file+redis's two: a few seconds more of make test
	},
	{
		name: "postgres+redis",
		prepare: func(t *testing.T) func(*testing.T, string) (string, []string) {
			redisURL, _, _ := testservers.Redis(t)
			pgURL := testservers.SharedPostgres(t)
			return func(t *testing.T, dir string) (string, []string) {
				return testservers.NewDatabase(t, pgURL), []string{"--store", redisURL, "--store-prefix", testservers.UniquePrefix()}
			}
		},
		n:           func(uint64) int { return 2 },
		sharedStore: true,
	},
	{
		name: "file+cluster",
		prepare: func(t *testing.T) func(*testing.T, string) (string, []string) {
			addrs, _ := testservers.RedisCluster(t)
			return func(_ *testing.T, dir string) (string, []string) {
				return filepath.Join(dir, "users.json"), []string{"--store", "redis+cluster://" + strings.Join(addrs, ","), "--store-prefix", testservers.UniquePrefix()}
			}
		},
		n:           func(uint64) int { return 2 },
		file:        true,
		sharedStore: true,
	},
}

// A fleet is one run's instances of authsvc, their users and their key.
type fleet struct {
	topo  topology
	dir   string
	users string   // the users file or postgres:// URL
	serve []string // the flags every instance runs with
	insts []*instance
}

// An instance is one authsvc serve process.
type instance struct {
	name   string // A, B, C: how steps and failures name it
	addr   string // host:port it listens on
	cmd    *exec.Cmd
	log    *processLog
	exited chan struct{} // closed once the process is gone
	client *http.Client
}

// serveFlags are the flags of every instance besides the topology's: a
// fast hash policy one step above the CLI's (so a user the CLI wrote is
// rehashed at its first login), and limits that stay out of the way of a
// walk's many logins.
var serveFlags = []string{
	"--cost", "5", "--max-tokens-per-user", "0",
	"--login-failures", "100000", "--user-failures", "100000", "--login-rate", "100000", "--login-burst", "100000",
	"--refusal-delay", "0", "--access-log=false",
}

// cliCost is the bcrypt cost of the hashes the user commands write: below
// serve's policy, so that their first login rehashes them.
const cliCost = "4"

// startFleet makes a fleet of n instances of topo in a new directory with
// the model's initial users, all instances sharing one secret key.
func startFleet(t *testing.T, topo topology, makeDir func(*testing.T, string) (string, []string), n int, seed uint64, m *model) (*fleet, error) {
	dir, err := os.MkdirTemp("", "authsvc-model-")
	if err != nil {
		return nil, err
	}
	f := &fleet{topo: topo, dir: dir}
	var store []string
	f.users, store = makeDir(t, dir)
	key, err := secret.Generate()
	if err != nil {
		return nil, err
	}
	keyPath := filepath.Join(dir, "fleet.key")
	if err := secret.Write(keyPath, key); err != nil {
		return nil, err
	}
	f.serve = append(append(append([]string{"--users", f.users, "--secret-key-file", keyPath}, store...), serveFlags...), topo.reloadFlags(seed)...)
	for _, name := range m.names {
		u := m.users[name]
		if !u.cur().exists {
			continue
		}
		if res := f.cli(u.cur().password, "add", name); res.code != 0 {
			f.close()
			return nil, fmt.Errorf("user add %s: %s", name, res)
		}
	}
	for i := range n {
		inst := &instance{name: string(rune('A' + i))}
		if err := f.start(inst, "127.0.0.1:0"); err != nil {
			f.close()
			return nil, err
		}
		f.insts = append(f.insts, inst)
	}
	return f, nil
}

var listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// start runs inst's process on addr and waits until it listens.
func (f *fleet) start(inst *instance, addr string) error {
	inst.log = &processLog{}
	inst.cmd = exec.Command(harness.Binary(), append([]string{"serve", "--addr", addr}, f.serve...)...)
	inst.cmd.Stderr = inst.log
	inst.cmd.Stdout = inst.log
	if err := inst.cmd.Start(); err != nil {
		return err
	}
	inst.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		cmd.Wait()
		close(exited)
	}(inst.cmd, inst.exited)
	deadline := time.After(20 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(inst.log.String()); m != nil {
			inst.addr = m[1]
			break
		}
		select {
		case <-inst.exited:
			return fmt.Errorf("instance %s exited at start:\n%s", inst.name, inst.log)
		case <-deadline:
			inst.cmd.Process.Kill()
			return fmt.Errorf("instance %s not listening after 20s:\n%s", inst.name, inst.log)
		case <-time.After(5 * time.Millisecond):
		}
	}
	inst.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	return nil
}

// kill ends inst's process with SIGKILL and waits until it is gone.
func (f *fleet) kill(inst *instance) {
	inst.cmd.Process.Kill()
	<-inst.exited
	inst.client.CloseIdleConnections()
}

// restart kills inst and starts it again, on its port or on a new one.
func (f *fleet) restart(inst *instance, samePort bool) error {
	f.kill(inst)
	addr := "127.0.0.1:0"
	if samePort {
		addr = inst.addr
	}
	old := inst.log.String()
	if err := f.start(inst, addr); err != nil {
		return err
	}
	inst.log.prefix = old + "--- restarted ---\n"
	return nil
}

// hup sends SIGHUP to inst and, with a users file, waits up to 5 s for the
// reload it logs; it reports whether it saw one.
func (f *fleet) hup(inst *instance) bool {
	before := strings.Count(inst.log.String(), "reason=SIGHUP")
	inst.cmd.Process.Signal(syscall.SIGHUP)
	if !f.topo.file {
		return false
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Count(inst.log.String(), "reason=SIGHUP") > before {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// close stops every instance and removes the fleet's directory.
func (f *fleet) close() {
	for _, inst := range f.insts {
		if inst.cmd != nil {
			inst.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-inst.exited:
			case <-time.After(15 * time.Second):
				f.kill(inst)
			}
		}
	}
	os.RemoveAll(f.dir)
}

// logs returns the end of every instance's log, for a failure's report.
func (f *fleet) logs() string {
	var b strings.Builder
	for _, inst := range f.insts {
		fmt.Fprintf(&b, "--- instance %s (%s), the last 40 lines of its log:\n%s", inst.name, inst.addr, harness.Tail(inst.log.String(), 40))
	}
	return b.String()
}

// A cliResult is how a user command ended.
type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
}

// cli runs `authsvc user SUB --users U [--cost 4] ARGS...` with stdin.
func (f *fleet) cli(stdin string, sub string, args ...string) cliResult {
	full := []string{"user", sub, "--users", f.users}
	if sub == "add" || sub == "passwd" {
		full = append(full, "--cost", cliCost)
	}
	return f.run(stdin, append(full, args...)...)
}

// tokenCLI runs `authsvc token SUB --users U ARGS...`.
func (f *fleet) tokenCLI(sub string, args ...string) cliResult {
	return f.run("", append([]string{"token", sub, "--users", f.users}, args...)...)
}

// run runs the binary with args and stdin (a line, unless "") in the
// fleet's directory.
func (f *fleet) run(stdin string, args ...string) cliResult {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, harness.Binary(), args...)
	cmd.Dir = f.dir
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin + "\n")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	return cliResult{code, stdout.String(), stderr.String()}
}

// A reply is one HTTP answer, its JSON body decoded when there is one.
type reply struct {
	status int
	body   map[string]any
	raw    string
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, strings.TrimSpace(r.raw)) }

// code is the reply's error code, "" for none.
func (r reply) code() string { s, _ := r.body["code"].(string); return s }

// str is the body's string field name.
func (r reply) str(name string) string { s, _ := r.body[name].(string); return s }

// do sends one request to inst; body, when not "", is JSON.
func (inst *instance) do(method, path, token, body string) (reply, error) {
	return inst.doAs(method, path, token, "application/json", body)
}

// doAs sends one request to inst; body, when not "", is of media type
// ctype.
func (inst *instance) doAs(method, path, token, ctype, body string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+inst.addr+path, rd)
	if err != nil {
		return reply{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		req.Header.Set("Authorization", "Token "+token)
	}
	resp, err := inst.client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return reply{}, fmt.Errorf("%s %s on %s: %w", method, path, inst.name, op)
		}
		return reply{}, fmt.Errorf("%s %s on %s: %w", method, path, inst.name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, raw: string(b)}
	json.Unmarshal(b, &r.body)
	return r, nil
}

// jsonBody is v as a JSON body.
func jsonBody(v map[string]string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// processLog is a process's output, kept whole.
type processLog struct {
	mu     sync.Mutex
	prefix string // the output of the process before a restart
	buf    bytes.Buffer
}

func (l *processLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *processLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.prefix + l.buf.String()
}
