// Package bench is Rookery's load harness: open-loop workloads over a follow graph, with
// latency measured from each request's intended send time (no coordinated omission) into HDR
// histograms per operation, the achieved rate against the target, errors by status, and sampled
// fan-out lag. A Target runs the operations; HTTPTarget runs them against a Rookery server.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rookery/rookery/graph"
	"github.com/rookery/rookery/internal/progress"
)

// Operations.
const (
	OpFeed     = "feed"     // read the first page of a user's home feed
	OpUser     = "user"     // read the first page of a user's own posts
	OpPost     = "post"     // create a post (DeathStarBench's text shape)
	OpFollow   = "follow"   // follow a random user
	OpUnfollow = "unfollow" // undo a follow of the graph
	OpLike     = "like"     // like a recent post
	OpDelete   = "delete"   // delete a recent post of one's own
	OpFanout   = "fanout_lag"
)

// Mixes are the workloads: operation -> share.
var Mixes = map[string]map[string]float64{
	"dsb":         {OpFeed: 0.6, OpUser: 0.3, OpPost: 0.1}, // DeathStarBench's social-network mix
	"follow":      {OpFollow: 0.5, OpUnfollow: 0.3, OpFeed: 0.2},
	"like":        {OpLike: 0.6, OpFeed: 0.3, OpPost: 0.1},
	"delete":      {OpPost: 0.4, OpDelete: 0.3, OpFeed: 0.3},
	"write-heavy": {OpPost: 0.5, OpLike: 0.3, OpFollow: 0.1, OpFeed: 0.1},
	"feed":        {OpFeed: 1}, // the feed-read target
	"post":        {OpPost: 1}, // the fan-out lag target (with --users followers)
}

// Request is one operation for a Target.
type Request struct {
	Op     string
	User   int    // the acting user
	Other  int    // follow, unfollow: the other user
	PostID string // like, delete
	Text   string // post
	Media  int    // post: how many media references it carries
	Limit  int    // feed, user posts: the page size (0: the target's own, DeathStarBench's 10)
	Cursor string // feed: the page after the one that returned it as Reply.Next
	// IDs asks a feed read for its post ids and next cursor (a lag probe). Without it a target may
	// read the body through without decoding it, as load generators do: the harness shares the
	// machine with the server it measures, and decoding every page would take CPU from it.
	IDs bool
}

// Reply is what a Target answers: the HTTP status (or 0 for a transport error) and, for a post,
// its id; Feed is the post ids of a feed read (for the fan-out lag probe), and Next the cursor of
// the page after it, if the target pages (Rookery does, the baselines do not).
type Reply struct {
	Status int
	PostID string
	Feed   []string
	Next   string
	// Rows are the posts of a feed or user-posts read, whole, from a baseline whose Hydrated is set
	// (what its HTTP front, rookery bench front, renders).
	Rows []PostRow
}

// PostRow is a post as a baseline reads it for its HTTP front: what Rookery's hydrated post shows.
type PostRow struct {
	ID        string
	Author    int
	Username  string // the author's, as the baseline keeps its users
	Text      string
	CreatedAt time.Time
	Likes     int64
	LikedByMe bool
}

// Target runs requests against a system under test.
type Target interface {
	Do(ctx context.Context, r Request) Reply
}

// Config is one run.
type Config struct {
	Graph    graph.Graph
	Mix      map[string]float64
	Rate     float64       // requests per second (open loop)
	Duration time.Duration // how long to send, at least (MinSamples)
	// MinSamples, if positive, has a run send for longer than Duration where the mix's rarest
	// operation would otherwise be expected fewer requests: a p99 of 200 requests is their second
	// slowest, which one stall of the machine decides (a sweep's low steps: 10 s at 200/s of the
	// dsb mix is 200 posts).
	MinSamples int
	Users      string // uniform, zipf, or followers (in proportion to followers)
	Prefix     string // the imported users' prefix (UserID)
	Seed       uint64
	// LagSample is the share of posts whose fan-out lag is probed: up to 3 followers' feeds are
	// read until the post is there (at most 10 s), 5 ms apart at first, then up to 50 ms; only
	// followers whose feed the run read before count (probeLag).
	LagSample float64
	Progress  io.Writer // the run's progress (a bar on a terminal, a line every few seconds elsewhere); nil for none
	// OnPost, if set, is told each post's id and when its 201 came (Streams.Posted).
	OnPost func(id string, at time.Time)
	// Meter, if set, measures the server around each run (its CPU, memory and catching up).
	Meter Meter
}

// OpResult is one operation's figures; latencies in milliseconds.
type OpResult struct {
	Count    int64          `json:"count"`
	Errors   map[string]int `json:"errors,omitempty"` // replies that were not 2xx, by status ("0": no reply)
	P50      float64        `json:"p50_ms"`
	P90      float64        `json:"p90_ms"`
	P99      float64        `json:"p99_ms"`
	P999     float64        `json:"p999_ms"`
	Max      float64        `json:"max_ms"`
	Mean     float64        `json:"mean_ms"`
	TimedOut int64          `json:"timed_out,omitempty"` // fan-out probes that never saw the post
	// Cold counts the fan-out probes left out because none of the followers they read had a feed
	// the run had read before (see probeLag).
	Cold int64 `json:"cold,omitempty"`
}

// Result is a run's figures.
type Result struct {
	TargetRate   float64              `json:"target_rate"`
	AchievedRate float64              `json:"achieved_rate"`
	Duration     float64              `json:"duration_s"`
	Requests     int64                `json:"requests"`
	ErrorRate    float64              `json:"error_rate"` // share of requests answered 5xx, 429 or not at all
	Ops          map[string]*OpResult `json:"ops"`
	Server       *ServerUsage         `json:"server,omitempty"` // from Config.Meter
}

// A Meter measures the server under load: Start before a run's first request, Stop after its
// last reply.
type Meter interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context, r *Result) // sets r.Server
}

// ServerUsage is what the server spent on a run, from its own metrics.
type ServerUsage struct {
	// CPUSeconds is the server's CPU from the run's start until its consumers caught up (or
	// gave up waiting), and CPUPerRequestMs that divided by the run's requests: what a request
	// costs, its events' handling included.
	CPUSeconds      float64 `json:"cpu_s"`
	CPUPerRequestMs float64 `json:"cpu_per_request_ms"`
	PeakRSSMiB      float64 `json:"peak_rss_mib"` // sampled every half second
	// BehindAtEnd is how many events the consumers had yet to handle when the last reply came,
	// and CaughtUpS how long after that they had none (negative: not within the wait).
	BehindAtEnd float64 `json:"behind_at_end"`
	CaughtUpS   float64 `json:"caught_up_s"`
	// EngineKiBPerRequest is what the embedded store's engine wrote over the same span (its WAL,
	// flushes and compactions) divided by the run's requests; 0 for a server without one. Less
	// noisy than the CPU from run to run, but compactions still owed at the end are not in it.
	EngineKiBPerRequest float64 `json:"engine_kib_per_request,omitempty"`
	// WALSyncs is how many times that engine synced its write-ahead log over the same span, and
	// WALSyncsSlow how many of those took longer than WALSlowMs (the largest bound of the engine's
	// histogram up to 50 ms): a synced write waits for a sync, so each slow one holds up every
	// write waiting on it (a POST's reply among them). WALSyncMaxMs bounds the slowest (0: over
	// the histogram's last bound, 10 s).
	WALSyncs     float64 `json:"wal_syncs,omitempty"`
	WALSyncsSlow float64 `json:"wal_syncs_slow,omitempty"`
	WALSlowMs    float64 `json:"wal_slow_ms,omitempty"`
	WALSyncMaxMs float64 `json:"wal_sync_max_ms,omitempty"`
}

type recorder struct {
	mu       sync.Mutex
	hist     map[string]*hdrhistogram.Histogram
	errs     map[string]map[string]int
	timedOut int64
	cold     int64
}

func (r *recorder) record(op string, d time.Duration, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hist[op]
	if h == nil {
		h = hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3)
		r.hist[op] = h
	}
	h.RecordValue(max(d.Microseconds(), 1))
	if status >= 300 || status == 0 {
		if r.errs[op] == nil {
			r.errs[op] = map[string]int{}
		}
		r.errs[op][fmt.Sprint(status)]++
	}
}

// sendTime is how long a run of cfg sends: Duration, or as long as it takes for the mix's rarest
// operation to be expected MinSamples requests at Rate, whichever is longer.
func (cfg Config) sendTime() time.Duration {
	total, rarest := 0.0, math.Inf(1)
	for _, w := range cfg.Mix {
		if w > 0 {
			total, rarest = total+w, math.Min(rarest, w)
		}
	}
	if cfg.MinSamples <= 0 || total == 0 {
		return cfg.Duration
	}
	need := time.Duration(float64(cfg.MinSamples) / (cfg.Rate * rarest / total) * float64(time.Second))
	return max(cfg.Duration, need)
}

// Run runs cfg against t and returns its figures.
func Run(ctx context.Context, t Target, cfg Config) (Result, error) {
	if cfg.Graph.Nodes == 0 {
		return Result{}, fmt.Errorf("bench: the graph has no users")
	}
	if cfg.Rate <= 0 || cfg.Duration <= 0 {
		return Result{}, fmt.Errorf("bench: rate and duration must be positive")
	}
	w, err := newWorkload(cfg)
	if err != nil {
		return Result{}, err
	}
	rec := &recorder{hist: map[string]*hdrhistogram.Histogram{}, errs: map[string]map[string]int{}}
	if cfg.Meter != nil {
		if err := cfg.Meter.Start(ctx); err != nil {
			return Result{}, err
		}
	}
	var wg sync.WaitGroup
	start := time.Now()
	next := start
	sent := int64(0)
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	lastReport := start
	duration := cfg.sendTime()
	bar := progress.New(cfg.Progress, "bench", int64(duration.Seconds()), "s")
	for ctx.Err() == nil {
		next = next.Add(time.Duration(rng.ExpFloat64() / cfg.Rate * float64(time.Second)))
		if next.Sub(start) >= duration {
			break
		}
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		req := w.next()
		intended := next
		sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := t.Do(ctx, req)
			if req.Op == OpPost && rep.Status < 300 && rep.PostID != "" && cfg.OnPost != nil {
				cfg.OnPost(rep.PostID, time.Now())
			}
			rec.record(req.Op, time.Since(intended), rep.Status)
			w.done(req, rep)
			if req.Op == OpPost && rep.Status < 300 && rep.PostID != "" && w.sampleLag() {
				w.probeLag(ctx, t, rec, req.User, rep.PostID, time.Now())
			}
		}()
		if time.Since(lastReport) >= 200*time.Millisecond {
			lastReport = time.Now()
			bar.Note(fmt.Sprintf("sent %d (%.0f/s of %.0f/s)", sent, float64(sent)/time.Since(start).Seconds(), cfg.Rate))
			bar.Set(int64(time.Since(start).Seconds()))
		}
	}
	bar.Set(int64(duration.Seconds()))
	bar.Finish()
	sendTime := time.Since(start)
	wg.Wait()
	res := Result{TargetRate: cfg.Rate, AchievedRate: float64(sent) / sendTime.Seconds(), Duration: sendTime.Seconds(), Requests: sent, Ops: map[string]*OpResult{}}
	var errors int64
	for op, h := range rec.hist {
		ms := func(v int64) float64 { return float64(v) / 1000 }
		o := &OpResult{Count: h.TotalCount(), Errors: rec.errs[op], P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)),
			P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max()), Mean: h.Mean() / 1000}
		if op == OpFanout {
			o.TimedOut, o.Cold = rec.timedOut, rec.cold
		} else {
			for st, n := range o.Errors {
				if st == "0" || st == "429" || st >= "500" {
					errors += int64(n)
				}
			}
		}
		res.Ops[op] = o
	}
	if res.Ops[OpFanout] == nil && rec.timedOut+rec.cold > 0 { // probes made, none counted
		res.Ops[OpFanout] = &OpResult{TimedOut: rec.timedOut, Cold: rec.cold}
	}
	if sent > 0 {
		res.ErrorRate = float64(errors) / float64(sent)
	}
	if cfg.Meter != nil {
		cfg.Meter.Stop(ctx, &res)
	}
	return res, ctx.Err()
}

// Sweep raises the rate from cfg.Rate by factor each step until some operation's p99 passes bound
// or errors pass 1%, then runs refine more steps between the last rate that passed and the first
// that failed, each at the geometric middle of the two (so the knee is known to within
// factor^(1/2^refine), not factor: with the coarse steps alone, the ratio of two systems' knees
// could only be a power of factor). It returns every step; the knee is the highest rate that
// passed (Knee). At most steps coarse steps run.
//
// A step that fails is run again at the same rate, up to retries more times, and fails only if
// every try does: a system past its knee fails each try, while one pause of the host (on shared
// hosts ~100 ms, now and then, whatever runs) spoils the p99 of the one step it falls in.
func Sweep(ctx context.Context, t Target, cfg Config, bound time.Duration, steps int, factor float64, refine, retries int) ([]Result, error) {
	var out []Result
	// try runs cfg.Rate until a try passes or 1+retries have failed, and says whether one passed.
	try := func() (bool, error) {
		for range 1 + max(retries, 0) {
			r, err := Run(ctx, t, cfg)
			if err != nil {
				return false, err
			}
			out = append(out, r)
			if passes(r, bound) {
				return true, nil
			}
		}
		return false, nil
	}
	passed, failed := 0.0, 0.0
	for range steps {
		ok, err := try()
		if err != nil {
			return out, err
		}
		if !ok {
			failed = cfg.Rate
			break
		}
		passed = cfg.Rate
		cfg.Rate *= factor
	}
	if passed == 0 || failed == 0 {
		return out, nil // every step passed, or the first failed: nothing to refine between
	}
	for range refine {
		cfg.Rate = math.Sqrt(passed * failed)
		ok, err := try()
		if err != nil {
			return out, err
		}
		if ok {
			passed = cfg.Rate
		} else {
			failed = cfg.Rate
		}
	}
	return out, nil
}

// Knee returns the highest rate of a sweep's results that passed the bound, and whether one did;
// reached says whether some rate failed it (false: every step passed, and the knee is higher
// still). A rate run more than once (Sweep's retries) passed if one of its tries did.
func Knee(results []Result, bound time.Duration) (rate float64, ok, reached bool) {
	for r, pass := range ratesPassed(results, bound) {
		if pass {
			rate, ok = max(rate, r), true
		} else {
			reached = true
		}
	}
	return rate, ok, reached
}

// ratesPassed says of each rate of a sweep's results whether one of its tries passed bound.
func ratesPassed(results []Result, bound time.Duration) map[float64]bool {
	passed := map[float64]bool{}
	for _, r := range results {
		passed[r.TargetRate] = passed[r.TargetRate] || passes(r, bound)
	}
	return passed
}

func passes(r Result, bound time.Duration) bool {
	return r.ErrorRate <= 0.01 && worstP99(r) <= float64(bound.Microseconds())/1000
}

func worstP99(r Result) float64 {
	_, p99 := worstOp(r)
	return p99
}

// worstOp is r's operation with the highest p99 (the fan-out lag aside), and that p99.
func worstOp(r Result) (name string, p99 float64) {
	for _, op := range slices.Sorted(maps.Keys(r.Ops)) {
		if o := r.Ops[op]; op != OpFanout && o.P99 > p99 {
			name, p99 = op, o.P99
		}
	}
	return name, p99
}

// Table writes r as a readable table.
func Table(out io.Writer, r Result) {
	fmt.Fprintf(out, "rate: target %.0f/s, achieved %.0f/s over %.1fs; %d requests, %.2f%% errors\n",
		r.TargetRate, r.AchievedRate, r.Duration, r.Requests, 100*r.ErrorRate)
	fmt.Fprintf(out, "%-11s %8s %9s %9s %9s %9s %9s  %s\n", "op", "count", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors")
	ops := make([]string, 0, len(r.Ops))
	for op := range r.Ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		o := r.Ops[op]
		var errs []string
		for st, n := range o.Errors {
			errs = append(errs, fmt.Sprintf("%s:%d", st, n))
		}
		slices.Sort(errs)
		if o.TimedOut > 0 {
			errs = append(errs, fmt.Sprintf("timed out:%d", o.TimedOut))
		}
		if o.Cold > 0 {
			errs = append(errs, fmt.Sprintf("cold (left out):%d", o.Cold))
		}
		fmt.Fprintf(out, "%-11s %8d %9.2f %9.2f %9.2f %9.2f %9.2f  %s\n", op, o.Count, o.P50, o.P90, o.P99, o.P999, o.Max, strings.Join(errs, " "))
	}
	if u := r.Server; u != nil {
		caught := fmt.Sprintf("caught up %.1f s after the load", u.CaughtUpS)
		if u.CaughtUpS < 0 {
			caught = "still behind when the wait ended"
		}
		engine := ""
		if u.EngineKiBPerRequest > 0 {
			engine = fmt.Sprintf("; its store's engine wrote %.1f KiB per request", u.EngineKiBPerRequest)
		}
		if u.WALSyncs > 0 {
			engine += fmt.Sprintf(" and synced its log %.0f times, %.0f of them slower than %.1f ms", u.WALSyncs, u.WALSyncsSlow, u.WALSlowMs)
			if u.WALSyncMaxMs > 0 {
				engine += fmt.Sprintf(" (the slowest at most %.0f ms)", u.WALSyncMaxMs)
			}
		}
		fmt.Fprintf(out, "server: %.1f s of CPU (%.2f ms per request, its events' handling included), peak RSS %.0f MiB; consumers %.0f events behind at the end, %s%s\n",
			u.CPUSeconds, u.CPUPerRequestMs, u.PeakRSSMiB, u.BehindAtEnd, caught, engine)
	}
}

// JSON writes v indented.
func JSON(out io.Writer, v any) error {
	e := json.NewEncoder(out)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

// Run files (rookery bench --out) hold the mix, the graph's size and the results.
type RunFile struct {
	Mix        string   `json:"mix"`
	Users      string   `json:"users"`
	GraphNodes int      `json:"graph_nodes"`
	GraphEdges int      `json:"graph_edges"`
	Results    []Result `json:"results"`
}

// Compare writes, for each operation, every run's p50 and p99 and their ratio to the first run's
// (the first result of each file): how many times slower (>1) or faster (<1) than the baseline.
func Compare(out io.Writer, names []string, runs []RunFile) {
	if len(runs) == 0 {
		return
	}
	var ops []string
	for _, r := range runs {
		if len(r.Results) == 0 {
			continue
		}
		for op := range r.Results[0].Ops {
			if !slices.Contains(ops, op) {
				ops = append(ops, op)
			}
		}
	}
	sort.Strings(ops)
	fmt.Fprintf(out, "%-11s %-28s %9s %9s %10s %10s\n", "op", "run", "p50 ms", "p99 ms", "p50 ratio", "p99 ratio")
	for _, op := range ops {
		base := runs[0].Results[0].Ops[op]
		for i, r := range runs {
			if len(r.Results) == 0 || r.Results[0].Ops[op] == nil {
				continue
			}
			o := r.Results[0].Ops[op]
			ratio := func(a, b float64) string {
				if base == nil || b == 0 {
					return "-"
				}
				return fmt.Sprintf("%.2fx", a/b)
			}
			var b50, b99 float64
			if base != nil {
				b50, b99 = base.P50, base.P99
			}
			fmt.Fprintf(out, "%-11s %-28s %9.2f %9.2f %10s %10s\n", op, names[i], o.P50, o.P99, ratio(o.P50, b50), ratio(o.P99, b99))
		}
	}
}

// DSBPageSize is DeathStarBench's page of feed and user-posts reads: the baselines read it, and it is
// the HTTP target's default.
const DSBPageSize = 10

// pageSize is the page r reads: r.Limit, else the target's own.
func (r Request) pageSize(own int) int {
	if r.Limit > 0 {
		return r.Limit
	}
	return own
}
