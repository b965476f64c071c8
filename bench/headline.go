package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The headline comparison (scripts/bench-headline.sh, issue 25's targets): run files in one
// directory, named by what they measure, each measure repeated (-1, -2, ...):
//
//	feed-<target>-<n>.json               feed reads only, Reed98 at 2,000/s (targets: rookery, postgres, redis-list, fixed)
//	capacity-<graph>-<target>-<n>.json   a dsb sweep (graphs: reed98, epinions; targets: rookery, postgres, redis-list)
//	posts-rookery-<n>.json               posts only, soc-Epinions1 at 1,000/s, authors by followers
//
// postgres and redis-list are the baselines behind their HTTP front (rookery bench front), fixed
// the front's fixed reply: the floor of HTTP on the machine.

// DiskFile is the file of a headline's directory that holds the disk probe's figures (DiskSyncs).
const DiskFile = "disk.json"

// HeadlineTargets are the columns of the headline table, in order.
var HeadlineTargets = []string{"rookery", "postgres", "redis-list", "fixed"}

// Headline reads the run files in dir and writes the headline table (Markdown): per measure, each
// target's median and range over its runs, the ratio the target is stated in, and whether it
// holds in every run. bound is the sweeps' p99 bound.
func Headline(out io.Writer, dir string, bound time.Duration) error {
	runs := map[string]map[int]RunFile{} // file name without -<n>.json -> runs by n
	names, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	for _, n := range names {
		if filepath.Base(n) == DiskFile {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			return err
		}
		var r RunFile
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		base := strings.TrimSuffix(filepath.Base(n), ".json")
		i := strings.LastIndexByte(base, '-')
		k, err := strconv.Atoi(base[i+1:])
		if i <= 0 || err != nil {
			return fmt.Errorf("%s: not <measure>-<target>-<run>.json", n)
		}
		base = base[:i]
		if runs[base] == nil {
			runs[base] = map[int]RunFile{}
		}
		runs[base][k] = r
	}
	if len(runs) == 0 {
		return fmt.Errorf("no run files in %s", dir)
	}
	// values returns the figure of every run of measure that has it, in run order.
	values := func(measure string, f func(RunFile) (float64, bool)) []float64 {
		var vs []float64
		for _, k := range slices.Sorted(maps.Keys(runs[measure])) {
			if v, ok := f(runs[measure][k]); ok {
				vs = append(vs, v)
			}
		}
		return vs
	}
	op := func(name string, pick func(*OpResult) float64) func(RunFile) (float64, bool) {
		return func(r RunFile) (float64, bool) {
			if len(r.Results) == 0 || r.Results[0].Ops[name] == nil {
				return 0, false
			}
			return pick(r.Results[0].Ops[name]), true
		}
	}
	server := func(pick func(*ServerUsage) float64) func(RunFile) (float64, bool) {
		return func(r RunFile) (float64, bool) {
			if len(r.Results) == 0 || r.Results[0].Server == nil {
				return 0, false
			}
			return pick(r.Results[0].Server), true
		}
	}
	knee := func(r RunFile) (float64, bool) {
		rate, ok, _ := Knee(r.Results, bound)
		return rate, ok
	}
	p50 := func(o *OpResult) float64 { return o.P50 }
	p99 := func(o *OpResult) float64 { return o.P99 }

	if b, err := os.ReadFile(filepath.Join(dir, DiskFile)); err == nil {
		var d DiskSyncs
		if err := json.Unmarshal(b, &d); err != nil {
			return fmt.Errorf("%s: %w", DiskFile, err)
		}
		fmt.Fprintf(out, "The disk under the runs (`rookery bench disk`): %s.\n\n", d)
	}
	fmt.Fprintf(out, "| measure | %s | target | holds |\n", strings.Join(HeadlineTargets, " | "))
	fmt.Fprintf(out, "|---|%s---|---|\n", strings.Repeat("---|", len(HeadlineTargets)))
	// row writes one measure: each target's median [range], and whether Rookery's every run meets
	// limit (upper bound) when limit > 0.
	row := func(label, prefix string, f func(RunFile) (float64, bool), unit string, limit float64, target string) {
		cells := make([]string, len(HeadlineTargets))
		holds := "-"
		for i, t := range HeadlineTargets {
			vs := values(prefix+t, f)
			cells[i] = summary(vs, unit)
			if t == "rookery" && limit > 0 && len(vs) > 0 {
				holds = yesNo(slices.Max(vs) <= limit)
			}
		}
		fmt.Fprintf(out, "| %s | %s | %s | %s |\n", label, strings.Join(cells, " | "), target, holds)
	}
	row("Reed98 feed reads at 2,000/s: p50", "feed-", op(OpFeed, p50), "ms", 1, "≤ 1 ms")
	row("Reed98 feed reads at 2,000/s: p99", "feed-", op(OpFeed, p99), "ms", 5, "≤ 5 ms")
	row("Reed98 feed reads: server CPU per read", "feed-", server(func(s *ServerUsage) float64 { return s.CPUPerRequestMs }), "ms", 0.2, "≤ 0.2 ms")
	for _, g := range []struct{ key, label string }{{"reed98", "Reed98"}, {"epinions", "soc-Epinions1"}} {
		prefix := "capacity-" + g.key + "-"
		cells := make([]string, len(HeadlineTargets))
		for i, t := range HeadlineTargets {
			cells[i] = summary(values(prefix+t, knee), "/s")
			higher, failedAt := false, 0.0 // failedAt: the rate of a run whose first step failed
			for _, r := range runs[prefix+t] {
				switch k, b := kneeOf(r, bound); b {
				case kneeAtLeast:
					higher = true
				case kneeBelow:
					failedAt = k
				}
			}
			if higher {
				cells[i] += " (a run's sweep never failed: its knee is higher)"
			}
			if failedAt > 0 {
				cells[i] = strings.TrimSpace(cells[i] + fmt.Sprintf(" (a run failed its first step, %.0f/s: its knee is lower)", failedAt))
			}
		}
		fmt.Fprintf(out, "| %s dsb capacity (p99 ≤ %v, errors ≤ 1%%) | %s |  | - |\n", g.label, bound, strings.Join(cells, " | "))
		retried, shown := make([]string, len(HeadlineTargets)), false
		for i, t := range HeadlineTargets {
			if _, ok := runs[prefix+t]; ok {
				n := retriedSteps(runs[prefix+t], bound)
				retried[i], shown = strconv.Itoa(n), shown || n > 0
			}
		}
		if shown {
			fmt.Fprintf(out, "| ... steps that failed a try and passed the next | %s |  | - |\n", strings.Join(retried, " | "))
		}
		if ends := failedSteps(runs[prefix+"rookery"], bound); ends != "" {
			cells := make([]string, len(HeadlineTargets))
			cells[0] = ends
			fmt.Fprintf(out, "| ... what ended Rookery's sweep | %s |  | - |\n", strings.Join(cells, " | "))
		}
		// The ratios, run by run (Rookery's run n against the baseline's run n). A sweep that
		// never failed gives a lower bound of its knee, and one whose first step failed an upper
		// bound (that step's rate, not reached): the ratio is then a lower bound (Rookery's sweep
		// never failed, or the baseline's failed at once) or an upper bound (the baseline's never
		// failed, or Rookery's failed at once), and a target holds or fails only where the bound
		// decides it; with both kinds, or both sweeps failing at once, the run says nothing.
		for _, base := range []struct {
			name string
			min  float64
		}{{"postgres", 2.5}, {"redis-list", 0.7}} {
			var ratios []float64
			var atLeast, atMost, undecided int
			fails := false
			for _, k := range slices.Sorted(maps.Keys(runs[prefix+"rookery"])) {
				b, ok := runs[prefix+base.name][k]
				if !ok {
					continue
				}
				bk, bb := kneeOf(b, bound)
				rk, rb := kneeOf(runs[prefix+"rookery"][k], bound)
				if bk == 0 || bb == kneeBelow && rb == kneeBelow {
					continue
				}
				// rHigh: Rookery's knee is below rk, so the ratio is below r (not equal to it).
				lower := rb == kneeAtLeast || bb == kneeBelow
				rHigh := rb == kneeBelow
				upper := bb == kneeAtLeast || rHigh
				r := rk / bk
				switch {
				case lower && upper:
					continue
				case lower:
					atLeast++
					if r < base.min {
						undecided++
					}
				case upper:
					atMost++
					below := r < base.min || rHigh && r <= base.min
					if !below {
						undecided++
					}
					fails = fails || below
				default:
					fails = fails || r < base.min
				}
				ratios = append(ratios, r)
			}
			holds := "-"
			switch {
			case fails:
				holds = yesNo(false)
			case len(ratios) > 0 && undecided == 0:
				holds = yesNo(true)
			}
			cells := make([]string, len(HeadlineTargets))
			cells[0] = summary(ratios, "x")
			switch {
			case len(ratios) == 0 && len(runs[prefix+"rookery"]) > 0 && len(runs[prefix+base.name]) > 0:
				cells[0] = "not determined (both sweeps passed every step, or both failed their first)"
			case atLeast == len(ratios) && atLeast > 0:
				cells[0] = "≥ " + cells[0]
			case atMost == len(ratios) && atMost > 0:
				cells[0] = "≤ " + cells[0]
			case atLeast+atMost > 0:
				cells[0] += " (some runs' bounds: a sweep never failed, or one failed its first step)"
			}
			fmt.Fprintf(out, "| %s capacity, Rookery / %s front | %s | ≥ %.1fx | %s |\n", g.label, base.name, strings.Join(cells, " | "), base.min, holds)
		}
	}
	lag := op(OpFanout, p99)
	row("soc-Epinions1 posts at 1,000/s: fan-out lag p99", "posts-", func(r RunFile) (float64, bool) {
		v, ok := lag(r)
		return v / 1000, ok
	}, "s", 1, "≤ 1 s")
	row("... consumers back to zero lag after the load", "posts-", server(func(s *ServerUsage) float64 { return s.CaughtUpS }), "s", 5, "≤ 5 s")
	row("... server CPU per post", "posts-", server(func(s *ServerUsage) float64 { return s.CPUPerRequestMs }), "ms", 1, "≤ 1 ms")
	row("... peak RSS", "posts-", server(func(s *ServerUsage) float64 { return s.PeakRSSMiB * 1.048576 }), "MB", 548, "≤ 548 MB")
	return nil
}

// failedSteps says, for each run, the step that bounds its knee from above (the lowest rate that
// failed every try, a refined step's if one did): its rate, and for each try its worst p99 (or its
// errors) and how many of the server's log syncs over it were slow (a disk that stalls decides the
// p99 of the writes that wait for their sync).
func failedSteps(runs map[int]RunFile, bound time.Duration) string {
	var ends []string
	for _, k := range slices.Sorted(maps.Keys(runs)) {
		failed := 0.0
		for rate, pass := range ratesPassed(runs[k].Results, bound) {
			if !pass && (failed == 0 || rate < failed) {
				failed = rate
			}
		}
		if failed == 0 {
			continue
		}
		var tries []string
		for _, res := range runs[k].Results {
			if res.TargetRate != failed {
				continue
			}
			op, p99 := worstOp(res)
			try := fmt.Sprintf("%s p99 %s ms", op, num(p99))
			if res.ErrorRate > 0.01 {
				try = fmt.Sprintf("%.1f%% errors", 100*res.ErrorRate)
			}
			if u := res.Server; u != nil && u.WALSyncs > 0 {
				try += fmt.Sprintf(", %.0f of %.0f log syncs over %s ms", u.WALSyncsSlow, u.WALSyncs, num(u.WALSlowMs))
			}
			if len(tries) > 0 {
				try = "(again: " + try + ")"
			}
			tries = append(tries, try)
		}
		ends = append(ends, fmt.Sprintf("%s/s: %s", num(failed), strings.Join(tries, " ")))
	}
	return strings.Join(ends, "; ")
}

// retriedSteps counts the rates of runs' sweeps that failed a try and passed a later one (Sweep's
// retries): steps that one pause of the host would otherwise have ended.
func retriedSteps(runs map[int]RunFile, bound time.Duration) int {
	n := 0
	for _, r := range runs {
		failedOnce := map[float64]bool{}
		for _, res := range r.Results {
			if !passes(res, bound) {
				failedOnce[res.TargetRate] = true
			} else if failedOnce[res.TargetRate] {
				n++
			}
		}
	}
	return n
}

// kneeBound says what a sweep's knee (kneeOf) is.
type kneeBound int

const (
	kneeExact   kneeBound = iota // the knee: the sweep passed it and failed the next step
	kneeAtLeast                  // a lower bound: the sweep passed every step
	kneeBelow                    // an upper bound: the sweep failed its first step, at this rate
)

// kneeOf is r's knee (Knee) and what it is; a run without steps has knee 0.
func kneeOf(r RunFile, bound time.Duration) (float64, kneeBound) {
	knee, ok, reached := Knee(r.Results, bound)
	switch {
	case !ok && len(r.Results) > 0:
		return r.Results[0].TargetRate, kneeBelow
	case ok && !reached:
		return knee, kneeAtLeast
	}
	return knee, kneeExact
}

// summary is "median [min-max] unit" of vs, or "" for none.
func summary(vs []float64, unit string) string {
	if len(vs) == 0 {
		return ""
	}
	s := slices.Sorted(slices.Values(vs))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if len(s) == 1 {
		return fmt.Sprintf("%s %s", num(med), unit)
	}
	return fmt.Sprintf("%s [%s-%s] %s", num(med), num(s[0]), num(s[len(s)-1]), unit)
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}
