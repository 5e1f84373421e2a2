package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"authsvc/bench/internal/bench"
)

// A server is an authsvc serve process this driver started.
type server struct {
	cmd  *exec.Cmd
	url  string
	logs string // its stderr and stdout
	done chan error
}

// startServer starts `authsvc serve` with args on a free loopback port, its
// output in bench/out/NAME.log, and waits until /readyz answers 200 (users
// loaded, store reachable: serve listens only once the users are in). It
// returns how long that took from the exec.
func (d *driver) startServer(name string, args ...string) (*server, time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logs := filepath.Join(filepath.Dir(d.cfg.out), name+".log")
	logFile, err := os.Create(logs)
	if err != nil {
		return nil, 0, err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(d.ctx, d.cfg.authsvc, append([]string{"serve", "--addr", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Dies with the driver, however the driver ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	s := &server{cmd: cmd, url: "http://" + addr, logs: logs, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	client := http.Client{Timeout: time.Second}
	for time.Since(start) < 3*time.Minute {
		resp, err := client.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, time.Since(start), nil
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			return nil, 0, fmt.Errorf("%s exited before /readyz answered 200 (%v): %s", name, err, tail(logs))
		case <-d.ctx.Done():
			s.stop()
			return nil, 0, d.ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.stop()
	return nil, 0, fmt.Errorf("%s: /readyz not 200 within 3 minutes: %s", name, tail(logs))
}

// stop ends the server: SIGTERM, then SIGKILL after 15 s.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		s.done <- <-s.done
	}
}

// tail is the last line of a log file, to say why a server failed.
func tail(path string) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return lines[len(lines)-1]
}

// descendants returns the processes below pid (authsvc's hash workers).
func descendants(pid int) []int {
	children := make(map[int][]int)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command, which is in parentheses: state, ppid.
		i := strings.LastIndexByte(string(data), ')')
		if f := strings.Fields(string(data[i+1:])); i > 0 && len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	next := []int{pid}
	for len(next) > 0 {
		p := next[0]
		next = next[1:]
		out = append(out, children[p]...)
		next = append(next, children[p]...)
	}
	return out
}

// memory is a server's memory: its own and its worker processes', in bytes.
type memory struct {
	server, workers float64
	nworkers        int
}

func (m memory) total() float64 { return m.server + m.workers }

// String says how the total is made up.
func (m memory) String() string {
	return fmt.Sprintf("%.1f MB: server %.1f MB + %d hash workers %.1f MB", m.total()/1e6, m.server/1e6, m.nworkers, m.workers/1e6)
}

// treeMemory reads key (VmRSS or VmHWM) of pid and of every process below it.
func treeMemory(pid int, key string) (memory, error) {
	var m memory
	var err error
	if m.server, err = bench.ProcStatus(pid, key); err != nil {
		return m, err
	}
	for _, p := range descendants(pid) {
		if v, err := bench.ProcStatus(p, key); err == nil {
			m.workers += v
			m.nworkers++
		}
	}
	return m, nil
}

// resetPeaks resets VmHWM to the current RSS of pid and every process below
// it ("5" to clear_refs, proc(5)).
func resetPeaks(pid int) error {
	for _, p := range append([]int{pid}, descendants(pid)...) {
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p), []byte("5"), 0); err != nil {
			return fmt.Errorf("reset the RSS peak of %d: %v", p, err)
		}
	}
	return nil
}

// bigResult is the users-file part: a file of n users.
type bigResult struct {
	n                 int
	fileBytes         int64
	load              time.Duration // exec to /readyz 200
	steady, peak      memory        // VmRSS after load, VmHWM during a reload
	reload            time.Duration // SIGHUP to the reload counted in /metrics
	userAdd           time.Duration
	err, userAddError error
}

// bigUsers measures authsvc with a users file of cfg.bigN users: load time,
// steady RSS, the RSS peak of a SIGHUP reload, then (server stopped) the
// wall time of one `user add` into the file.
func (d *driver) bigUsers() bigResult {
	r := bigResult{n: d.cfg.bigN}
	st, err := os.Stat(d.cfg.bigUsers)
	if err != nil {
		r.err = err
		return r
	}
	r.fileBytes = st.Size()
	d.logf("== users file of %d users (%s, %.0f MB): load, RSS, reload peak", r.n, d.cfg.bigUsers, float64(r.fileBytes)/1e6)
	s, load, err := d.startServer("big-users", "--users", d.cfg.bigUsers)
	if err != nil {
		r.err = err
		return r
	}
	r.load = load
	r.err = d.measureReload(s, &r)
	s.stop()
	d.logf("big    load %s  steady RSS %s  reload %s  peak %s", r.load.Round(time.Millisecond), r.steady, r.reload.Round(time.Millisecond), r.peak)

	// A new username each run: the file may be reused.
	name := fmt.Sprintf("added%d", time.Now().UnixNano()%1e9)
	cmd := exec.CommandContext(d.ctx, d.cfg.authsvc, "user", "add", "--users", d.cfg.bigUsers, name)
	cmd.Stdin = strings.NewReader(d.password + "\n")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r.userAdd = time.Since(start)
	if err != nil {
		r.userAddError = fmt.Errorf("user add: %v: %s", err, strings.TrimSpace(string(out)))
	}
	d.logf("big    user add %s (%s)", r.userAdd.Round(time.Millisecond), strings.TrimSpace(string(out)))
	return r
}

// measureReload reads s's steady RSS, then resets its peak, sends SIGHUP,
// waits for the reload to be counted and reads the peak.
func (d *driver) measureReload(s *server, r *bigResult) error {
	pid := s.cmd.Process.Pid
	if err := d.sleep(3 * time.Second); err != nil { // settle: the load's garbage collected
		return err
	}
	var err error
	if r.steady, err = treeMemory(pid, "VmRSS"); err != nil {
		return err
	}
	const okReloads = `authsvc_users_reloads_total{result="ok"}`
	const failedReloads = `authsvc_users_reloads_total{result="error"}`
	body, err := get(s.url + "/metrics")
	if err != nil {
		return err
	}
	before, ok := metricValue(body, okReloads)
	if !ok {
		return errors.New("no " + okReloads + " in /metrics")
	}
	failedBefore, _ := metricValue(body, failedReloads)
	if err := resetPeaks(pid); err != nil {
		return err
	}
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return err
	}
	for {
		if err := d.sleep(20 * time.Millisecond); err != nil {
			return err
		}
		body, err := get(s.url + "/metrics")
		if err != nil {
			continue // busy reloading
		}
		if v, _ := metricValue(body, okReloads); v > before {
			break
		}
		if v, _ := metricValue(body, failedReloads); v > failedBefore {
			return fmt.Errorf("the reload failed: %s", tail(s.logs))
		}
		if time.Since(start) > 3*time.Minute {
			return errors.New("no reload counted within 3 minutes of SIGHUP")
		}
	}
	r.reload = time.Since(start)
	r.peak, err = treeMemory(pid, "VmHWM")
	return err
}

// pgResult is the PostgreSQL part.
type pgResult struct {
	n      int
	skip   string // why it was not measured
	err    error
	imp    time.Duration // user import --from file
	start  time.Duration // exec to /readyz 200
	rss    memory        // after a short /info and login load
	logins loginResult
	info   wrkResult
	idle   idleResult
	page   pageResult // the admin API's listing
	junk   pgJunkResult
}

// idleResult is the pause after the PostgreSQL part's load: the hash
// workers return their memory a second after their last check and exit
// after --hash-worker-idle (30 s by default); the next login starts one.
type idleResult struct {
	err      error
	wait     time.Duration // from the end of the load until no worker is left
	rss      memory        // then
	cold     time.Duration // the first login after it: a worker starts
	warm     time.Duration // median of 5 logins right after, both workers running
	released time.Duration // one login after a 3 s pause: workers running, their memory returned
}

// postgres imports cfg.pgN users into the database at cfg.pgURL, then
// measures authsvc serving them: start time, and RSS after a short /info
// and login load.
func (d *driver) postgres() pgResult {
	r := pgResult{n: d.cfg.pgN, skip: d.cfg.pgSkip}
	if r.skip != "" {
		return r
	}
	d.logf("== PostgreSQL, %d users: import, start, RSS under load", r.n)
	cmd := exec.CommandContext(d.ctx, d.cfg.authsvc, "user", "import", "--users", d.cfg.pgURL, "--from", "file", d.cfg.pgUsers)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r.imp = time.Since(start)
	if err != nil {
		r.err = fmt.Errorf("user import: %v: %s", err, strings.TrimSpace(string(out)))
		return r
	}
	d.logf("pg     %s in %s", strings.TrimSpace(string(out)), r.imp.Round(time.Millisecond))
	if err := d.addAdmin(); err != nil {
		r.err = err
		return r
	}
	s, startTime, err := d.startServer("pg-users", "--users", d.cfg.pgURL)
	if err != nil {
		r.err = err
		return r
	}
	defer s.stop()
	r.start = startTime
	r.page = d.adminPage(s, r.n)
	// Logins of as many users as clients, then /info with one of their tokens.
	t := &target{name: "authsvc-pg", url: s.url}
	users := []string{"user0000001", "user0000002", "user0000003", "user0000004"}
	if r.logins, err = d.loginLoad("login, PostgreSQL", t, users, len(users), 2*time.Second); err != nil {
		r.err = err
		return r
	}
	if t.token, err = d.login(t.url, users[0]); err != nil {
		r.err = err
		return r
	}
	if r.info, err = d.wrk("pg", t, false, d.cfg.conns, 2*time.Second); err != nil {
		r.err = err
		return r
	}
	loadEnd := time.Now()
	if err := d.sleep(time.Second); err != nil {
		r.err = err
		return r
	}
	r.rss, r.err = treeMemory(s.cmd.Process.Pid, "VmRSS")
	d.logf("pg     start %s  RSS %s", r.start.Round(time.Millisecond), r.rss)
	if r.err == nil {
		r.idle = d.pauseLogins(s, users[0], loadEnd)
		r.junk = d.pgJunk(s)
	}
	return r
}

// pauseLogins waits until s has no hash worker left (they exit when idle),
// reads the RSS then, and times the first login after the pause against
// warm ones.
func (d *driver) pauseLogins(s *server, username string, loadEnd time.Time) idleResult {
	var r idleResult
	pid := s.cmd.Process.Pid
	for len(descendants(pid)) > 0 {
		if time.Since(loadEnd) > 3*time.Minute {
			r.err = fmt.Errorf("hash workers %v still running 3 minutes after the load", descendants(pid))
			return r
		}
		if r.err = d.sleep(100 * time.Millisecond); r.err != nil {
			return r
		}
	}
	r.wait = time.Since(loadEnd)
	if r.rss, r.err = treeMemory(pid, "VmRSS"); r.err != nil {
		return r
	}
	timed := func() (time.Duration, error) {
		start := time.Now()
		_, err := d.login(s.url, username)
		return time.Since(start), err
	}
	if r.cold, r.err = timed(); r.err != nil {
		return r
	}
	// The pool hands a job to the checker that has waited longest: this
	// login starts the second worker, so the timed ones find both running.
	if _, r.err = timed(); r.err != nil {
		return r
	}
	var warm []float64
	for range 5 {
		took, err := timed()
		if err != nil {
			r.err = err
			return r
		}
		warm = append(warm, float64(took))
	}
	r.warm = time.Duration(median(warm))
	if r.err = d.sleep(3 * time.Second); r.err != nil {
		return r
	}
	r.released, r.err = timed()
	d.logf("pg     workers gone %s after the load; RSS %s; login after it %s, warm %s, after a 3 s pause %s",
		r.wait.Round(time.Second), r.rss, r.cold.Round(time.Millisecond/10), r.warm.Round(time.Millisecond/10), r.released.Round(time.Millisecond/10))
	return r
}

// login logs username in at url and returns the token.
func (d *driver) login(url, username string) (string, error) {
	body := fmt.Sprintf(`{"username":%q,"password":%q}`, username, d.password)
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/api/auth/login/", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	_, rest, ok := strings.Cut(string(data), `"token":"`)
	token, _, _ := strings.Cut(rest, `"`)
	if resp.StatusCode != http.StatusOK || !ok || token == "" {
		return "", fmt.Errorf("login %s at %s: %s", username, url, resp.Status)
	}
	return token, nil
}
