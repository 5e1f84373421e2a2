package secret

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const sampleHex = "00112233445566778899aabbccddeeff0123456789abcdeffedcba9876543210"

func TestParse(t *testing.T) {
	upper := strings.ToUpper(sampleHex)
	mixed := sampleHex[:32] + upper[32:]
	tests := []struct {
		name, content string
		ok            bool
	}{
		{"bare", sampleHex, true},
		{"newline", sampleHex + "\n", true},
		{"crlf", sampleHex + "\r\n", true},
		{"upper case", upper, true},
		{"mixed case", mixed + "\n", true},
		{"empty", "", false},
		{"newline only", "\n", false},
		{"crlf only", "\r\n", false},
		{"63 hex", sampleHex[:63], false},
		{"63 hex and newline", sampleHex[:63] + "\n", false},
		{"65 hex", sampleHex + "0", false},
		{"65 hex and newline", sampleHex + "0\n", false},
		{"128 hex", sampleHex + sampleHex, false},
		{"two newlines", sampleHex + "\n\n", false},
		{"crlf crlf", sampleHex + "\r\n\r\n", false},
		{"cr only", sampleHex + "\r", false},
		{"lf cr", sampleHex + "\n\r", false},
		{"leading newline", "\n" + sampleHex, false},
		{"leading space", " " + sampleHex, false},
		{"trailing space", sampleHex + " ", false},
		{"space then newline", sampleHex + " \n", false},
		{"tab", sampleHex[:32] + "\t" + sampleHex[33:], false},
		{"non-hex g", sampleHex[:10] + "g" + sampleHex[11:], false},
		{"non-hex NUL", sampleHex[:63] + "\x00", false},
		{"0x prefix", "0x" + sampleHex[2:], false},
		{"byte order mark", "\ufeff" + sampleHex, false},
		{"non-ASCII", sampleHex[:62] + "é", false},
		{"base64 of 32 bytes", "ABEiM0RVZneImaq7zN3u/wEjRWeJq83v/ty6mHZUMhA=", false},
	}
	want, _ := hex.DecodeString(sampleHex)
	for _, tt := range tests {
		raw, problem := parse([]byte(tt.content))
		if !tt.ok {
			if problem == "" {
				t.Errorf("%s: parse(%q) = %x; want a problem", tt.name, tt.content, raw)
			}
			continue
		}
		if problem != "" || !bytes.Equal(raw, want) {
			t.Errorf("%s: parse(%q) = %x, %q; want %x", tt.name, tt.content, raw, problem, want)
		}
	}
}

// writeFile writes content to a new file of dir with mode perm (whatever
// the umask) and returns its path.
func writeFile(t *testing.T, dir, content string, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, "authsvc.key")
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad(t *testing.T) {
	want, _ := hex.DecodeString(sampleHex)
	for _, perm := range []os.FileMode{0o600, 0o400, 0o640, 0o440} {
		path := writeFile(t, t.TempDir(), sampleHex+"\n", perm)
		k, err := Load(path)
		if err != nil || !bytes.Equal(k.b().raw[:], want) {
			t.Errorf("Load(mode %#o) = %v, %v; want the sample key", perm, k, err)
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	upper := strings.ToUpper(sampleHex)
	tests := []struct {
		name, content string
		perm          os.FileMode
		want          error
	}{
		{"world-readable", sampleHex + "\n", 0o644, ErrFileMode},
		{"world-readable only", sampleHex + "\n", 0o604, ErrFileMode},
		{"group-writable", sampleHex + "\n", 0o660, ErrFileMode},
		{"world-writable", sampleHex + "\n", 0o602, ErrFileMode},
		{"everyone", sampleHex + "\n", 0o777, ErrFileMode},
		{"63 hex", sampleHex[:63] + "\n", 0o600, ErrMalformedFile},
		{"65 hex", upper + "A\n", 0o600, ErrMalformedFile},
		{"two newlines", sampleHex + "\n\n", 0o600, ErrMalformedFile},
		{"empty", "", 0o600, ErrMalformedFile},
		{"non-hex", "z" + sampleHex[1:], 0o600, ErrMalformedFile},
		{"long", strings.Repeat(sampleHex, 100), 0o600, ErrMalformedFile},
	}
	for _, tt := range tests {
		path := writeFile(t, t.TempDir(), tt.content, tt.perm)
		k, err := Load(path)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: Load = %v, %v; want %v", tt.name, k, err, tt.want)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, path) {
			t.Errorf("%s: Load error %q does not name the file %s", tt.name, msg, path)
		}
		// No run of the content, in either case, may reach the message.
		for _, c := range []string{sampleHex, upper} {
			for i := 0; i+6 <= len(c); i++ {
				if strings.Contains(msg, c[i:i+6]) {
					t.Errorf("%s: Load error %q holds %q of the key", tt.name, msg, c[i:i+6])
					break
				}
			}
		}
	}

	dir := t.TempDir()
	if _, err := Load(dir); !errors.Is(err, ErrFileMode) {
		t.Errorf("Load(a directory) error = %v; want ErrFileMode", err)
	}
	missing := filepath.Join(dir, "none.key")
	if _, err := Load(missing); !errors.Is(err, fs.ErrNotExist) || strings.Count(err.Error(), missing) != 1 {
		t.Errorf("Load(missing) error = %v; want fs.ErrNotExist naming the file once", err)
	}
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "authsvc.key")
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(path, k); err != nil {
		t.Fatalf("Write = %v; want nil", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode(); got != 0o600 {
		t.Errorf("Write made mode %v; want -rw-------", got)
	}
	data, _ := os.ReadFile(path)
	if want := hex.EncodeToString(k.b().raw[:]) + "\n"; string(data) != want {
		t.Errorf("Write wrote %d bytes not of the form 64 lowercase hex and a newline", len(data))
	}
	got, err := Load(path)
	if err != nil || !got.Equal(k) {
		t.Errorf("Load(Write(k)) = %v, %v; want %v", got, err, k)
	}

	// Never a second key over the first.
	k2, _ := Generate()
	if err := Write(path, k2); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Write over an existing file = %v; want fs.ErrExist", err)
	}
	if got, _ := Load(path); !got.Equal(k) {
		t.Errorf("Write over an existing file replaced the key")
	}
	if err := Write(filepath.Join(dir, "zero.key"), Key{}); !errors.Is(err, ErrNoKey) {
		t.Errorf("Write(zero Key) = %v; want ErrNoKey", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("Write left %q in the directory; want only authsvc.key", names)
	}
}

func TestLoadOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "authsvc.key")
	k, created, err := LoadOrCreate(path)
	if err != nil || !created || k.IsZero() {
		t.Fatalf("LoadOrCreate(new path) = %v, %v, %v; want a new key, true, nil", k, created, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode() != 0o600 {
		t.Errorf("LoadOrCreate made %v, %v; want mode -rw-------", fi.Mode(), err)
	}
	again, created, err := LoadOrCreate(path)
	if err != nil || created || !again.Equal(k) {
		t.Errorf("LoadOrCreate(existing) = %v, %v, %v; want %v, false, nil", again, created, err, k)
	}

	// A refused file is reported, never replaced.
	bad := writeFile(t, t.TempDir(), sampleHex[:63], 0o600)
	if _, _, err := LoadOrCreate(bad); !errors.Is(err, ErrMalformedFile) {
		t.Errorf("LoadOrCreate(malformed) error = %v; want ErrMalformedFile", err)
	}
	if data, _ := os.ReadFile(bad); string(data) != sampleHex[:63] {
		t.Errorf("LoadOrCreate(malformed) changed the file")
	}
	if _, _, err := LoadOrCreate(filepath.Join(t.TempDir(), "no", "such", "dir", "k")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadOrCreate(in a missing directory) error = %v; want fs.ErrNotExist", err)
	}
}

// helperEnv names the key file a re-executed test binary passes to
// LoadOrCreate (TestLoadOrCreateRace).
const helperEnv = "AUTHSVC_SECRET_TEST_LOAD_OR_CREATE"

func TestMain(m *testing.M) {
	if path := os.Getenv(loadEnv); path != "" {
		if _, err := Load(path); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if path := os.Getenv(helperEnv); path != "" {
		io.Copy(io.Discard, os.Stdin) // the start signal: stdin closes
		k, created, err := LoadOrCreate(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s %t\n", k.ID(), created)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLoadOrCreateRace starts goroutines and processes that all call
// LoadOrCreate on the same new path at once: exactly one creates the key,
// and every one ends with it.
func TestLoadOrCreateRace(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 30; round++ {
		path := filepath.Join(t.TempDir(), "authsvc.key")
		// Processes in the first round only: each costs a fork and exec.
		procs := 0
		if round == 0 {
			procs = 6
		}
		type result struct {
			id      string
			created bool
			err     error
		}
		results := make(chan result, 8+procs)
		var wg sync.WaitGroup
		start := make(chan struct{})
		var starts []io.Closer
		for i := 0; i < 8; i++ {
			wg.Go(func() {
				<-start
				k, created, err := LoadOrCreate(path)
				results <- result{k.ID(), created, err}
			})
		}
		for i := 0; i < procs; i++ {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), helperEnv+"="+path)
			var out, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			starts = append(starts, stdin)
			wg.Go(func() {
				err := cmd.Wait()
				if err != nil {
					results <- result{err: fmt.Errorf("helper process: %v: %s", err, stderr.String())}
					return
				}
				var r result
				if _, err := fmt.Sscan(out.String(), &r.id, &r.created); err != nil {
					r.err = fmt.Errorf("helper process printed %q: %v", out.String(), err)
				}
				results <- r
			})
		}
		// The processes have started but wait on stdin: all go at once.
		close(start)
		for _, c := range starts {
			c.Close()
		}
		wg.Wait()
		close(results)
		ids := map[string]int{}
		creators := 0
		for r := range results {
			if r.err != nil {
				t.Fatalf("round %d: LoadOrCreate error = %v", round, r.err)
			}
			ids[r.id]++
			if r.created {
				creators++
			}
		}
		k, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 || ids[k.ID()] != 8+procs || creators != 1 {
			t.Fatalf("round %d: %d callers ended with keys %v (file: %s), %d created one; want all with one key, one creator", round, 8+procs, ids, k.ID(), creators)
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != 1 {
			t.Fatalf("round %d: %d files left in the directory; want 1", round, len(entries))
		}
	}
}

func FuzzParseKeyFile(f *testing.F) {
	for _, s := range []string{sampleHex, sampleHex + "\n", sampleHex + "\r\n", sampleHex + "\n\n", sampleHex[:63], "", "\r\n", strings.ToUpper(sampleHex)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, problem := parse(data)
		if problem != "" {
			if raw != nil {
				t.Fatalf("parse(%q) = %x, %q; want no key with a problem", data, raw, problem)
			}
			return
		}
		// A success is 64 hex characters, then nothing, "\n" or "\r\n".
		text, ok := bytes.CutSuffix(data, []byte("\r\n"))
		if !ok {
			text, _ = bytes.CutSuffix(data, []byte("\n"))
		}
		if len(raw) != Size || !strings.EqualFold(string(text), hex.EncodeToString(raw)) {
			t.Fatalf("parse(%q) = %x; want the 32 bytes of 64 hex characters", data, raw)
		}
	})
}

// loadEnv names the key file a re-executed test binary passes to Load
// (TestLoadUnreadableNamesFix).
const loadEnv = "AUTHSVC_SECRET_TEST_LOAD"

// TestLoadUnreadableNamesFix: a key file that the process may not read
// (as in a container whose user is not the host file's owner) fails with
// the likely fix in the error, not a bare "permission denied". Root reads
// anything, so as root the load runs in a child under another uid.
func TestLoadUnreadableNamesFix(t *testing.T) {
	// t.TempDir's parent is 0700: the child must reach the file and the
	// binary, so both live in a folder of its own that anyone may enter.
	dir, err := os.MkdirTemp("", "authsvc-secret-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, dir, sampleHex+"\n", 0o600)
	var msg string
	if os.Getuid() != 0 {
		if err := os.Chmod(path, 0o200); err != nil { // write-only: the owner cannot read it
			t.Fatal(err)
		}
		_, err := Load(path)
		if !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("Load(unreadable) = %v; want fs.ErrPermission", err)
		}
		msg = err.Error()
	} else {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		bin, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(dir, "secret.test")
		if err := os.WriteFile(exe, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), loadEnv+"="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("Load(a root-only key) as uid 65532 succeeded: %s", out)
		}
		msg = string(out)
	}
	for _, want := range []string{path, "permission denied", "readable by it", "docker-compose.yml"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Load(unreadable) error = %q; want it to hold %q", msg, want)
		}
	}
}
