package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery/bench"
	"github.com/rookery/rookery/graph"
)

// fakeTarget answers after a fixed delay; it fails every tenth post with 503, and its feeds show
// every post made so far.
type fakeTarget struct {
	delay time.Duration
	n     atomic.Int64
	mu    sync.Mutex
	posts []string
	ops   map[string]int
}

func (f *fakeTarget) Do(ctx context.Context, r bench.Request) bench.Reply {
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops[r.Op]++
	switch r.Op {
	case bench.OpPost:
		if f.n.Add(1)%10 == 0 {
			return bench.Reply{Status: 503}
		}
		id := "p" + strings.Repeat("x", len(f.posts)%5) + string(rune('a'+len(f.posts)%26))
		f.posts = append(f.posts, id)
		return bench.Reply{Status: 201, PostID: id}
	case bench.OpFeed:
		return bench.Reply{Status: 200, Feed: append([]string(nil), f.posts...)}
	}
	return bench.Reply{Status: 200}
}

var tiny = graph.Graph{Nodes: 4, Edges: [][2]int32{{0, 1}, {2, 1}, {3, 1}, {1, 0}}}

func TestRunMeasuresAnOpenLoop(t *testing.T) {
	f := &fakeTarget{delay: 2 * time.Millisecond, ops: map[string]int{}}
	cfg := bench.Config{Graph: tiny, Mix: bench.Mixes["dsb"], Rate: 400, Duration: 2 * time.Second, Users: "followers", Prefix: "g", Seed: 7, LagSample: 0.5}
	r, err := bench.Run(context.Background(), f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.AchievedRate < 250 || r.AchievedRate > 550 {
		t.Fatalf("achieved %.0f/s of 400/s", r.AchievedRate)
	}
	feed, post := r.Ops[bench.OpFeed], r.Ops[bench.OpPost]
	if feed == nil || post == nil || r.Ops[bench.OpUser] == nil {
		t.Fatalf("ops = %v", r.Ops)
	}
	// The mix is kept (60/30/10 within sampling noise) and latencies include the target's delay.
	if share := float64(feed.Count) / float64(r.Requests); share < 0.5 || share > 0.7 {
		t.Fatalf("feed share %.2f", share)
	}
	if feed.P50 < 2 || feed.P99 < feed.P50 || feed.Max < feed.P99 {
		t.Fatalf("feed latencies %+v", feed)
	}
	// One post in ten failed with 503: counted by status, and in the error rate.
	if post.Errors["503"] == 0 || r.ErrorRate == 0 || r.ErrorRate > 0.05 {
		t.Fatalf("post errors %v, error rate %.3f", post.Errors, r.ErrorRate)
	}
	if lag := r.Ops[bench.OpFanout]; lag == nil || lag.Count == 0 {
		t.Fatalf("no fan-out lag was probed: %v", r.Ops)
	}
	var out bytes.Buffer
	bench.Table(&out, r)
	if !strings.Contains(out.String(), "p99.9 ms") || !strings.Contains(out.String(), "503:") {
		t.Fatalf("table:\n%s", out.String())
	}
}

// A coordinated-omission check: a target that stalls for 300 ms once makes every request that was
// due during the stall late, and the histogram shows it.
func TestLatencyIsFromTheIntendedSendTime(t *testing.T) {
	var stalled atomic.Bool
	f := &stallTarget{stalled: &stalled}
	cfg := bench.Config{Graph: tiny, Mix: map[string]float64{bench.OpFeed: 1}, Rate: 200, Duration: time.Second, Prefix: "g", Seed: 1}
	r, err := bench.Run(context.Background(), f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o := r.Ops[bench.OpFeed]; o.P90 < 50 {
		t.Fatalf("p90 %.1f ms: the stall does not show", o.P90)
	}
}

type stallTarget struct {
	stalled *atomic.Bool
	mu      sync.Mutex
}

func (s *stallTarget) Do(ctx context.Context, r bench.Request) bench.Reply {
	s.mu.Lock() // one request at a time, as a server stuck on a lock
	defer s.mu.Unlock()
	if !s.stalled.Swap(true) {
		time.Sleep(300 * time.Millisecond)
	}
	return bench.Reply{Status: 200}
}

func TestSweepFindsTheKnee(t *testing.T) {
	// A target that serves 100 requests a second: past that, queueing makes the p99 grow.
	f := &stallTarget{stalled: new(atomic.Bool)}
	f.stalled.Store(true)
	slow := &slowTarget{inner: f, each: 10 * time.Millisecond}
	cfg := bench.Config{Graph: tiny, Mix: map[string]float64{bench.OpFeed: 1}, Rate: 40, Duration: 700 * time.Millisecond, Prefix: "g", Seed: 1}
	const bound = 60 * time.Millisecond
	rs, err := bench.Sweep(context.Background(), slow, cfg, bound, 6, 1.5, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		t.Logf("rate %.0f: p99 %.1f ms", r.TargetRate, r.Ops[bench.OpFeed].P99)
	}
	knee, ok, reached := bench.Knee(rs, bound)
	if !ok || !reached || knee < 40 || knee > 150 {
		t.Fatalf("knee %.0f (%v, reached %v)", knee, ok, reached)
	}
	// The coarse steps end at the first that failed; the two refined ones lie between the highest
	// rate that passed and the lowest that failed before them, each at their geometric middle.
	coarse := 0
	for coarse < len(rs) && rs[coarse].Ops[bench.OpFeed].P99 <= 60 {
		coarse++
	}
	if len(rs) != coarse+1+2 {
		t.Fatalf("%d steps; want the %d coarse ones and 2 refined", len(rs), coarse+1)
	}
	lo, hi := rs[coarse-1].TargetRate, rs[coarse].TargetRate
	for _, r := range rs[coarse+1:] {
		mid := math.Sqrt(lo * hi)
		if math.Abs(r.TargetRate-mid) > 0.01 {
			t.Fatalf("a refined step at %.1f/s; want %.1f/s, between %.1f and %.1f", r.TargetRate, mid, lo, hi)
		}
		if r.Ops[bench.OpFeed].P99 <= 60 {
			lo = mid
		} else {
			hi = mid
		}
	}
	if knee != lo {
		t.Fatalf("knee %.1f; want the highest rate that passed, %.1f", knee, lo)
	}
}

type slowTarget struct {
	inner *stallTarget
	each  time.Duration
}

func (s *slowTarget) Do(ctx context.Context, r bench.Request) bench.Reply {
	s.inner.mu.Lock()
	defer s.inner.mu.Unlock()
	time.Sleep(s.each)
	return bench.Reply{Status: 200}
}

// pausingTarget is a slowTarget whose host pauses once, for 300 ms, at the first request it gets.
type pausingTarget struct {
	slow   *slowTarget
	paused atomic.Bool
}

func (p *pausingTarget) Do(ctx context.Context, r bench.Request) bench.Reply {
	if !p.paused.Swap(true) {
		p.slow.inner.mu.Lock()
		time.Sleep(300 * time.Millisecond)
		p.slow.inner.mu.Unlock()
	}
	return p.slow.Do(ctx, r)
}

// A sweep that retries a failed step is not ended by one pause of the host far below the knee
// (without retries, the pause fails its first step), and still ends where the target saturates:
// there every try fails.
func TestSweepRetriesAFailedStep(t *testing.T) {
	const bound = 60 * time.Millisecond
	cfg := bench.Config{Graph: tiny, Mix: map[string]float64{bench.OpFeed: 1}, Rate: 40, Duration: 700 * time.Millisecond, Prefix: "g", Seed: 1}
	for _, retries := range []int{0, 1} {
		// 100 requests a second at most, as in TestSweepFindsTheKnee, and a pause in the first step.
		p := &pausingTarget{slow: &slowTarget{inner: &stallTarget{stalled: new(atomic.Bool)}, each: 10 * time.Millisecond}}
		rs, err := bench.Sweep(context.Background(), p, cfg, bound, 6, 1.5, 0, retries)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			t.Logf("retries %d: rate %.0f: p99 %.1f ms", retries, r.TargetRate, r.Ops[bench.OpFeed].P99)
		}
		knee, ok, reached := bench.Knee(rs, bound)
		if retries == 0 {
			if ok || len(rs) != 1 {
				t.Fatalf("without retries: %d steps, knee %.0f (%v); want the paused first step to end the sweep", len(rs), knee, ok)
			}
			continue
		}
		if !ok || !reached || knee < 60 || knee > 150 {
			t.Fatalf("knee %.0f (%v, reached %v); want one past the pause, below the saturation", knee, ok, reached)
		}
		if len(rs) < 4 || rs[0].TargetRate != 40 || rs[1].TargetRate != 40 {
			t.Fatalf("%d steps; want the paused 40/s step tried twice first", len(rs))
		}
		last, before := rs[len(rs)-1], rs[len(rs)-2]
		if last.TargetRate != before.TargetRate || last.Ops[bench.OpFeed].P99 <= 60 || before.Ops[bench.OpFeed].P99 <= 60 {
			t.Fatalf("the last steps: %.0f/s (p99 %.1f) and %.0f/s (p99 %.1f); want one rate that failed both tries",
				before.TargetRate, before.Ops[bench.OpFeed].P99, last.TargetRate, last.Ops[bench.OpFeed].P99)
		}
	}
}

// busyTarget is a Rookery-like feed of a follower of busy authors: every post is followed at once
// by 250 newer ones (ids that sort by time, as ULIDs do), so it sits three pages of 100 deep when
// a lag probe first reads the feed; feeds page with cursors.
type busyTarget struct {
	mu    sync.Mutex
	posts []string // oldest first
	pages atomic.Int64
}

func (b *busyTarget) Do(ctx context.Context, r bench.Request) bench.Reply {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch r.Op {
	case bench.OpPost:
		id := fmt.Sprintf("%020d", len(b.posts))
		for range 251 {
			b.posts = append(b.posts, fmt.Sprintf("%020d", len(b.posts)))
		}
		return bench.Reply{Status: 201, PostID: id}
	case bench.OpFeed:
		b.pages.Add(1)
		from, _ := strconv.Atoi(r.Cursor) // how many of the newest the pages before held
		rep := bench.Reply{Status: 200}
		for i := len(b.posts) - 1 - from; i >= 0 && len(rep.Feed) < r.Limit; i-- {
			rep.Feed = append(rep.Feed, b.posts[i])
		}
		if from+len(rep.Feed) < len(b.posts) {
			rep.Next = strconv.Itoa(from + len(rep.Feed))
		}
		return rep
	}
	return bench.Reply{Status: 200}
}

// A lag probe finds a post that newer posts have pushed past the first page (it used to read one
// page of 10 and wait out its 10 s for a post that had been there all along).
func TestLagProbeReadsPastNewerPosts(t *testing.T) {
	b := &busyTarget{}
	cfg := bench.Config{Graph: tiny, Mix: bench.Mixes["post"], Rate: 50, Duration: time.Second, Users: "followers", Prefix: "g", Seed: 3, LagSample: 1}
	r, err := bench.Run(context.Background(), b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lag := r.Ops[bench.OpFanout]
	if lag == nil || lag.Count == 0 || r.Ops[bench.OpFanout].TimedOut != 0 {
		t.Fatalf("fan-out probes: %+v", lag)
	}
	if b.pages.Load() < 3*lag.Count {
		t.Fatalf("%d probes read %d pages; each needs at least 3", lag.Count, b.pages.Load())
	}
}

// okTarget answers every request at once.
type okTarget struct{}

func (okTarget) Do(ctx context.Context, r bench.Request) bench.Reply { return bench.Reply{Status: 200} }

// A run with MinSamples sends for longer than its Duration where the mix's rarest operation would
// get fewer requests; without it, for its Duration.
func TestMinSamplesLengthensARun(t *testing.T) {
	cfg := bench.Config{Graph: tiny, Mix: map[string]float64{bench.OpFeed: 9, bench.OpPost: 1}, Rate: 400, Duration: 200 * time.Millisecond, Prefix: "g", Seed: 1}
	short, err := bench.Run(context.Background(), okTarget{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MinSamples = 40 // 40 posts at 40/s: a second
	long, err := bench.Run(context.Background(), okTarget{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if short.Duration > 0.5 || long.Duration < 0.9 || long.Ops[bench.OpPost].Count < 20 {
		t.Fatalf("sent for %.2f s without MinSamples, %.2f s with it (%d posts)", short.Duration, long.Duration, long.Ops[bench.OpPost].Count)
	}
}
