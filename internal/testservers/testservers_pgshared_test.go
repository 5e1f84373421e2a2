package testservers

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSharedPostgres: two calls give two databases on one server, each
// usable, and what one test writes the other does not see.
func TestSharedPostgres(t *testing.T) {
	a, b := SharedPostgres(t), SharedPostgres(t)
	if a == b {
		t.Fatalf("SharedPostgres returned %s twice; want a database each", a)
	}
	ctx := context.Background()
	var ports []uint16
	for i, url := range []string{a, b} {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		ports = append(ports, conn.Config().Port)
		if i == 0 {
			if _, err := conn.Exec(ctx, "create table t (x int)"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var n int
		if err := conn.QueryRow(ctx, "select count(*) from pg_tables where tablename = 't'").Scan(&n); err != nil || n != 0 {
			t.Errorf("the second database's table t: %d, %v; want none", n, err)
		}
	}
	if os.Getenv("AUTHSVC_TEST_POSTGRES") == "" && ports[0] != ports[1] {
		t.Errorf("SharedPostgres's databases on ports %v; want one server", ports)
	}
}

// TestSharedPostgresReaped: when a test binary that used the shared
// cluster (and a cluster of its own) exits, without stopping either,
// their servers stop and their directory goes.
func TestSharedPostgresReaped(t *testing.T) {
	skipShort(t, "PostgreSQL")
	if os.Getenv("AUTHSVC_TEST_POSTGRES") != "" {
		t.Skip("AUTHSVC_TEST_POSTGRES: no cluster of the tests' own")
	}
	if os.Getenv("AUTHSVC_TESTSERVERS_CHILD") == "1" {
		SharedPostgres(t)
		url, _, _ := Postgres(t)
		os.Stdout.WriteString("home " + home.dir + "\n" + "url " + url + "\n")
		os.Exit(0) // no cleanup: the reaper's work
	}
	postgresBin(t) // skip, or fail, without PostgreSQL
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestSharedPostgresReaped$")
	cmd.Env = append(os.Environ(), "AUTHSVC_TESTSERVERS_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var dir, url string
	for sc := bufio.NewScanner(strings.NewReader(string(out))); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "home "); ok {
			dir = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "url "); ok {
			url = v
		}
	}
	if dir == "" || url == "" {
		t.Fatalf("child's output %q: no home and url", out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := os.Stat(dir)
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there 20 s after its test binary exited (%v)", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, url+"&connect_timeout=1"); err == nil {
		conn.Close(ctx)
		t.Errorf("%s still accepts connections after its test binary exited", url)
	}
}
