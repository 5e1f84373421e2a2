// Command bcryptrate prints how many bcrypt compares per second this machine
// runs at a given cost on a given number of goroutines: the ceiling of any
// login endpoint at that cost.
package main

import (
	"flag"
	"fmt"
	"log"
	"runtime"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	cost := flag.Int("cost", 12, "bcrypt cost")
	workers := flag.Int("goroutines", runtime.GOMAXPROCS(0), "concurrent compares")
	d := flag.Duration("duration", 3*time.Second, "how long to run")
	flag.Parse()

	password := []byte("correct horse battery staple")
	hash, err := bcrypt.GenerateFromPassword(password, *cost)
	if err != nil {
		log.Fatal(err)
	}
	// Each goroutine compares until the deadline and finishes the compare it
	// began; its rate is its compares over its own busy time, and the rates
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
				if err := bcrypt.CompareHashAndPassword(hash, password); err != nil {
					log.Fatal(err)
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
