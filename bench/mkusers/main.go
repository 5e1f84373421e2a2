// Command mkusers writes a users file of n users for measuring authsvc at
// scale: distinct usernames, names, emails, a handful of groups, and real
// argon2id hashes (a few, each with its own salt, shared round-robin).
//
//	go run ./bench/mkusers -n 1000000 -o /tmp/users-1m.json
//
// User i's password is "password-<i mod hashes>"; the file is written as
// authsvc writes it (two-space indent), so every entry is parsed and every
// hash validated when it loads.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"

	"golang.org/x/crypto/argon2"
)

// user mirrors one entry of authsvc's users file.
type user struct {
	Username     string   `json:"username"`
	PasswordHash string   `json:"password_hash"`
	Name         string   `json:"name"`
	Email        string   `json:"email"`
	Groups       []string `json:"groups"`
	Admin        bool     `json:"admin"`
	Disabled     bool     `json:"disabled"`
}

// groupSets are the groups users get, round-robin: few distinct strings, so
// that interning them matters.
var groupSets = [][]string{{"dev"}, {"dev", "ops"}, {"sales"}, {}, {"support"}, {"dev", "qa"}, {"finance"}}

func main() {
	n := flag.Int("n", 1_000_000, "how many users")
	out := flag.String("o", "users-1m.json", "file to write")
	hashes := flag.Int("hashes", 16, "distinct argon2id hashes (m=19 MiB, t=2, p=1, as authsvc hash makes)")
	flag.Parse()

	phc := make([]string, *hashes)
	for k := range phc {
		salt := make([]byte, 16)
		rand.Read(salt)
		sum := argon2.IDKey([]byte(fmt.Sprintf("password-%d", k)), salt, 2, 19<<10, 1, 32)
		enc := base64.RawStdEncoding
		phc[k] = fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$%s$%s", 19<<10, 2, 1, enc.EncodeToString(salt), enc.EncodeToString(sum))
	}

	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("{\n  \"users\": [")
	for i := range *n {
		u := user{
			Username:     fmt.Sprintf("user%07d", i),
			PasswordHash: phc[i%len(phc)],
			Name:         fmt.Sprintf("User %d", i),
			Email:        fmt.Sprintf("user%07d@example.com", i),
			Groups:       groupSets[i%len(groupSets)],
			Admin:        i == 0,
		}
		b, err := json.MarshalIndent(u, "    ", "  ")
		if err != nil {
			log.Fatal(err)
		}
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteString("\n    ")
		w.Write(b)
	}
	if *n > 0 {
		w.WriteString("\n  ")
	}
	w.WriteString("]\n}\n")
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}
