package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"authsvc/internal/users"
)

// Pages the admin page row measures, after a few to warm the pool and the
// database's cache.
const (
	adminPages       = 200
	adminPagesWarmUp = 20
)

// pageResult is the admin page row: pages of users.MaxPage users of the
// PostgreSQL directory through the admin API, each after a random
// username.
type pageResult struct {
	pages    int
	p50, p99 time.Duration
	err      error
}

// adminUser is the admin the admin page row logs in as.
const adminUser = "benchadmin"

// addAdmin adds adminUser, with the bench users' password, to the
// directory at cfg.pgURL, through the CLI.
func (d *driver) addAdmin() error {
	cmd := exec.CommandContext(d.ctx, d.cfg.authsvc, "user", "add", "--users", d.cfg.pgURL, "--admin", adminUser)
	cmd.Stdin = strings.NewReader(d.password + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("user add --admin: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// adminPage measures GET /api/admin/users/?limit=500&after=NAME on s,
// serving the n users user0000001 … of cfg.pgURL and adminUser, with an
// admin's session: adminPages pages, each after a random one of the
// users, one at a time, as an admin's listing reads them.
func (d *driver) adminPage(s *server, n int) pageResult {
	var r pageResult
	token, err := d.login(s.url, adminUser)
	if err != nil {
		r.err = err
		return r
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 32))
	var took []time.Duration
	for i := range adminPagesWarmUp + adminPages {
		after := fmt.Sprintf("user%07d", 1+rng.IntN(n))
		start := time.Now()
		got, err := d.getPage(s.url, token, after)
		elapsed := time.Since(start)
		if err != nil {
			r.err = err
			return r
		}
		if got == 0 {
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

// getPage reads the page of users.MaxPage users after after, and returns
// how many users it holds.
func (d *driver) getPage(url, token, after string) (int, error) {
	ctx, cancel := context.WithTimeout(d.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/api/admin/users/?limit="+strconv.Itoa(users.MaxPage)+"&after="+after, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Token "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var page struct {
		Users []json.RawMessage `json:"users"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /api/admin/users/ after %s: %s", after, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return 0, fmt.Errorf("GET /api/admin/users/ after %s: %v", after, err)
	}
	return len(page.Users), nil
}
