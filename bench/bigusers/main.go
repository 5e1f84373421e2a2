// Command bigusers writes an authsvc users file of N users for make bench:
// distinct usernames (user0000001 …), names, emails, some groups, and a few
// real argon2id hashes of one password at the server's default parameters,
// reused round-robin, so that a million users take seconds, not hours.
package main

import (
	"flag"
	"fmt"
	"log"
	"strconv"

	"authsvc/bench/internal/bench"
)

func main() {
	out := flag.String("o", "users.json", "users file to write")
	n := flag.Int("n", 1_000_000, "number of users")
	distinct := flag.Int("hashes", 4, "distinct argon2id hashes, reused round-robin")
	bench.Start("bigusers")
	password := bench.Password()
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
		hashes[i] = bench.Argon2id(password)
	}
	groups := []string{`[]`, `["staff"]`, `["dev","staff"]`, `[]`, `["ops"]`}
	return bench.WriteUsers(path, n, func(line []byte, i int) []byte {
		i++ // user0000001 first
		name := fmt.Sprintf("user%07d", i)
		line = append(line, `  {"username": "`...)
		line = append(line, name...)
		line = append(line, `", "password_hash": "`...)
		line = append(line, hashes[i%distinct]...)
		line = append(line, `", "name": "User `...)
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, `", "email": "`...)
		line = append(line, name...)
		line = append(line, `@example.com", "groups": `...)
		line = append(line, groups[i%len(groups)]...)
		return append(line, `, "admin": false, "disabled": false}`...)
	})
}
