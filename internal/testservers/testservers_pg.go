package testservers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres returns the URL of a PostgreSQL database for a test, and
// functions that stop and restart its server. With AUTHSVC_TEST_POSTGRES
// set it is that URL, and stop and restart are nil (a shared server is not
// this test's to stop). Otherwise it is a throwaway cluster of the
// PostgreSQL installed in /usr/lib/postgresql, removed when the test ends;
// without one the test is skipped, or fails when AUTHSVC_REQUIRE_POSTGRES=1
// (CI, so that a missing package cannot pass for a green run). A test that
// never stops its server takes SharedPostgres instead, which is faster.
func Postgres(t testing.TB) (url string, stop, restart func()) {
	t.Helper()
	skipShort(t, "PostgreSQL")
	if url := os.Getenv("AUTHSVC_TEST_POSTGRES"); url != "" {
		return url, nil, nil
	}
	pg := newCluster(t, "cluster-")
	if err := pg.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.stop)
	stop = pg.stop
	restart = func() {
		t.Helper()
		pg.stop()
		if err := pg.start(); err != nil {
			t.Fatal(err)
		}
	}
	return pg.url(), stop, restart
}

// newCluster returns a cluster of its own for t, not started yet: a copy
// of the test binary's initdb template (pgTemplate) in a directory of
// pgHome's, removed when t ends.
func newCluster(t testing.TB, prefix string) *pgServer {
	t.Helper()
	home, err := pgHome(postgresBin(t), postgresCred(t))
	if err != nil {
		t.Fatal(err)
	}
	pg, err := home.cluster(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pg.dir) })
	return pg
}

// postgresBin returns the directory of the newest PostgreSQL installed in
// /usr/lib/postgresql. Without one t is skipped, or fails when
// AUTHSVC_REQUIRE_POSTGRES=1.
func postgresBin(t testing.TB) string {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		if os.Getenv("AUTHSVC_REQUIRE_POSTGRES") == "1" {
			t.Fatal("no PostgreSQL in /usr/lib/postgresql/*/bin and AUTHSVC_REQUIRE_POSTGRES=1 (install the postgresql package)")
		}
		t.Skip("no PostgreSQL in /usr/lib/postgresql/*/bin; set AUTHSVC_TEST_POSTGRES or install the postgresql package")
	}
	return filepath.Dir(bins[len(bins)-1]) // the newest, as the glob sorts
}

// postgresCred returns who PostgreSQL runs as: nil, this process's user,
// unless that is root, which PostgreSQL refuses to run as; then the
// postgres user.
func postgresCred(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	pu, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root, and no postgres user to run PostgreSQL as: %v", err)
	}
	uid, _ := strconv.Atoi(pu.Uid)
	gid, _ := strconv.Atoi(pu.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// A pgServer is a throwaway cluster: where its binaries are, who it runs
// as (cred, nil for this process's user), its files, its port, and its
// server process while it runs.
type pgServer struct {
	bin                string
	cred               *syscall.Credential
	dir, data, logPath string
	port               string
	mu                 sync.Mutex // guards server
	server             *exec.Cmd
}

// url is the URL of the cluster's postgres database.
func (pg *pgServer) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable", pg.port)
}

// command returns the PostgreSQL program name with args, to run in the
// cluster's directory as cred's user.
func (pg *pgServer) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(pg.bin, name), args...)
	cmd.Dir = pg.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	return cmd
}

// start starts the server and waits until it accepts connections.
func (pg *pgServer) start() error {
	log, err := os.OpenFile(pg.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := pg.command("postgres", "-D", pg.data, "-p", pg.port, "-k", pg.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=400")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %v", err)
	}
	pg.mu.Lock()
	pg.server = cmd
	pg.mu.Unlock()
	return waitForPostgres(pg.port, pg.logPath)
}

// stop stops the server, if it runs.
func (pg *pgServer) stop() {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.server == nil {
		return
	}
	// SIGINT, the fast shutdown: SIGTERM's smart one waits for every
	// client, and the pool's connections never leave.
	pg.server.Process.Signal(syscall.SIGINT)
	pg.server.Wait()
	pg.server = nil
}

// waitForPostgres waits until the server on port accepts connections.
func waitForPostgres(port string, logPath string) error {
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%s/postgres?sslmode=disable&connect_timeout=1", port)
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, url)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("postgres on port %s not accepting connections after 15 s: %v\n%s", port, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NewDatabase creates a database with a name of its own on the server at
// url and returns its URL; it is dropped when the test ends.
func NewDatabase(t testing.TB, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("authsvc_test_%d_%d", time.Now().UnixNano(), databaseSeq.Add(1))
	if _, err := conn.Exec(ctx, "create database "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return // the server is gone already, and its data with it
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "drop database if exists "+name+" with (force)")
	})
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	u := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	if cfg.Password != "" {
		u = fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Password, cfg.Host, cfg.Port, name)
	}
	return u
}

// databaseSeq numbers the databases tests make, which may run at once.
var databaseSeq atomic.Int64
