// Command bigusers writes an authsvc users file of N users for make bench:
// distinct usernames (user0000001 …), names, emails, some groups, and a few
// real argon2id hashes of one password at the server's default parameters,
// reused round-robin, so that a million users take seconds, not hours.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"

	"golang.org/x/crypto/argon2"
)

// The server's default hash policy (internal/password/hash.go DefaultHashPolicy and
// policyArgon2SaltLen/KeyLen): logins against these hashes never rehash.
const (
	argonMemoryKiB = 19 << 10
	argonTime      = 2
	argonThreads   = 1
	saltLen        = 16
	keyLen         = 32
)

func main() {
	out := flag.String("o", "users.json", "users file to write")
	n := flag.Int("n", 1_000_000, "number of users")
	distinct := flag.Int("hashes", 4, "distinct argon2id hashes, reused round-robin")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("bigusers: ")
	password := os.Getenv("BENCH_PASSWORD") // from the environment: a flag would show in ps
	if password == "" || *n < 1 || *distinct < 1 {
		log.Fatal("want BENCH_PASSWORD in the environment, -n ≥ 1 and -hashes ≥ 1")
	}
	if err := write(*out, *n, *distinct, password); err != nil {
		log.Fatal(err)
	}
}

// write writes n users to path (mode 0600, as authsvc's own files).
func write(path string, n, distinct int, password string) error {
	hashes := make([]string, distinct)
	for i := range hashes {
		salt := make([]byte, saltLen)
		rand.Read(salt)
		sum := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, keyLen)
		hashes[i] = fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$%s$%s", argonMemoryKiB, argonTime, argonThreads,
			base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(sum))
	}
	groups := []string{`[]`, `["staff"]`, `["dev","staff"]`, `[]`, `["ops"]`}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("{\"users\": [\n")
	var line []byte
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("user%07d", i)
		line = append(line[:0], `  {"username": "`...)
		line = append(line, name...)
		line = append(line, `", "password_hash": "`...)
		line = append(line, hashes[i%distinct]...)
		line = append(line, `", "name": "User `...)
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, `", "email": "`...)
		line = append(line, name...)
		line = append(line, `@example.com", "groups": `...)
		line = append(line, groups[i%len(groups)]...)
		line = append(line, `, "admin": false, "disabled": false}`...)
		if i < n {
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
