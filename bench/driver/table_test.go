package main

import "testing"

// TestPairedRatio: each round's rate is divided by the other server's in
// the same round, and the median of those taken.
func TestPairedRatio(t *testing.T) {
	t.Parallel()
	rates := func(xs ...float64) []wrkResult {
		rs := make([]wrkResult, len(xs))
		for i, x := range xs {
			rs[i].rps = x
		}
		return rs
	}
	for _, tt := range []struct {
		name string
		a, b []wrkResult
		want float64
	}{
		{"loaded rounds pair with loaded rounds", rates(90, 45, 80), rates(100, 50, 100), 0.9},
		{"even count", rates(75, 100), rates(100, 100), 0.875},
		{"the shorter list bounds the rounds", rates(50, 60, 70), rates(100, 100), 0.55},
		{"a zero rate is left out", rates(50, 60, 70), rates(100, 0, 100), 0.6},
		{"no rounds", nil, nil, 0},
	} {
		if got := pairedRatio(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: pairedRatio = %v; want %v", tt.name, got, tt.want)
		}
	}
}
