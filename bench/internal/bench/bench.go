// Package bench holds what the bench commands share: how they start, the
// bench users' password and their argon2id hashes, the users files they
// write, and what /proc tells of a server's memory.
package bench

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Start parses the command line and has the log print name and the
// message alone.
func Start(name string) {
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix(name + ": ")
}

// Password returns the bench users' password, BENCH_PASSWORD: from the
// environment, since a flag would show in ps. It is empty when unset.
func Password() string { return os.Getenv("BENCH_PASSWORD") }

// The server's default hash policy (internal/password/hash.go
// DefaultHashPolicy and policyArgon2SaltLen/KeyLen): logins against these
// hashes never rehash.
const (
	argonMemoryKiB = 19 << 10
	argonTime      = 2
	argonThreads   = 1
	saltLen        = 16
	keyLen         = 32
)

// Argon2id returns an argon2id hash of password with a new salt at the
// server's default parameters, in the form a users file holds.
func Argon2id(password string) string {
	salt := make([]byte, saltLen)
	rand.Read(salt)
	sum := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, keyLen)
	return fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$%s$%s", argonMemoryKiB, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(sum))
}

// WriteUsers writes a users file of n users to path (mode 0600, as
// authsvc's own files), one a line: user i (from 0) is the JSON object
// appendUser appends.
func WriteUsers(path string, n int, appendUser func(line []byte, i int) []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("{\"users\": [\n")
	var line []byte
	for i := range n {
		line = appendUser(line[:0], i)
		if i < n-1 {
			line = append(line, ',')
		}
		line = append(line, '\n')
		w.Write(line)
	}
	w.WriteString("]}\n")
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ProcStatus returns a memory field of /proc/PID/status (VmRSS, VmHWM)
// in bytes.
func ProcStatus(pid int, key string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		return kb * 1024, err
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, key)
}
