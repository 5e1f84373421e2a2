package main

import (
	"strings"
	"testing"

	"authsvc/internal/tokens"
)

// TestJunkPAT: the junk token has a personal access token's form, so the
// server takes it for one, and a checksum that fails, so it looks nothing up.
func TestJunkPAT(t *testing.T) {
	t.Parallel()
	for range 100 {
		junk, err := junkPAT()
		if err != nil {
			t.Fatal(err)
		}
		if len(junk) != tokens.PATLength || !strings.HasPrefix(junk, tokens.PATPrefix) {
			t.Fatalf("junkPAT() = %q; want %d characters starting %q", junk, tokens.PATLength, tokens.PATPrefix)
		}
		if tokens.ValidPAT(junk) {
			t.Fatalf("ValidPAT(junkPAT() = %q) = true; want false", junk)
		}
	}
}

// TestJunkPerRequest: commands are counted across each run (after −
// before), summed over a kind's runs and divided by its requests, the
// cache's link checks left out.
func TestJunkPerRequest(t *testing.T) {
	t.Parallel()
	before := map[string]int64{"ping": 10, "hmget": 5, "evalsha": 7}
	after := map[string]int64{"ping": 110, "hmget": 1005, "evalsha": 7, "get": 1}
	r := junkResult{runs: map[string][]junkRun{
		"k": {
			{wrk: wrkResult{requests: 1000}, calls: callsSince(before, after)},
			{wrk: wrkResult{requests: 1000}, calls: map[string]int64{"ping": 100}},
		},
	}}
	per, n, req, byName := r.perRequest("k")
	if per != 0.5005 || n != 1001 || req != 2000 {
		t.Errorf("perRequest = %v, %d, %d; want 0.5005, 1001, 2000", per, n, req)
	}
	if byName["ping"] != 200 || byName["hmget"] != 1000 || byName["get"] != 1 {
		t.Errorf("by name = %v; want ping 200, hmget 1000, get 1", byName)
	}
	if _, ok := byName["evalsha"]; ok {
		t.Errorf("by name = %v; want no evalsha (unchanged)", byName)
	}
}
