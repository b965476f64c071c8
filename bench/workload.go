package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// workload draws requests for a run: the operation by the mix, the user by the chooser, and what
// the operation needs (another user, a recent post, DeathStarBench's text).
type workload struct {
	cfg       Config
	mu        sync.Mutex
	rng       *rand.Rand
	ops       []string
	cum       []float64
	zipf      *rand.Zipf
	followees []int32 // the followee of every edge: uniform over it is in proportion to followers
	followers [][]int32
	recent    []recentPost // a ring of posts made during the run
	ring      int
	warm      map[int32]bool // users whose feed the run has read (with Rookery: their timeline exists)
}

type recentPost struct {
	id     string
	author int
}

func newWorkload(cfg Config) (*workload, error) {
	w := &workload{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 2)), followers: make([][]int32, cfg.Graph.Nodes), warm: map[int32]bool{}}
	total := 0.0
	for _, op := range []string{OpFeed, OpUser, OpPost, OpFollow, OpUnfollow, OpLike, OpDelete} {
		if s := cfg.Mix[op]; s > 0 {
			total += s
			w.ops = append(w.ops, op)
			w.cum = append(w.cum, total)
		}
	}
	if total == 0 {
		return nil, fmt.Errorf("bench: the mix has no operations")
	}
	for _, e := range cfg.Graph.Edges {
		w.followees = append(w.followees, e[1])
		w.followers[e[1]] = append(w.followers[e[1]], e[0])
	}
	switch cfg.Users {
	case "", "uniform":
	case "zipf":
		w.zipf = rand.NewZipf(w.rng, 1.1, 1, uint64(cfg.Graph.Nodes-1))
	case "followers":
		if len(w.followees) == 0 {
			return nil, fmt.Errorf("bench: --users followers needs a graph with edges")
		}
	default:
		return nil, fmt.Errorf("bench: users must be uniform, zipf or followers, not %q", cfg.Users)
	}
	return w, nil
}

func (w *workload) user() int {
	switch {
	case w.zipf != nil:
		return int(w.zipf.Uint64())
	case w.cfg.Users == "followers":
		return int(w.followees[w.rng.IntN(len(w.followees))])
	}
	return w.rng.IntN(w.cfg.Graph.Nodes)
}

func (w *workload) next() Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	x := w.rng.Float64() * w.cum[len(w.cum)-1]
	op := w.ops[len(w.ops)-1]
	for i, c := range w.cum {
		if x < c {
			op = w.ops[i]
			break
		}
	}
	r := Request{Op: op, User: w.user()}
	switch op {
	case OpPost:
		r.Text, r.Media = w.text(r.User), 1+w.rng.IntN(5)
	case OpFollow:
		r.Other = w.rng.IntN(w.cfg.Graph.Nodes)
		if r.Other == r.User { // nobody follows themselves
			r.Other = (r.Other + 1) % w.cfg.Graph.Nodes
		}
	case OpUnfollow:
		if len(w.cfg.Graph.Edges) > 0 {
			e := w.cfg.Graph.Edges[w.rng.IntN(len(w.cfg.Graph.Edges))]
			r.User, r.Other = int(e[0]), int(e[1])
		}
	case OpLike, OpDelete:
		if len(w.recent) == 0 {
			r.Op, r.Text, r.Media = OpPost, w.text(r.User), 1+w.rng.IntN(5) // nothing to like or delete yet
			break
		}
		p := w.recent[w.rng.IntN(len(w.recent))]
		r.PostID = p.id
		if op == OpDelete {
			r.User = p.author
		}
	}
	return r
}

// done records what a request made.
func (w *workload) done(r Request, rep Reply) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Op == OpFeed && rep.Status == 200 {
		w.warm[int32(r.User)] = true
	}
	if r.Op == OpDelete {
		w.recent = slices.DeleteFunc(w.recent, func(p recentPost) bool { return p.id == r.PostID })
		return
	}
	if r.Op != OpPost || rep.PostID == "" {
		return
	}
	p := recentPost{id: rep.PostID, author: r.User}
	if len(w.recent) < 1000 {
		w.recent = append(w.recent, p)
	} else {
		w.recent[w.ring%len(w.recent)] = p
		w.ring++
	}
}

func (w *workload) sampleLag() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.Float64() < w.cfg.LagSample
}

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// text is DeathStarBench's compose shape: 256 random alphanumerics, 1-6 mentions of other users,
// 1-6 URLs of 64 random characters (about 560 characters); the post also carries 1-5 media ids.
func (w *workload) text(author int) string {
	var b strings.Builder
	for range 256 {
		b.WriteByte(alnum[w.rng.IntN(len(alnum))])
	}
	for range 1 + w.rng.IntN(6) {
		fmt.Fprintf(&b, " @%s", Username(w.cfg.Prefix, w.rng.IntN(w.cfg.Graph.Nodes)))
	}
	for range 1 + w.rng.IntN(6) {
		b.WriteString(" http://")
		for range 64 {
			b.WriteByte(alnum[w.rng.IntN(len(alnum))])
		}
	}
	return b.String()
}

// probeLag reads the feeds of up to 3 of author's followers until each holds post (at most 10 s),
// and records the time from accepted to the last one seeing it. The reads are 5 ms apart at first,
// then twice as far apart each time up to probeEvery: a figure is late by at most that much, and
// the probes do not swamp the server they measure (every 5 ms, 20 probes a second, each waiting
// out seconds of lag, made the feed reads a quarter of a loaded server's CPU).
//
// Only followers whose feed the run has read before count, as an active reader's: Rookery keeps
// timelines for readers, so a follower never read may have none, and its first read rebuilds one
// from the posts of everyone followed, which holds the post at once: that measures the read, not
// fan-out (at 1,000 posts/s on soc-Epinions1 nine probed followers in ten had no timeline). The
// followers picked are those warm ones first; the cold ones picked to make up 3 are read once
// after the others, not counted, and are warm for the next probe of the author. A probe with no
// warm follower counts as cold.
func (w *workload) probeLag(ctx context.Context, t Target, rec *recorder, author int, post string, accepted time.Time) {
	w.mu.Lock()
	fs := slices.Clone(w.followers[author])
	w.rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	var warm, cold []int32
	for _, f := range fs {
		if len(warm) == 3 {
			break
		}
		if w.warm[f] {
			warm = append(warm, f)
		} else if len(cold) < 3 {
			cold = append(cold, f)
		}
	}
	w.mu.Unlock()
	cold = cold[:min(len(cold), 3-len(warm))]
	defer func() { // read, so that they are warm for the next probe
		for _, f := range cold {
			w.inFeed(ctx, t, int(f), post)
		}
	}()
	if len(warm) == 0 {
		if len(cold) > 0 {
			rec.mu.Lock()
			rec.cold++
			rec.mu.Unlock()
		}
		return
	}
	deadline := accepted.Add(10 * time.Second)
	wait := 5 * time.Millisecond
	for _, f := range warm {
		for !w.inFeed(ctx, t, int(f), post) {
			if time.Now().After(deadline) || ctx.Err() != nil {
				rec.mu.Lock()
				rec.timedOut++
				rec.mu.Unlock()
				return
			}
			time.Sleep(wait)
			wait = min(2*wait, probeEvery)
		}
	}
	rec.record(OpFanout, time.Since(accepted), 200)
}

// inFeed reports whether post is in user's feed. It reads the first page, and the next one while
// every post of a page is newer than post: a follower of busy authors gets more than a page of
// posts in the time a probe waits (one got 130 posts/s at 1,000 posts/s on soc-Epinions1), and
// posts fanned out before post but created after it already sit above it when it arrives. The
// first page is a feed's usual 20 posts (most followers' hold the post or older ones), the next
// ones the API's largest: the probes read while the server is measured, and pages of 100 from
// the start took a third of a loaded server's CPU.
func (w *workload) inFeed(ctx context.Context, t Target, user int, post string) bool {
	cursor, limit := "", probeFirst
	for range probePages {
		rep := t.Do(ctx, Request{Op: OpFeed, User: user, Limit: limit, Cursor: cursor, IDs: true})
		if rep.Status == 200 {
			w.mu.Lock()
			w.warm[int32(user)] = true
			w.mu.Unlock()
		}
		if slices.Contains(rep.Feed, post) {
			return true
		}
		if rep.Next == "" || len(rep.Feed) == 0 || !newer(rep.Feed[len(rep.Feed)-1], post) {
			return false
		}
		cursor, limit = rep.Next, probeNext
	}
	return false
}

// newer reports whether post id a is newer than b. Only Rookery's feeds page (Reply.Next), and its
// post ids are ULIDs, which sort by creation time.
func newer(a, b string) bool { return len(a) == len(b) && a > b }

const (
	// probeEvery is the longest wait between a lag probe's reads.
	probeEvery = 50 * time.Millisecond
	// probeFirst and probeNext are the sizes of a lag probe's first page and of the pages after it;
	// probePages is the most pages of newer posts it reads through before it reads again later.
	probeFirst = 20
	probeNext  = 100
	probePages = 50
)

// UserID is the id of graph node i's user, as `rookery import graph --prefix` creates it.
func UserID(prefix string, i int) string { return fmt.Sprintf("%s%d", prefix, i) }

// Username is the username of graph node i's user.
func Username(prefix string, i int) string { return fmt.Sprintf("%s_%d", prefix, i) }
