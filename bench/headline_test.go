package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHeadline: the table takes medians over a measure's runs, computes capacity ratios run by run
// from each sweep's knee, and says a target holds only if every Rookery run meets it.
func TestHeadline(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, results ...Result) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := JSON(f, RunFile{Mix: "x", Results: results}); err != nil {
			t.Fatal(err)
		}
	}
	feed := func(p50, p99, cpu float64) Result {
		return Result{Ops: map[string]*OpResult{OpFeed: {P50: p50, P99: p99}}, Server: &ServerUsage{CPUPerRequestMs: cpu}}
	}
	step := func(rate, p99 float64) Result {
		return Result{TargetRate: rate, Ops: map[string]*OpResult{OpFeed: {P99: p99}}}
	}
	// check prints the table of dir and wants each line in it.
	check := func(wants ...string) {
		t.Helper()
		var b strings.Builder
		if err := Headline(&b, dir, 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(b.String(), want) {
				t.Errorf("the table lacks %q:\n%s", want, b.String())
			}
		}
	}
	disk, _ := json.Marshal(DiskSyncs{Syncs: 1000, P50Ms: 0.2, P99Ms: 0.4, MaxMs: 808, Over20ms: 3, Over50ms: 1, DurationS: 20})
	if err := os.WriteFile(filepath.Join(dir, DiskFile), disk, 0o644); err != nil {
		t.Fatal(err)
	}
	write("feed-rookery-1.json", feed(0.9, 4, 0.19))
	write("feed-rookery-2.json", feed(1.1, 4.5, 0.18)) // one run over 1 ms: p50 does not hold
	write("feed-rookery-3.json", feed(0.8, 3, 0.15))
	write("feed-redis-list-1.json", feed(0.7, 2, 0.1))
	write("capacity-reed98-rookery-1.json", step(1000, 10), step(1200, 20), step(1440, 80)) // knee 1200
	write("capacity-reed98-postgres-1.json", step(400, 10), step(480, 60))                  // knee 400: 3x
	write("capacity-epinions-rookery-1.json", step(1000, 10), step(1200, 20))               // never failed
	// Pairs are by run number: Rookery's run 2 failed its first step (an upper bound of the ratio:
	// below 1000/400), the baseline's run 3 did (a lower bound).
	write("capacity-epinions-rookery-2.json", step(1000, 90))
	write("capacity-epinions-rookery-3.json", step(1000, 10), step(1200, 10), step(1440, 90))
	write("capacity-epinions-postgres-1.json", step(400, 10), step(480, 90))
	write("capacity-epinions-postgres-2.json", step(400, 10), step(480, 90))
	write("capacity-epinions-postgres-3.json", step(400, 90))
	write("capacity-reed98-redis-list-1.json", step(1000, 10), step(1200, 10), step(1440, 10), step(1728, 90))
	check(
		"The disk under the runs (`rookery bench disk`): 1000 syncs of 4 KiB writes in 20 s: p50 0.20 ms, p99 0.40 ms, max 808 ms; 3 over 20 ms, 1 over 50 ms.",
		"| Reed98 feed reads at 2,000/s: p50 | 0.90 [0.80-1.10] ms |  | 0.70 ms |  | ≤ 1 ms | **no** |",
		"| Reed98 feed reads at 2,000/s: p99 | 4.00 [3.00-4.50] ms |  | 2.00 ms |  | ≤ 5 ms | yes |",
		"| Reed98 feed reads: server CPU per read | 0.18 [0.15-0.19] ms |",
		"| Reed98 dsb capacity (p99 ≤ 50ms, errors ≤ 1%) | 1200 /s | 400 /s | 1440 /s |  |  | - |",
		"| Reed98 capacity, Rookery / postgres front | 3.00 x |  |  |  | ≥ 2.5x | yes |",
		"| Reed98 capacity, Rookery / redis-list front | 0.83 x |  |  |  | ≥ 0.7x | yes |",
		"| soc-Epinions1 dsb capacity (p99 ≤ 50ms, errors ≤ 1%) | 1200 [1200-1200] /s (a run's sweep never failed: its knee is higher) (a run failed its first step, 1000/s: its knee is lower) | 400 [400-400] /s (a run failed its first step, 400/s: its knee is lower) |",
		// The step that ended each Rookery sweep (run 1 of soc-Epinions1 never failed).
		"| ... what ended Rookery's sweep | 1440/s: feed p99 80.0 ms |  |  |  |  | - |",
		"| ... what ended Rookery's sweep | 1000/s: feed p99 90.0 ms; 1440/s: feed p99 90.0 ms |",
		// Run 3: the baseline's knee is below 400/s, so the ratio is at least 1200/400.
		// Run 2's ratio is below 2.5: the target fails.
		"| soc-Epinions1 capacity, Rookery / postgres front | 3.00 [2.50-3.00] x (some runs' bounds: a sweep never failed, or one failed its first step) |  |  |  | ≥ 2.5x | **no** |",
	)

	// Sweeps that never failed bound their knees from below: a ratio is then a bound, and a
	// target holds or fails only where the bound decides it.
	dir = t.TempDir()
	write("capacity-reed98-rookery-1.json", step(1000, 10), step(1200, 20))    // >= 1200
	write("capacity-reed98-postgres-1.json", step(400, 10), step(480, 60))     // 400
	write("capacity-reed98-redis-list-1.json", step(1000, 10), step(1200, 10)) // >= 1200
	write("capacity-epinions-rookery-1.json", step(1000, 10), step(1200, 90))  // 1000
	write("capacity-epinions-postgres-1.json", step(300, 10))                  // >= 300
	write("capacity-epinions-redis-list-1.json", step(2000, 10))               // >= 2000
	check(
		"| Reed98 capacity, Rookery / postgres front | ≥ 3.00 x |  |  |  | ≥ 2.5x | yes |",
		"| Reed98 capacity, Rookery / redis-list front | not determined (both sweeps passed every step, or both failed their first) |  |  |  | ≥ 0.7x | - |",
		"| soc-Epinions1 capacity, Rookery / postgres front | ≤ 3.33 x |  |  |  | ≥ 2.5x | - |",
		"| soc-Epinions1 capacity, Rookery / redis-list front | ≤ 0.50 x |  |  |  | ≥ 0.7x | **no** |",
	)

	// A baseline whose first step failed bounds its knee from above (that step's rate): the ratio
	// is a lower bound, and decides the target when it is above it (session 42's soc-Epinions1
	// PostgreSQL front failed 200/s at once, beside Rookery's knee of 597/s).
	dir = t.TempDir()
	synced := step(720, 90) // its writes waited for slow log syncs
	synced.Server = &ServerUsage{WALSyncs: 1195, WALSyncsSlow: 10, WALSlowMs: 43.9}
	write("capacity-epinions-rookery-1.json", step(500, 10), step(600, 20), synced)      // 600
	write("capacity-epinions-postgres-1.json", step(200, 90))                            // < 200
	write("capacity-reed98-rookery-1.json", step(400, 10), step(480, 20), step(576, 90)) // 480
	write("capacity-reed98-postgres-1.json", step(400, 90))                              // < 400
	write("capacity-reed98-redis-list-1.json", step(400, 90))                            // < 400
	write("capacity-epinions-redis-list-1.json", step(800, 90))                          // < 800
	check(
		"| soc-Epinions1 dsb capacity (p99 ≤ 50ms, errors ≤ 1%) | 600 /s | (a run failed its first step, 200/s: its knee is lower) |",
		"| ... what ended Rookery's sweep | 720/s: feed p99 90.0 ms, 10 of 1195 log syncs over 43.9 ms |",
		"| soc-Epinions1 capacity, Rookery / postgres front | ≥ 3.00 x |  |  |  | ≥ 2.5x | yes |",
		"| Reed98 capacity, Rookery / postgres front | ≥ 1.20 x |  |  |  | ≥ 2.5x | - |",
		"| Reed98 capacity, Rookery / redis-list front | ≥ 1.20 x |  |  |  | ≥ 0.7x | yes |",
		"| soc-Epinions1 capacity, Rookery / redis-list front | ≥ 0.75 x |  |  |  | ≥ 0.7x | yes |",
	)

	// Rookery's sweep failed its first step (session 48: its POSTs waited out a stalling disk's
	// syncs): the ratio is below that step's rate over the baseline's knee, not 0.
	dir = t.TempDir()
	write("capacity-reed98-rookery-1.json", step(400, 230))                                    // < 400
	write("capacity-reed98-postgres-1.json", step(400, 90))                                    // < 400
	write("capacity-reed98-redis-list-1.json", step(2000, 10), step(2400, 10), step(2880, 90)) // 2400
	write("capacity-epinions-rookery-1.json", step(2000, 90))                                  // < 2000
	write("capacity-epinions-postgres-1.json", step(200, 10), step(240, 10), step(288, 90))    // 240
	write("capacity-epinions-redis-list-1.json", step(2000, 10), step(2400, 90))               // 2000
	check(
		"| Reed98 capacity, Rookery / postgres front | not determined (both sweeps passed every step, or both failed their first) |",
		"| Reed98 capacity, Rookery / redis-list front | ≤ 0.17 x |  |  |  | ≥ 0.7x | **no** |",
		// Below 8.33x says nothing of 2.5x; below 1.00x... nor of 0.7x.
		"| soc-Epinions1 capacity, Rookery / postgres front | ≤ 8.33 x |  |  |  | ≥ 2.5x | - |",
		"| soc-Epinions1 capacity, Rookery / redis-list front | ≤ 1.00 x |  |  |  | ≥ 0.7x | - |",
	)

	// Refined sweeps (Sweep's refine): the knee is the highest rate that passed, the last step's
	// when it passed (not a sweep that never failed), and what ended it the lowest rate that failed.
	dir = t.TempDir()
	write("capacity-reed98-rookery-1.json", step(1000, 10), step(1200, 20), step(1440, 80), step(1315, 30), step(1376, 45)) // 1376
	write("capacity-reed98-postgres-1.json", step(400, 10), step(480, 60), step(438, 70), step(419, 90))                    // 400
	write("capacity-reed98-redis-list-1.json", step(1000, 10), step(1200, 60), step(1095, 20), step(1146, 20))              // 1146
	check(
		"| Reed98 dsb capacity (p99 ≤ 50ms, errors ≤ 1%) | 1376 /s | 400 /s | 1146 /s |",
		"| ... what ended Rookery's sweep | 1440/s: feed p99 80.0 ms |",
		"| Reed98 capacity, Rookery / postgres front | 3.44 x |  |  |  | ≥ 2.5x | yes |",
		"| Reed98 capacity, Rookery / redis-list front | 1.20 x |  |  |  | ≥ 0.7x | yes |",
	)
	dir = t.TempDir()
	write("capacity-reed98-rookery-1.json", step(1000, 10), step(1200, 80), step(1095, 60), step(1047, 20)) // 1047
	write("capacity-reed98-postgres-1.json", step(400, 10), step(480, 60))                                  // 400
	check("| ... what ended Rookery's sweep | 1095/s: feed p99 60.0 ms |", "| Reed98 capacity, Rookery / postgres front | 2.62 x |")

	// Retried steps (Sweep's retries): a rate passed if one of its tries did, and what ended a
	// sweep is the lowest rate that failed every try, each try shown.
	dir = t.TempDir()
	write("capacity-reed98-rookery-1.json", step(1000, 10), step(1200, 80), step(1200, 20), step(1440, 80), step(1440, 90), step(1315, 30), step(1376, 45)) // 1376
	write("capacity-reed98-postgres-1.json", step(400, 10), step(480, 60), step(480, 70), step(438, 20), step(458, 70), step(458, 80))                      // 438
	check(
		"| Reed98 dsb capacity (p99 ≤ 50ms, errors ≤ 1%) | 1376 /s | 438 /s |",
		"| ... steps that failed a try and passed the next | 1 | 0 |  |  |  | - |",
		"| ... what ended Rookery's sweep | 1440/s: feed p99 80.0 ms (again: feed p99 90.0 ms) |",
		"| Reed98 capacity, Rookery / postgres front | 3.14 x |  |  |  | ≥ 2.5x | yes |",
	)
}
