package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rookery/rookery/graph"
)

// lazyTarget keeps feeds as Rookery does: a reader's timeline is made by their first read, from
// the posts of everyone they follow (so it holds every post made before it at once), and from
// then on a post reaches it only by fan-out, fanout after the post.
type lazyTarget struct {
	mu        sync.Mutex
	fanout    time.Duration
	posts     []lazyPost
	built     map[int]time.Time // reader -> when their timeline was made
	followees map[int][]int
}

type lazyPost struct {
	id     string
	author int
	at     time.Time
}

func (l *lazyTarget) Do(ctx context.Context, r Request) Reply {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	switch r.Op {
	case OpPost:
		p := lazyPost{id: fmt.Sprintf("%020d", len(l.posts)), author: r.User, at: now}
		l.posts = append(l.posts, p)
		return Reply{Status: 201, PostID: p.id}
	case OpFeed:
		made, ok := l.built[r.User]
		if !ok {
			made = now
			l.built[r.User] = made
		}
		rep := Reply{Status: 200}
		for _, p := range slices.Backward(l.posts) {
			if !slices.Contains(l.followees[r.User], p.author) {
				continue
			}
			if !p.at.After(made) || now.Sub(p.at) >= l.fanout { // pulled by the rebuild, or fanned out
				rep.Feed = append(rep.Feed, p.id)
			}
		}
		return rep
	}
	return Reply{Status: 200}
}

// A lag probe counts only followers whose feed the run had read: one whose first read rebuilds
// their timeline would see the post at once, whatever fan-out's lag. The cold followers it picks
// are read (and warm for the next probe), and the probe is counted as cold.
func TestLagProbeCountsWarmFollowersOnly(t *testing.T) {
	const readers = 20
	g := graph.Graph{Nodes: readers + 1}
	target := &lazyTarget{fanout: 40 * time.Millisecond, built: map[int]time.Time{}, followees: map[int][]int{}}
	for u := 1; u <= readers; u++ {
		g.Edges = append(g.Edges, [2]int32{int32(u), 0})
		target.followees[u] = []int{0}
	}
	w, err := newWorkload(Config{Graph: g, Mix: Mixes["post"], Users: "followers", Seed: 5, LagSample: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{hist: map[string]*hdrhistogram.Histogram{}, errs: map[string]map[string]int{}}
	probe := func() {
		rep := target.Do(context.Background(), Request{Op: OpPost, User: 0})
		w.probeLag(context.Background(), target, rec, 0, rep.PostID, time.Now())
	}

	probe() // no follower has been read: three are, and nothing is measured
	if rec.hist[OpFanout] != nil || rec.cold != 1 {
		t.Fatalf("a probe of cold followers: lags %v, cold %d; want none and 1", rec.hist[OpFanout], rec.cold)
	}
	if len(target.built) != 3 {
		t.Fatalf("the cold probe read %d followers; want 3", len(target.built))
	}
	for range 5 {
		probe()
	}
	h := rec.hist[OpFanout]
	if h == nil || h.TotalCount() != 5 || rec.cold != 1 {
		t.Fatalf("probes with warm followers: %v counted, cold %d; want 5 and 1", h, rec.cold)
	}
	if low := time.Duration(h.Min()) * time.Microsecond; low < target.fanout {
		t.Fatalf("a counted lag of %v, below fan-out's %v: a rebuild was measured", low, target.fanout)
	}
}
