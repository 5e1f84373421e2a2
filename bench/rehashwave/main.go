// Command rehashwave measures a switch-over's wave of first logins (issue
// 20, point 3): it writes a users file of -n users whose first -logins
// carry an imported Django hash (pbkdf2_sha256 at 1,000 iterations, so
// that the wave costs the rehashes, not the checks), starts the authsvc
// binary -bin on it, logs those users in from -c clients at once, and waits
// until every rehash is written (authsvc_rehashes_total{result="ok"}). It
// prints how many times the users file was replaced (renames onto it, seen
// by inotify), the wall time of the wave, and the server's steady and peak
// RSS (VmRSS; VmHWM after `echo 5 > clear_refs`: the server's own, not its
// hash workers'). Linux only.
//
//	go build -o /tmp/authsvc . && BENCH_PASSWORD=… go run ./bench/rehashwave -bin /tmp/authsvc
package main

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"authsvc/bench/internal/bench"
)

func main() {
	bin := flag.String("bin", "", "the authsvc binary to measure")
	n := flag.Int("n", 100_000, "users in the file")
	logins := flag.Int("logins", 1000, "users with an imported hash, each logged in once")
	clients := flag.Int("c", 8, "clients logging in at once")
	bench.Start("rehashwave")
	password := bench.Password()
	if *bin == "" || password == "" || *n < 1 || *logins < 1 || *logins > *n || *clients < 1 {
		log.Fatal("want -bin, BENCH_PASSWORD in the environment, -n ≥ 1, 1 ≤ -logins ≤ -n and -c ≥ 1")
	}
	if err := measure(*bin, *n, *logins, *clients, password); err != nil {
		log.Fatal(err)
	}
}

func measure(bin string, n, logins, clients int, password string) error {
	dir, err := os.MkdirTemp("", "rehashwave")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "users.json")
	if err := writeUsers(path, n, logins, password); err != nil {
		return err
	}
	srv, err := start(bin, path)
	if err != nil {
		return err
	}
	defer srv.stop()
	time.Sleep(5 * time.Second) // the load's garbage handed back (users.bigUsersFile)
	steady, err := bench.ProcStatus(srv.cmd.Process.Pid, "VmRSS")
	if err != nil {
		return err
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", srv.cmd.Process.Pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset VmHWM: %w", err)
	}
	renames, err := watchRenames(dir, "users.json")
	if err != nil {
		return err
	}
	start := time.Now()
	cut, err := wave(srv.base, logins, clients, password)
	if err != nil {
		return err
	}
	answered := time.Since(start)
	if err := awaitRehashes(srv.base, logins); err != nil {
		return err
	}
	written := time.Since(start)
	peak, err := bench.ProcStatus(srv.cmd.Process.Pid, "VmHWM")
	if err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond) // the last rename's event read
	fmt.Printf("%d first logins of imported users (pbkdf2_sha256, 1000 iterations) in a %d-user file (%.1f MB), %d clients, %s:\n",
		logins, n, float64(fileSize(path))/1e6, clients, filepath.Base(bin))
	fmt.Printf("  users file written %d times\n", renames.Load())
	fmt.Printf("  every login answered in %.2f s (%d cut short and tried again); every rehash written %.2f s after the first login\n",
		answered.Seconds(), cut, written.Seconds())
	fmt.Printf("  server RSS: steady %d MiB, peak during the wave %d MiB (%.2fx)\n", int64(steady)>>20, int64(peak)>>20, peak/steady)
	return nil
}

// writeUsers writes a users file of n users to path: the first imported
// with pbkdf2_sha256 hashes of password (a few, reused), the rest with
// argon2id hashes at the default policy's parameters, as bench/bigusers.
func writeUsers(path string, n, imported int, password string) error {
	const distinct = 4
	var pbkdf, argon [distinct]string
	for i := range distinct {
		salt := make([]byte, 12)
		rand.Read(salt)
		s := base64.RawURLEncoding.EncodeToString(salt) // Django's salts are alphanumeric; this one has - and _, which it takes too
		s = strings.NewReplacer("-", "a", "_", "b").Replace(s)
		sum, err := pbkdf2.Key(sha256.New, password, []byte(s), 1000, sha256.Size)
		if err != nil {
			return err
		}
		pbkdf[i] = "pbkdf2_sha256$1000$" + s + "$" + base64.StdEncoding.EncodeToString(sum)
		argon[i] = bench.Argon2id(password)
	}
	return bench.WriteUsers(path, n, func(line []byte, i int) []byte {
		hash := argon[i%distinct]
		if i < imported {
			hash = pbkdf[i%distinct]
		}
		entry, _ := json.Marshal(map[string]any{"username": username(i), "password_hash": hash, "name": "User " + strconv.Itoa(i),
			"email": username(i) + "@example.com", "groups": []string{"staff"}, "admin": false, "disabled": false})
		return append(line, entry...)
	})
}

func username(i int) string { return fmt.Sprintf("user%07d", i) }

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

// A server is the authsvc serve process measured.
type server struct {
	cmd  *exec.Cmd
	base string
	done chan struct{}
}

// start starts bin serve on path and waits until it listens.
func start(bin, path string) (*server, error) {
	logPath := path + ".log"
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "serve", "--users", path, "--addr", "127.0.0.1:0", "--access-log=false", "--reload-interval", "1h")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		data, _ := os.ReadFile(logPath)
		if m := listening.FindSubmatch(data); m != nil {
			s.base = "http://" + string(m[1])
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited before listening:\n%s", bin, data)
		case <-time.After(50 * time.Millisecond):
		}
	}
	s.stop()
	return nil, errors.New("server not listening after 5 minutes")
}

// stop ends the server with SIGTERM, as a deployment would.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// wave logs users 0 to logins-1 in from clients goroutines; a 503 (the
// hashers' queue full) is tried again, and so is a login cut short (the
// server's 30 s write timeout, which a login waiting for its rehash's
// write can reach): it returns how many were.
func wave(base string, logins, clients int, password string) (cut int64, err error) {
	var cutShort atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= logins {
					return
				}
				body, _ := json.Marshal(map[string]string{"username": username(i), "password": password})
				for {
					resp, err := client.Post(base+"/api/auth/login/", "application/json", bytes.NewReader(body))
					if err != nil {
						if cutShort.Add(1) > int64(logins) {
							errs <- err
							return
						}
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
					if resp.StatusCode != http.StatusServiceUnavailable {
						errs <- fmt.Errorf("login of %s = %d; want 200", username(i), resp.StatusCode)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return cutShort.Load(), <-errs
}

// awaitRehashes waits until the server has written want rehashes.
func awaitRehashes(base string, want int) error {
	ok := regexp.MustCompile(`(?m)^authsvc_rehashes_total\{result="ok"\} (\d+)$`)
	other := regexp.MustCompile(`(?m)^authsvc_rehashes_total\{result="(skipped|error)"\} (\d+)$`)
	for deadline := time.Now().Add(30 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if m := other.FindSubmatch(data); m != nil && string(m[2]) != "0" {
			return fmt.Errorf("rehashes %s: %s; want none", m[1], m[2])
		}
		if m := ok.FindSubmatch(data); m != nil {
			if got, _ := strconv.Atoi(string(m[1])); got >= want {
				return nil
			}
		}
	}
	return errors.New("rehashes not all written within 30 minutes")
}

// watchRenames counts the files renamed onto dir/name from now on, for as
// long as the program runs.
func watchRenames(dir, name string) (*atomic.Int64, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_MOVED_TO); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	var count atomic.Int64
	go func() {
		buf := make([]byte, 64<<10)
		for {
			k, err := syscall.Read(fd, buf)
			if err != nil {
				return
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= k; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				nameBytes := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
				if string(bytes.TrimRight(nameBytes, "\x00")) == name {
					count.Add(1)
				}
				off += syscall.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}()
	return &count, nil
}
