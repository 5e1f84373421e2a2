package faults

import (
	"authsvc/integration/harness"
	"authsvc/internal/servertest"
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"authsvc/internal/password"
	"authsvc/internal/users/usersfile"
)

// fsizeExecEnv, set to "N:PATH" in the test binary's environment, makes
// the binary lower its RLIMIT_FSIZE to N bytes and exec PATH with its own
// arguments: how TestFaultDiskFull runs authsvc with a file size limit,
// where no tmpfs can be mounted, with no helper program. (Go ignores the
// SIGXFSZ that the kernel sends: a write past the limit returns EFBIG,
// "file too large".)
const fsizeExecEnv = "AUTHSVC_TEST_FSIZE_EXEC"

func init() {
	v, ok := os.LookupEnv(fsizeExecEnv)
	if !ok {
		return
	}
	os.Unsetenv(fsizeExecEnv) // not for the hasher's workers
	n, path, _ := strings.Cut(v, ":")
	limit, err := strconv.ParseUint(n, 10, 64)
	if err == nil {
		err = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit})
	}
	if err == nil {
		err = syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ())
	}
	fmt.Fprintf(os.Stderr, "%s=%s: %v\n", fsizeExecEnv, v, err)
	os.Exit(3)
}

// A fullDisk is a directory for a users file whose next write can be made
// to fail as on a full disk.
type fullDisk struct {
	dir     string // the users file's directory
	errText string // what the failed write's error says
	// fill makes the next write of the users file at path fail; free
	// makes room again.
	fill, free func(t *testing.T, path string)
	// command is exec.Command for authsvc, run while the disk is full
	// under what makes it full; its environment holds nothing of the
	// test's.
	command func(bin string, args ...string) *exec.Cmd
}

// plainCommand runs bin with an empty environment.
func plainCommand(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{}
	return cmd
}

// tmpfsDisk mounts a 256 KiB tmpfs, unmounted when the test ends; fill
// writes a file until the tmpfs has no page left.
func tmpfsDisk(t *testing.T) (*fullDisk, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("not root")
	}
	dir := t.TempDir() // removed after the unmount below: cleanups run last-in first-out
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=256k,mode=0700"); err != nil {
		return nil, fmt.Errorf("mount -t tmpfs -o size=256k: %w", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Logf("umount %s: %v; detaching it", dir, err)
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	filler := filepath.Join(dir, "filler")
	return &fullDisk{
		dir:     dir,
		errText: "no space left on device",
		fill: func(t *testing.T, _ string) {
			t.Helper()
			f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			block := make([]byte, 4096)
			for {
				if _, err := f.Write(block); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("filling the tmpfs: %v; want ENOSPC in the end", err)
					}
					break
				}
			}
			probe := filepath.Join(dir, "probe")
			err = os.WriteFile(probe, []byte("x"), 0o600)
			os.Remove(probe)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("writing a byte to the filled tmpfs = %v; want ENOSPC", err)
			}
		},
		free: func(t *testing.T, _ string) {
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
		},
		command: plainCommand,
	}, nil
}

// fsizeDisk is a directory of t.TempDir's where fill sets the limit of
// the commands that follow to half the users file's size.
func fsizeDisk(t *testing.T) *fullDisk {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var limit int64 // 0: none
	return &fullDisk{
		dir:     t.TempDir(),
		errText: "file too large",
		fill: func(t *testing.T, path string) {
			t.Helper()
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			limit = info.Size() / 2
		},
		free: func(*testing.T, string) { limit = 0 },
		command: func(bin string, args ...string) *exec.Cmd {
			if limit == 0 {
				return plainCommand(bin, args...)
			}
			cmd := exec.Command(self, args...)
			cmd.Env = []string{fmt.Sprintf("%s=%d:%s", fsizeExecEnv, limit, bin)}
			return cmd
		},
	}
}

// TestFaultDiskFull: a full disk under the users file during `authsvc
// user passwd` and during a login's rehash leaves the file whole (it
// parses, holds the same users, byte for byte as it was) and gives a clear
// one-line error: passwd exits 1 naming the problem; the login still
// answers 200 and the server logs the failed write. Once there is room,
// both write. On a small tmpfs where one can be mounted (root), and with
// RLIMIT_FSIZE always, which also stands in where no tmpfs can be mounted.
func TestFaultDiskFull(t *testing.T) {
	harness.Long(t)
	t.Parallel()
	bin := buildAuthsvc(t)
	ran := 0
	t.Run("tmpfs", func(t *testing.T) {
		d, err := tmpfsDisk(t)
		if err != nil {
			t.Skipf("no tmpfs here (%v): the fsize subtest stands in", err)
		}
		ran++
		t.Run("passwd", func(t *testing.T) { testDiskFullPasswd(t, bin, d) })
		t.Run("rehash", func(t *testing.T) { testDiskFullRehash(t, bin, d) })
	})
	t.Run("fsize", func(t *testing.T) {
		ran++
		d := fsizeDisk(t)
		t.Run("passwd", func(t *testing.T) { testDiskFullPasswd(t, bin, d) })
		t.Run("rehash", func(t *testing.T) { testDiskFullRehash(t, bin, d) })
	})
	if ran == 0 {
		requireOrSkip(t, "neither a tmpfs nor RLIMIT_FSIZE could make a full disk")
	}
}

// writeDiskUsers writes testUsers to name in d's directory and returns its
// path and content.
func writeDiskUsers(t *testing.T, d *fullDisk, name string) (string, []byte) {
	t.Helper()
	path := filepath.Join(d.dir, name)
	if err := usersfile.Write(path, servertest.TestUsers(t)); err != nil {
		t.Fatal(err)
	}
	content, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, content
}

// checkUsersFileWhole checks that the users file at path is byte for byte
// want, still parses with testUsers' names, and that no temporary file of
// a failed write was left beside it.
func checkUsersFileWhole(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("users file after the failed write: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("users file after the failed write: %d bytes, not the %d it held:\n%s", len(got), len(want), got)
	}
	list, err := usersfile.Read(path)
	if err != nil {
		t.Errorf("users file after the failed write does not parse: %v", err)
	}
	var names []string
	for _, u := range list {
		names = append(names, u.Username)
	}
	if strings.Join(names, ",") != "alice,bob,carol" {
		t.Errorf("users after the failed write: %q; want alice, bob, carol", names)
	}
	for _, name := range servertest.DirNames(t, filepath.Dir(path)) {
		if strings.HasSuffix(name, ".tmp") {
			t.Errorf("temporary file %s left beside the users file", name)
		}
	}
}

// userHash returns username's stored hash in the users file at path.
func userHash(t *testing.T, path, username string) string {
	t.Helper()
	list, err := usersfile.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range list {
		if u.Username == username {
			return u.PasswordHash
		}
	}
	t.Fatalf("no user %s in %s", username, path)
	return ""
}

func testDiskFullPasswd(t *testing.T, bin string, d *fullDisk) {
	path, before := writeDiskUsers(t, d, "passwd.json")
	oldHash := userHash(t, path, "alice")
	passwd := func() (code int, stdout, stderr string) {
		t.Helper()
		cmd := d.command(bin, "user", "passwd", "--users", path, "alice") // argon2id, the default: no warning about a test cost
		cmd.Stdin = strings.NewReader("a brand-new password\n")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("user passwd: %v", err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}

	d.fill(t, path)
	code, stdout, stderr := passwd()
	if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") || !strings.Contains(stderr, d.errText) ||
		!strings.Contains(stderr, path) || strings.Contains(stderr, ".tmp") {
		t.Errorf("user passwd on a full disk = exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout and one line naming the users file (or its cut-offs), not a temporary file, and saying %q", code, stdout, stderr, d.errText)
	}
	checkUsersFileWhole(t, path, before)
	t.Logf("user passwd on a full disk: exit %d, %s", code, strings.TrimSpace(stderr))

	d.free(t, path)
	if code, stdout, stderr := passwd(); code != 0 {
		t.Fatalf("user passwd with room again = exit %d, %q %q; want 0", code, stdout, stderr)
	}
	if h := userHash(t, path, "alice"); h == oldHash {
		t.Errorf("alice's hash after a user passwd with room again is the old one")
	} else if ph, err := password.ParseHash(h); err != nil || !ph.Verify([]byte("a brand-new password")) {
		t.Errorf("alice's hash after a user passwd with room again does not match the new password (%v)", err)
	}
}

func testDiskFullRehash(t *testing.T, bin string, d *fullDisk) {
	path, before := writeDiskUsers(t, d, "rehash.json")
	oldHash, bobHash := userHash(t, path, "alice"), userHash(t, path, "bob")
	// --cost 5: alice's bcrypt hash at cost 4 is outside the policy, so a
	// successful login rewrites it.
	serve := func() (*harness.ServerProcess, *servertest.LineLog) {
		t.Helper()
		log := servertest.NewLineLog()
		cmd := d.command(bin, "serve", "--addr", "127.0.0.1:0", "--users", path, "--cost", "5", "--reload-interval", "100ms")
		cmd.Stderr = log // a pipe: no file size limit applies to it
		return harness.StartServerProcess(t, cmd, log.String), log
	}
	rehashFailed := regexp.MustCompile(`level=WARN msg="rehash on login failed; the old hash stays" username=alice err=.*` + d.errText + `.*`)
	rehashed := regexp.MustCompile(`msg="rehashed on login" username=alice`)

	d.fill(t, path)
	server, log := serve()
	token := servertest.LoginToken(t, server.Base, "alice", "alice-pw") // 200, or the test stops here
	m := log.WaitFor(t, rehashFailed)
	t.Logf("login on a full disk: 200, and the server logged: %s", m[0])
	if rehashed.MatchString(log.String()) {
		t.Errorf("server log says the rehash was written on a full disk:\n%s", log)
	}
	checkUsersFileWhole(t, path, before)
	if code, body := servertest.GetInfo(t, server.Base, token, ""); code != http.StatusOK {
		t.Errorf("info with the token of the login whose rehash failed = %d %s; want 200", code, body)
	}
	server.Kill()

	d.free(t, path)
	server, log = serve()
	servertest.LoginToken(t, server.Base, "alice", "alice-pw")
	log.WaitFor(t, rehashed)
	h, err := password.ParseHash(userHash(t, path, "alice"))
	if err != nil || h.Cost != 5 {
		t.Errorf("alice's hash after a login with room again = %v, %v; want bcrypt at cost 5", h, err)
	}
	if userHash(t, path, "alice") == oldHash || userHash(t, path, "bob") != bobHash {
		t.Errorf("the rehash with room again did not rewrite alice's hash alone")
	}
	server.Kill()
}
