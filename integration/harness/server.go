package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"authsvc/internal/cli"
	"authsvc/internal/servertest"
)

// ServerProcess is the server running as an OS process of its own.
type ServerProcess struct {
	Cmd    *exec.Cmd
	Base   string        // http://127.0.0.1:PORT
	Log    func() string // its stderr so far
	Exited chan struct{} // closed once it has exited
}

// StartServerProcess starts cmd, a server whose stderr log returns (the
// file it writes to, or a LineLog), and waits for its "listening" line.
// It is killed when the test ends if it still runs.
func StartServerProcess(t *testing.T, cmd *exec.Cmd, log func() string) *ServerProcess {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	p := &ServerProcess{Cmd: cmd, Log: log, Exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.Exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.Exited
	})
	listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listening.FindStringSubmatch(log()); m != nil {
			p.Base = "http://" + m[1]
			return p
		}
		select {
		case <-p.Exited:
			t.Fatalf("%s exited before listening (%v); its stderr:\n%s", cmd.Path, cmd.ProcessState, log())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening after 30 s; its stderr:\n%s", cmd.Path, log())
		}
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *ServerProcess) Kill() {
	p.Cmd.Process.Kill()
	<-p.Exited
}

// StartServer runs the whole program in-process on 127.0.0.1:0 and returns
// its base URL, its log and a function that stops it and returns run's error.
func StartServer(t *testing.T, env map[string]string, args ...string) (string, *servertest.LineLog, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := servertest.NewLineLog()
	done := make(chan error, 1)
	getenv := func(k string) string { return env[k] }
	go func() {
		done <- cli.Run(ctx, append([]string{"authsvc", "serve", "--addr", "127.0.0.1:0"}, args...), getenv, strings.NewReader(""), io.Discard, stderr)
	}()
	m := stderr.WaitFor(t, regexp.MustCompile(`msg=listening addr=(\S+)`))
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			t.Fatal("run did not return within 15s of cancel")
			return nil
		}
	}
	t.Cleanup(func() { cancel() })
	return "http://" + m[1], stderr, stop
}

// ServeBinary is StartServer with the server a process of the binary
// Main built, without the race detector, as in production: for the
// tests whose figure is the server's speed, and those whose hashes the
// race detector would make minutes of work. stop sends SIGTERM, as an
// operator does, and returns the error of an exit status other than 0.
func ServeBinary(t *testing.T, env map[string]string, args ...string) (string, *servertest.LineLog, func() error) {
	t.Helper()
	RequireBinary(t)
	cmd := exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = environ(env)
	log := servertest.NewLineLog()
	cmd.Stderr = log
	p := StartServerProcess(t, cmd, log.String)
	stop := func() error {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Exited:
		case <-time.After(15 * time.Second):
			t.Fatal("serve did not exit within 15s of SIGTERM")
		}
		if !cmd.ProcessState.Success() {
			return fmt.Errorf("serve: %v", cmd.ProcessState)
		}
		return nil
	}
	return p.Base, log, stop
}

// RunBinary is RunCLI with the command a process of the binary TestMain
// built (see ServeBinary), its environment env alone, and the same
// AUTHSVC_PASSWORD_MIN_LENGTH of 1 unless env says otherwise.
func RunBinary(t *testing.T, stdin string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	RequireBinary(t)
	cmd := exec.Command(binary, args...)
	cmd.Env = environ(env)
	if _, ok := env["AUTHSVC_PASSWORD_MIN_LENGTH"]; !ok {
		cmd.Env = append(cmd.Env, "AUTHSVC_PASSWORD_MIN_LENGTH=1")
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatalf("authsvc %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// environ is env as a process's environment.
func environ(env map[string]string) []string {
	list := []string{}
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	return list
}
