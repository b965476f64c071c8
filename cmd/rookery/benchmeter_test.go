package main

import (
	"math"
	"testing"

	"github.com/rookery/rookery/bench"
)

// TestWALSyncs: the log syncs of a run are the difference of the cumulative buckets read before and
// after it; the slow ones are those above the largest bound up to 50 ms.
func TestWALSyncs(t *testing.T) {
	inf := math.Inf(1)
	before := map[float64]float64{0.01: 5, 0.0439: 8, 0.0512: 9, 1: 10, inf: 10}
	after := map[float64]float64{0.01: 10, 0.0439: 15, 0.0512: 17, 1: 19, inf: 19}
	var u bench.ServerUsage
	walSyncs(&u, before, after)
	if u.WALSyncs != 9 || u.WALSyncsSlow != 2 || u.WALSlowMs != 43.9 || u.WALSyncMaxMs != 1000 {
		t.Fatalf("figures %+v; want 9 syncs, 2 slower than 43.9 ms, the slowest at most 1000 ms", u)
	}
	// One sync past the last bound: the slowest is not bounded.
	after[inf] = 20
	u = bench.ServerUsage{}
	walSyncs(&u, before, after)
	if u.WALSyncs != 10 || u.WALSyncsSlow != 3 || u.WALSyncMaxMs != 0 {
		t.Fatalf("figures %+v; want 10 syncs, 3 slow, the slowest unbounded", u)
	}
	// No slow sync: the bound is still the largest up to 50 ms.
	fast := map[float64]float64{0.01: 15, 0.0439: 18, 0.0512: 19, 1: 20, inf: 20}
	u = bench.ServerUsage{}
	walSyncs(&u, before, fast)
	if u.WALSyncs != 10 || u.WALSyncsSlow != 0 || u.WALSlowMs != 43.9 || u.WALSyncMaxMs != 10 {
		t.Fatalf("figures %+v; want 10 syncs, none slower than 43.9 ms, the slowest at most 10 ms", u)
	}
	// A server without the engine's histogram reports none.
	u = bench.ServerUsage{}
	walSyncs(&u, nil, nil)
	if u.WALSyncs != 0 {
		t.Fatalf("figures %+v without a histogram", u)
	}
}
