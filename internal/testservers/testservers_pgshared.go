package testservers

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// SharedPostgres returns the URL of a new database of its own for t, on
// the test binary's shared cluster: one PostgreSQL started at the first
// call and stopped when the test binary exits, so that a package's tests
// pay for initdb and a server start once, not once each. The database is
// dropped when t ends. A test that stops or restarts its server takes
// Postgres instead. With AUTHSVC_TEST_POSTGRES set the database is made on
// that server. Without PostgreSQL the test is skipped, or fails when
// AUTHSVC_REQUIRE_POSTGRES=1.
//
// What the tests on the shared cluster share is the server: roles,
// settings and connections (max_connections is 400). A test that counts
// or kills backends filters by current_database().
func SharedPostgres(t testing.TB) string {
	t.Helper()
	skipShort(t, "PostgreSQL")
	if url := os.Getenv("AUTHSVC_TEST_POSTGRES"); url != "" {
		return NewDatabase(t, url)
	}
	bin, cred := postgresBin(t), postgresCred(t)
	shared.once.Do(func() { shared.url, shared.err = startShared(bin, cred) })
	if shared.err != nil {
		t.Fatalf("the shared PostgreSQL cluster: %v", shared.err)
	}
	return NewDatabase(t, shared.url)
}

// shared is the test binary's shared cluster, started once.
var shared struct {
	once sync.Once
	url  string
	err  error
}

// startShared starts the shared cluster and returns its URL. It is never
// stopped by the test binary: pgHome's reaper stops it when the binary
// exits.
func startShared(bin string, cred *syscall.Credential) (string, error) {
	home, err := pgHome(bin, cred)
	if err != nil {
		return "", err
	}
	pg, err := home.cluster("shared-")
	if err != nil {
		return "", err
	}
	if err := pg.start(); err != nil {
		return "", err
	}
	return pg.url(), nil
}

// A pgHomeDir is the test binary's directory of PostgreSQL clusters: the
// template initdb made, and each cluster, a copy of it.
type pgHomeDir struct {
	dir      string
	bin      string
	cred     *syscall.Credential
	template string // initdb's data directory, copied by each cluster
}

var (
	homeOnce sync.Once
	home     *pgHomeDir
	homeErr  error
	// reaperStdin is the write end of the reaper's stdin, held open for
	// as long as the test binary runs (a package variable, so that no
	// finalizer closes it).
	reaperStdin *os.File
)

// pgHome returns the test binary's home of PostgreSQL clusters, made at
// the first call: a directory readable by cred's user, with a database
// cluster initdb made in it once (initdb takes seconds; a copy of its
// output, a fraction of one). A reaper process waits for the test binary
// to exit, however it exits (a panic of go test's -timeout included), then
// stops every server still running there and removes the directory.
func pgHome(bin string, cred *syscall.Credential) (*pgHomeDir, error) {
	homeOnce.Do(func() { home, homeErr = makeHome(bin, cred) })
	return home, homeErr
}

// reaperScript is the reaper: $1 is the home. Its stdin's end means the
// test binary has gone; a server's postmaster.pid holds its pid, and is
// removed when it has stopped (for 10 s at the most).
const reaperScript = `read -r _
for f in "$1"/*/data/postmaster.pid; do
	[ -f "$f" ] && kill -INT "$(head -n 1 "$f")" 2>/dev/null
done
i=0
while [ $i -lt 200 ] && ls "$1"/*/data/postmaster.pid >/dev/null 2>&1; do
	sleep 0.05
	i=$((i + 1))
done
rm -rf "$1"
`

func makeHome(bin string, cred *syscall.Credential) (*pgHomeDir, error) {
	dir, err := os.MkdirTemp("", "authsvc-pg-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	reaper := exec.Command("/bin/sh", "-c", reaperScript, "reaper", dir)
	// its own process group, so that a ^C to go test reaches it only
	// through its stdin's end
	reaper.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	w, err := reaper.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := reaper.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start the clusters' reaper: %v", err)
	}
	reaperStdin = w.(*os.File)
	go reaper.Wait()

	h := &pgHomeDir{dir: dir, bin: bin, cred: cred, template: filepath.Join(dir, "template")}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", h.template, "--auth=trust", "-U", "postgres",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return h, nil
}

// cluster makes a new cluster in the home, a copy of the template, on a
// free port, not started.
func (h *pgHomeDir) cluster(prefix string) (*pgServer, error) {
	dir, err := os.MkdirTemp(h.dir, prefix)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if h.cred != nil {
		if err := os.Chown(dir, int(h.cred.Uid), int(h.cred.Gid)); err != nil {
			return nil, err
		}
	}
	pg := &pgServer{bin: h.bin, cred: h.cred, dir: dir, data: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "postgres.log")}
	cp := exec.Command("/bin/cp", "-a", h.template, pg.data)
	cp.SysProcAttr = &syscall.SysProcAttr{Credential: h.cred}
	if out, err := cp.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copy the initdb template: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	_, pg.port, _ = net.SplitHostPort(l.Addr().String())
	l.Close()
	return pg, nil
}
