package usersfile

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"

	"authsvc/internal/password"
	"authsvc/internal/users"
)

// benchUsersFile returns a users file for the load benchmarks: the one
// AUTHSVC_BENCH_USERS names (make one with BENCH_PASSWORD=… go run ./bench/bigusers), or n
// users written here, sharing a few real argon2id hashes.
func benchUsersFile(b *testing.B, n int) string {
	b.Helper()
	if path := os.Getenv("AUTHSVC_BENCH_USERS"); path != "" {
		return path
	}
	hashes := make([]string, 4)
	p := password.HashPolicy{Scheme: password.SchemeArgon2id, ArgonMemoryKiB: 64, ArgonTime: 1, ArgonThreads: 1}
	for k := range hashes {
		h, err := p.Hash([]byte(fmt.Sprintf("password-%d", k)))
		if err != nil {
			b.Fatal(err)
		}
		hashes[k] = h
	}
	groups := [][]string{{"dev"}, {"dev", "ops"}, {}, {"sales"}}
	list := make([]users.User, n)
	for i := range list {
		list[i] = users.User{Username: fmt.Sprintf("user%07d", i), PasswordHash: hashes[i%len(hashes)],
			Name: fmt.Sprintf("User %d", i), Email: fmt.Sprintf("user%07d@example.com", i), Groups: groups[i%len(groups)]}
	}
	path := filepath.Join(b.TempDir(), "users.json")
	if err := Write(path, list); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkLoadUsers: a server's first load of a users file of 10,000 users,
// or of the file AUTHSVC_BENCH_USERS names (1M users: the target is
// 3 s and 400 B a user).
func BenchmarkLoadUsers(b *testing.B) {
	path := benchUsersFile(b, 10_000)
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	b.ReportAllocs()
	var d *Directory
	for b.Loop() {
		var err error
		if d, err = Open(path, log); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	writeHeapProfile(b)
	runtime.KeepAlive(d)
}

// writeHeapProfile writes the live heap to the file AUTHSVC_HEAP_PROFILE
// names, if any, and reports the live heap per user.
func writeHeapProfile(b *testing.B) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc), "live-heap-B")
	path := os.Getenv("AUTHSVC_HEAP_PROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReloadUsers: a reload of an unchanged users file.
func BenchmarkReloadUsers(b *testing.B) {
	path := benchUsersFile(b, 10_000)
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	d, err := Open(path, log)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := d.Reload(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddUser: one user added to a users file of 10,000 users, or to a
// copy of the file AUTHSVC_BENCH_USERS names, as user add does (the hash
// made beforehand: that is the hash's cost, not the file's).
func BenchmarkAddUser(b *testing.B) {
	src := benchUsersFile(b, 10_000)
	data, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "users.json")
	d := New(path, slog.New(slog.DiscardHandler))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := d.Add(b.Context(), users.User{Username: "newbie", PasswordHash: testHash}); err != nil {
			b.Fatal(err)
		}
	}
}
