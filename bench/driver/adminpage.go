package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"authsvc/internal/users"
	"authsvc/internal/users/postgres"
)

// Pages the admin page row measures, after a few to warm the pool and the
// database's cache.
const (
	adminPages       = 200
	adminPagesWarmUp = 20
)

// pageResult is the admin page row: pages of users.MaxPage users of the
// PostgreSQL directory, each after a random username.
type pageResult struct {
	pages    int
	p50, p99 time.Duration
	err      error
}

// adminPage measures Directory.Page on the database at cfg.pgURL, which
// holds n users user0000001 …: adminPages pages of users.MaxPage, each
// after a random one of them, one at a time, as an admin's listing reads
// them.
func (d *driver) adminPage(n int) pageResult {
	var r pageResult
	dir, err := postgres.OpenExisting(d.ctx, d.cfg.pgURL, 10, nil)
	if err != nil {
		r.err = err
		return r
	}
	defer dir.Close()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 32))
	var took []time.Duration
	for i := range adminPagesWarmUp + adminPages {
		after := fmt.Sprintf("user%07d", 1+rng.IntN(n))
		start := time.Now()
		page, err := dir.Page(d.ctx, after, users.MaxPage, users.Filter{})
		elapsed := time.Since(start)
		if err != nil {
			r.err = fmt.Errorf("page after %s: %v", after, err)
			return r
		}
		if len(page) == 0 {
			r.err = fmt.Errorf("page after %s: no users; want up to %d", after, users.MaxPage)
			return r
		}
		if i >= adminPagesWarmUp {
			took = append(took, elapsed)
		}
	}
	slices.Sort(took)
	r.pages = len(took)
	r.p50 = took[len(took)/2]
	r.p99 = took[(len(took)*99+99)/100-1]
	d.logf("pg     admin page of %d after a random user: p50 %s p99 %s over %d pages", users.MaxPage, r.p50, r.p99, r.pages)
	return r
}
