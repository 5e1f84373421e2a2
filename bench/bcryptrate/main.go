// Command bcryptrate prints how many password checks per second this machine
// runs for a hash scheme (bcrypt at a cost, or argon2id with its parameters;
// the defaults are authsvc's default hash policy, internal/password/hash.go) on a given
// number of goroutines: the ceiling of any login endpoint with that hash.
package main

import (
	"crypto/rand"
	"crypto/subtle"
	"flag"
	"fmt"
	"log"
	"runtime"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

func main() {
	scheme := flag.String("hash", "bcrypt", "bcrypt or argon2id")
	cost := flag.Int("cost", 12, "bcrypt cost")
	memKiB := flag.Uint("m", 19<<10, "argon2id memory, KiB")
	passes := flag.Uint("t", 2, "argon2id passes")
	lanes := flag.Uint("p", 1, "argon2id lanes")
	workers := flag.Int("goroutines", runtime.GOMAXPROCS(0), "concurrent checks")
	d := flag.Duration("duration", 3*time.Second, "how long to run")
	flag.Parse()

	password := []byte("correct horse battery staple")
	var verify func() bool
	switch *scheme {
	case "bcrypt":
		hash, err := bcrypt.GenerateFromPassword(password, *cost)
		if err != nil {
			log.Fatal(err)
		}
		verify = func() bool { return bcrypt.CompareHashAndPassword(hash, password) == nil }
	case "argon2id":
		// As authsvc verifies a stored argon2id hash: IDKey, then a constant-time compare.
		salt := make([]byte, 16)
		rand.Read(salt)
		m, t, p := uint32(*memKiB), uint32(*passes), uint8(*lanes)
		sum := argon2.IDKey(password, salt, t, m, p, 32)
		verify = func() bool { return subtle.ConstantTimeCompare(argon2.IDKey(password, salt, t, m, p, 32), sum) == 1 }
	default:
		log.Fatalf("-hash %q: want bcrypt or argon2id", *scheme)
	}
	// Each goroutine checks until the deadline and finishes the check it
	// began; its rate is its checks over its own busy time, and the rates
	// add up (bench/driver measures login throughput the same way).
	rates := make([]float64, *workers)
	start := time.Now()
	deadline := start.Add(*d)
	var wg sync.WaitGroup
	for i := range rates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for time.Now().Before(deadline) {
				if !verify() {
					log.Fatal("the password does not match its own hash")
				}
				n++
			}
			rates[i] = float64(n) / time.Since(start).Seconds()
		}()
	}
	wg.Wait()
	total := 0.0
	for _, r := range rates {
		total += r
	}
	fmt.Printf("compares/s: %.3f\n", total)
}
