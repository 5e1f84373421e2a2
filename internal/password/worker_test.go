package password

import (
	"bytes"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/crypto/scrypt"
)

// testHash is bcrypt("pw") at cost 4.
const testHash = "$2a$04$V8Q8Epg2X6wrj9o4CB/dsOsmSNtQq0PjAZGGWfx2E7GlYRFT2lXVK"

// discardLog is a logger for tests that read no log lines.
var discardLog = slog.New(slog.DiscardHandler)

// TestMain lets the test binary be the hasher pool's worker, as the server
// binary is: the pool starts "os.Executable() hash-worker".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == WorkerCommand {
		if err := RunWorker(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "hash-worker: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testBinary returns the running test binary, which TestMain makes a hash worker.
func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// hashesOfEveryScheme returns a hash of "right" in every scheme the users
// file accepts, but cheap.
func hashesOfEveryScheme(t *testing.T) map[string]*Hash {
	t.Helper()
	texts := map[string]string{
		SchemeBcrypt:       mustBcrypt(t, "right"),
		SchemeArgon2id:     policyHash(t, HashPolicy{Scheme: SchemeArgon2id, ArgonMemoryKiB: 64, ArgonTime: 1, ArgonThreads: 2}, "right"),
		SchemePBKDF2:       "pbkdf2_sha256$1000$salt$" + base64.StdEncoding.EncodeToString(mustPBKDF2(t, sha256.New, "right", "salt", 1000)),
		SchemeDjangoArgon2: "argon2" + policyHash(t, HashPolicy{Scheme: SchemeArgon2id, ArgonMemoryKiB: 64, ArgonTime: 1, ArgonThreads: 1}, "right"),
		SchemeBcryptSHA256: "bcrypt_sha256$" + mustBcrypt(t, string(djangoSHA256Hex([]byte("right")))),
		SchemeDjangoBcrypt: "bcrypt$" + mustBcrypt(t, "right"),
		SchemeUnusable:     "!unusable",
		SchemePBKDF2SHA1:   "pbkdf2_sha1$1000$salt$" + base64.StdEncoding.EncodeToString(mustPBKDF2(t, sha1.New, "right", "salt", 1000)),
		SchemeDjangoArgon2i: "argon2" + formatArgon2("argon2i", 64, 1, 2, []byte("saltsalt"),
			argon2.Key([]byte("right"), []byte("saltsalt"), 1, 64, 2, 16)),
		SchemeScrypt:              "scrypt$16$salt$1$3$" + base64.StdEncoding.EncodeToString(mustScrypt(t, "right", "salt", 16, 1, 3)),
		SchemeWrappedSHA1:         wrapLegacy(t, "sha1$salt$"+hex.EncodeToString(sha1Sum("salt"+"right")), phTestPolicy(SchemeArgon2id)),
		SchemeWrappedMD5:          wrapLegacy(t, "md5$salt$"+hex.EncodeToString(md5Sum("salt"+"right")), phTestPolicy(SchemeBcrypt)),
		SchemeWrappedUnsaltedSHA1: wrapLegacy(t, "sha1$$"+hex.EncodeToString(sha1Sum("right")), phTestPolicy(SchemeBcrypt)),
		SchemeWrappedUnsaltedMD5:  wrapLegacy(t, hex.EncodeToString(md5Sum("right")), phTestPolicy(SchemeArgon2id)),
	}
	hashes := map[string]*Hash{}
	for scheme, text := range texts {
		h, err := ParseHash(text)
		if err != nil {
			t.Fatalf("ParseHash(%s) = %v", scheme, err)
		}
		if h.kind != scheme {
			t.Fatalf("ParseHash(%s).kind = %s", scheme, h.kind)
		}
		hashes[scheme] = h
	}
	return hashes
}

func mustPBKDF2(t *testing.T, h func() hash.Hash, password, salt string, iterations int) []byte {
	t.Helper()
	sum, err := pbkdf2.Key(h, password, []byte(salt), iterations, h().Size())
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func mustScrypt(t *testing.T, password, salt string, n, r, p int) []byte {
	t.Helper()
	sum, err := scrypt.Key([]byte(password), []byte(salt), n, r, p, 64)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func sha1Sum(s string) []byte { sum := sha1.Sum([]byte(s)); return sum[:] }
func md5Sum(s string) []byte  { sum := md5.Sum([]byte(s)); return sum[:] }

func policyHash(t *testing.T, p HashPolicy, password string) string {
	t.Helper()
	h, err := p.Hash([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustBcrypt(t *testing.T, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), 4)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

// TestHashJobFrames: what a worker decodes answers as the hash it was made
// from, for every scheme.
func TestHashJobFrames(t *testing.T) {
	for scheme, h := range hashesOfEveryScheme(t) {
		for _, password := range []string{"right", "wrong", strings.Repeat("é", 512)} {
			frame := appendHashJob(nil, h, []byte(password))
			n, size := binary.Uvarint(frame)
			if size <= 0 || int(n) != len(frame)-size {
				t.Fatalf("%s: frame length %d, prefix says %d", scheme, len(frame)-size, n)
			}
			got, gotPassword, err := decodeHashJob(frame[size:])
			if err != nil {
				t.Fatalf("%s: decodeHashJob(appendHashJob(%q)) = %v", scheme, password, err)
			}
			if string(gotPassword) != password {
				t.Errorf("%s: decoded password = %q; want %q", scheme, gotPassword, password)
			}
			if want := h.Verify([]byte(password)); got.Verify(gotPassword) != want {
				t.Errorf("%s: decoded hash verify(%q) = %v; want %v", scheme, password, !want, want)
			}
		}
	}
}

// TestHasherPoolEveryScheme: a worker process answers as the hash itself
// does, for every scheme: the frame carries all that a check needs.
func TestHasherPoolEveryScheme(t *testing.T) {
	p := NewPool(1, testBinary(t), 0, discardLog)
	defer p.Close()
	hashes := hashesOfEveryScheme(t)
	p.Verify(hashes[SchemeBcrypt], []byte("right")) // starts the worker
	first := hashProcs(p)
	for scheme, h := range hashes {
		for _, password := range []string{"right", "wrong", ""} {
			if got, want := p.Verify(h, []byte(password)), h.Verify([]byte(password)); got != want {
				t.Errorf("%s: a worker's verify(%q) = %v; want %v", scheme, password, got, want)
			}
		}
		if scheme != SchemeUnusable && !p.Verify(h, []byte("right")) {
			t.Errorf("%s: a worker does not match the right password", scheme)
		}
	}
	// A worker that cannot decode a frame exits, and the pool answers in
	// its own process and starts another: right answers, another worker.
	if pids := hashProcs(p); len(first) != 1 || !slices.Equal(pids, first) {
		t.Errorf("worker processes = %v, first %v; want the first one alone, never replaced", pids, first)
	}
}

func TestDecodeHashJobRefuses(t *testing.T) {
	h, err := ParseHash(testHash)
	if err != nil {
		t.Fatal(err)
	}
	frame := appendHashJob(nil, h, []byte("pw"))
	_, size := binary.Uvarint(frame)
	body := frame[size:]
	big := *h
	big.Cost = 31
	argon := HashPolicy{Scheme: SchemeArgon2id, ArgonMemoryKiB: 64, ArgonTime: 1, ArgonThreads: 1}
	ah, err := ParseHash(policyHash(t, argon, "pw"))
	if err != nil {
		t.Fatal(err)
	}
	huge := *ah
	huge.MemoryKiB = 1 << 30
	unknown := *h
	unknown.kind = "md5"
	for name, b := range map[string][]byte{
		"empty":          {},
		"cut short":      body[:len(body)-1],
		"trailing bytes": append(append([]byte{}, body...), 0),
		"bcrypt cost 31": bodyOf(appendHashJob(nil, &big, []byte("pw"))),
		"argon2 1 TiB":   bodyOf(appendHashJob(nil, &huge, []byte("pw"))),
		"unknown scheme": bodyOf(appendHashJob(nil, &unknown, []byte("pw"))),
		"field too long": bodyOf(appendHashJob(nil, h, make([]byte, maxJobField+1))),
	} {
		if _, _, err := decodeHashJob(b); !errors.Is(err, errBadJob) {
			t.Errorf("decodeHashJob(%s) = %v; want errBadJob", name, err)
		}
	}
}

func bodyOf(frame []byte) []byte {
	_, size := binary.Uvarint(frame)
	return frame[size:]
}

// TestRunHashWorker drives the worker command in-process: one answer per
// job, in order, and a malformed frame ends it with an error that quotes
// nothing of it.
func TestRunHashWorker(t *testing.T) {
	h, err := ParseHash(testHash)
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	in.Write(appendHashJob(nil, h, []byte("pw")))
	in.Write(appendHashJob(nil, h, []byte("wrong-secret")))
	var out bytes.Buffer
	if err := RunWorker(&in, &out); err != nil {
		t.Fatalf("RunWorker = %v; want nil at the end of stdin", err)
	}
	if got := out.String(); got != "10" {
		t.Errorf("answers = %q; want %q", got, "10")
	}

	bad := appendHashJob(nil, h, []byte("the-secret-password"))
	bad = bad[:len(bad)-3]
	out.Reset()
	err = RunWorker(bytes.NewReader(bad), &out)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("RunWorker(cut frame) = %v; want an error quoting nothing", err)
	}
	if out.Len() != 0 {
		t.Errorf("RunWorker(cut frame) answered %q; want nothing", out.String())
	}
}

func FuzzDecodeHashJob(f *testing.F) {
	h, _ := ParseHash(testHash)
	f.Add(bodyOf(appendHashJob(nil, h, []byte("pw"))))
	for _, s := range []string{
		djangoPBKDF2SHA1Small, djangoArgon2iSmall, djangoScryptSmall,
		"wrapped_sha1$sälz$" + bcryptSalty, "wrapped_unsalted_md5$$" + phcArgon2Small,
	} {
		h, _ := ParseHash(s)
		f.Add(bodyOf(appendHashJob(nil, h, []byte("pw"))))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		got, password, err := decodeHashJob(body)
		if err != nil {
			return
		}
		// What decodes re-encodes to a frame that decodes alike: no field is dropped.
		again, againPassword, err := decodeHashJob(bodyOf(appendHashJob(nil, got, password)))
		if err != nil || !reflect.DeepEqual(again, got) || !bytes.Equal(againPassword, password) {
			t.Errorf("decodeHashJob(appendHashJob(decodeHashJob(%x))) = %+v, %v; want %+v", body, again, err, got)
		}
	})
}

// hashProcs returns the pool's running worker processes' ids.
func hashProcs(p *Pool) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var pids []int
	for proc := range p.procs {
		pids = append(pids, proc.cmd.Process.Pid)
	}
	return pids
}

// TestHashWorkerNiced: the worker process, every thread of it, runs at
// nice 19, while the server's own threads keep their priority.
func TestHashWorkerNiced(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("thread priorities are Linux's")
	}
	p := NewPool(1, testBinary(t), 0, discardLog)
	defer p.Close()
	h, _ := ParseHash(testHash)
	if !p.Verify(h, []byte("pw")) {
		t.Fatal("verify(right) = false; want true")
	}
	pids := hashProcs(p)
	if len(pids) != 1 {
		t.Fatalf("worker processes = %v; want 1", pids)
	}
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pids[0]) + "/task/*/stat")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of the worker: %v %v", tasks, err)
	}
	for _, task := range tasks {
		if nice := statNice(t, task); nice != 19 {
			t.Errorf("%s: nice = %d; want 19", task, nice)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if nice := statNice(t, "/proc/thread-self/stat"); nice == 19 {
		t.Errorf("the server's own threads were niced too")
	}
}

// statNice reads the nice value (field 19) from a /proc stat file.
func statNice(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	nice, err := strconv.Atoi(fields[16])
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return nice
}

// TestHasherPoolWorkerKilled: a worker that dies costs no answer; the next
// check starts a new one.
func TestHasherPoolWorkerKilled(t *testing.T) {
	p := NewPool(1, testBinary(t), 0, discardLog)
	defer p.Close()
	h, _ := ParseHash(testHash)
	if !p.Verify(h, []byte("pw")) {
		t.Fatal("verify(right) = false; want true")
	}
	first := hashProcs(p)
	if len(first) != 1 {
		t.Fatalf("worker processes = %v; want 1", first)
	}
	syscall.Kill(first[0], syscall.SIGKILL)
	for _, tc := range []struct {
		password string
		want     bool
	}{{"pw", true}, {"wrong", false}, {"pw", true}} {
		if got := p.Verify(h, []byte(tc.password)); got != tc.want {
			t.Errorf("after the worker was killed, verify(%q) = %v; want %v", tc.password, got, tc.want)
		}
	}
	if now := hashProcs(p); len(now) != 1 || now[0] == first[0] {
		t.Errorf("worker processes after the kill = %v; want one new one (not %d)", now, first[0])
	}
}

// TestHasherPoolNoWorkerBinary: a binary that cannot be started leaves the
// checks in the server's process, still right.
func TestHasherPoolNoWorkerBinary(t *testing.T) {
	p := NewPool(1, filepath.Join(t.TempDir(), "missing"), 0, discardLog)
	defer p.Close()
	h, _ := ParseHash(testHash)
	if !p.Verify(h, []byte("pw")) || p.Verify(h, []byte("wrong")) {
		t.Errorf("verify with no worker binary gave a wrong answer")
	}
}

// TestHashWorkerReleasesMemory: a worker waiting for its next job returns
// its memory once (the release runs while it waits, not while it hashes),
// and answers right afterwards. How much it returns is measured in make
// bench, not here.
func TestHashWorkerReleasesMemory(t *testing.T) {
	released := make(chan struct{}, 10)
	oldAfter, oldRelease := releaseAfter, releaseMemory
	releaseAfter, releaseMemory = time.Millisecond, func() { released <- struct{}{} }
	defer func() { releaseAfter, releaseMemory = oldAfter, oldRelease }()

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ended := make(chan error, 1)
	go func() { ended <- RunWorker(inR, outW) }()
	h, _ := ParseHash(testHash)
	ask := func(password string, want byte) {
		t.Helper()
		if _, err := inW.Write(appendHashJob(nil, h, []byte(password))); err != nil {
			t.Fatal(err)
		}
		var answer [1]byte
		if _, err := io.ReadFull(outR, answer[:]); err != nil || answer[0] != want {
			t.Fatalf("worker's answer to %q = %q, %v; want %q", password, answer[:], err, want)
		}
	}
	ask("pw", jobMatch)
	// The deadline only keeps a broken worker from hanging the test.
	select {
	case <-released:
	case <-time.After(time.Minute):
		t.Fatal("a waiting worker did not release its memory within a minute")
	}
	ask("wrong", jobMismatch)
	ask("pw", jobMatch)
	inW.Close()
	if err := <-ended; err != nil {
		t.Errorf("RunWorker after its stdin closed = %v; want nil", err)
	}
}
