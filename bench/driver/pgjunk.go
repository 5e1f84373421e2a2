package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"authsvc/internal/tokens"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL junk-token row (issue 37, point 8): a flood of one
// made-up personal access token whose checksum is valid (anyone can
// compute one: the CRC is no secret) at /info of the authsvc reading the
// PostgreSQL directory, counting the database's transactions across it
// (pg_stat_database: xact_commit + xact_rollback of authsvc's database,
// read from a session on another database, so that the reads are not
// counted). Such a token passes every check before the directory; each
// instance remembers a digest the database held no token of for a
// second, so the flood costs a query a second, not one a request.
//
// A backend reports its counts to pg_stat_database at most once a second
// while busy, and within 10 s of going idle (PostgreSQL's
// PGSTAT_IDLE_INTERVAL): the part waits pgStatsFlush before the first
// read, so that the counts of the load before are in, and again before
// the second, so that the flood's are. The window so counted also holds
// what authsvc asks without requests (its watch's poll, one transaction
// a second).
const pgStatsFlush = 11 * time.Second

// pgJunkResult is the flood's measure.
type pgJunkResult struct {
	err      error
	requests int
	refused  int // replies other than 2xx: every one, as a junk token's 401
	rps      float64
	xacts    int64         // transactions of authsvc's database over the window
	window   time.Duration // from the first read of the counts to the second
}

// perRequest is the transactions per request of the flood.
func (r pgJunkResult) perRequest() float64 {
	if r.requests == 0 {
		return 0
	}
	return float64(r.xacts) / float64(r.requests)
}

// pgJunk floods s, which reads the PostgreSQL directory at -pg-url, with
// one made-up, checksum-valid personal access token for a 2-s wrk run,
// and counts the database's transactions across it.
func (d *driver) pgJunk(s *server) pgJunkResult {
	var r pgJunkResult
	cfg, err := pgx.ParseConfig(d.cfg.pgURL)
	if err != nil {
		r.err = err
		return r
	}
	db := cfg.Database
	cfg.Database = "template1" // the counts' reads are not authsvc's database's transactions
	conn, err := pgx.ConnectConfig(d.ctx, cfg)
	if err != nil {
		r.err = fmt.Errorf("connect to read pg_stat_database: %v", err)
		return r
	}
	defer conn.Close(context.Background())
	xacts := func() (int64, error) {
		var n int64
		err := conn.QueryRow(d.ctx, `select xact_commit + xact_rollback from pg_stat_database where datname = $1`, db).Scan(&n)
		return n, err
	}
	tok, _ := tokens.NewPAT() // never stored: made up, with a valid checksum
	t := &target{name: "pg-junk-pat", url: s.url, token: tok, auth: "Bearer " + tok}
	if r.err = d.wantInfoStatus(t, http.StatusUnauthorized); r.err != nil {
		return r
	}
	d.logf("pg     junk personal access tokens: waiting %s for PostgreSQL's counts, flooding, waiting again", pgStatsFlush)
	if r.err = d.sleep(pgStatsFlush); r.err != nil {
		return r
	}
	before, err := xacts()
	if err != nil {
		r.err = err
		return r
	}
	start := time.Now()
	w, err := d.wrk("junk", t, false, d.cfg.conns, 2*time.Second)
	if err != nil {
		r.err = err
		return r
	}
	if r.err = d.sleep(pgStatsFlush); r.err != nil {
		return r
	}
	after, err := xacts()
	if err != nil {
		r.err = err
		return r
	}
	r.window = time.Since(start)
	r.requests, r.refused, r.rps, r.xacts = w.requests, w.non2xx, w.rps, after-before
	d.logf("pg     junk personal access tokens: %d requests, %d transactions in %s: %.4f a request",
		r.requests, r.xacts, r.window.Round(time.Second), r.perRequest())
	// Still refused, not throttled, after the flood.
	r.err = d.wantInfoStatus(t, http.StatusUnauthorized)
	return r
}

// wantInfoStatus checks that /info with t's Authorization answers want.
func (d *driver) wantInfoStatus(t *target, want int) error {
	req, err := http.NewRequestWithContext(d.ctx, "GET", t.url+"/api/auth/info", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", t.authorization())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("/info with %s: %s; want %d", t.name, resp.Status, want)
	}
	return nil
}
