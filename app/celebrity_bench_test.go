package app_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/table"
)

// BenchmarkMillionFollowers is a synthetic author with 1,000,000 followers, on a durable
// Pebble store with table timelines: the edges are written straight to the table (the API would take
// minutes per million), 1,000 of the followers are real users whose timelines exist. It reports
// what a post by that author costs beside a post by an author with 100 followers (the API call, and
// the fan-out handler), and every sampled follower's next read. Run it alone:
//
//	go test -run '^$' -bench MillionFollowers -benchtime 1x -timeout 30m ./app
func BenchmarkMillionFollowers(b *testing.B) {
	const followers, sampled, posts = 1_000_000, 1_000, 200
	w := newBenchWorld(b, "table", 0)
	ctx := context.Background()
	w.users(b, "celeb", 1)
	w.users(b, "normal", 1)
	readers := w.users(b, "r", sampled)
	for i, r := range readers {
		if _, err := w.a.Follow(server, r, "celeb0"); err != nil {
			b.Fatal(err)
		}
		if i < 100 {
			if _, err := w.a.Follow(server, r, "normal0"); err != nil {
				b.Fatal(err)
			}
		}
	}
	w.run(b)
	w.drain(b)
	for _, r := range readers { // every sampled timeline exists
		if _, err := w.a.Feed(as(r), "", 20); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	at := time.Now().Add(-time.Hour)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := g; c < followers/100; c += 8 {
				ws := make([]table.Write, 0, 100)
				for i := c * 100; i < c*100+100; i++ {
					ws = append(ws, table.ImmutablePutWrite(app.FollowItemForTest(fmt.Sprintf("ghost%07d", i), "celeb0", at)))
				}
				if err := w.tab.TransactWrite(ctx, ws); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	if _, err := table.Add(ctx, w.tab, app.UserKeyForTest("celeb0"), "follower_count", followers); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %d follow edges in %v", followers, time.Since(start).Round(time.Second))

	b.ResetTimer()
	var lat = map[string][]time.Duration{}
	var last rookery.Post
	made := map[string][]rookery.Post{}
	for i := range posts {
		for _, author := range []string{"celeb0", "normal0"} {
			t0 := time.Now()
			p, _, err := w.a.CreatePost(as(author), app.PostInput{Text: fmt.Sprintf("post %d", i)})
			if err != nil {
				b.Fatal(err)
			}
			lat["post "+author] = append(lat["post "+author], time.Since(t0))
			made[author] = append(made[author], p)
			if author == "celeb0" {
				last = p
			}
		}
	}
	w.drain(b)
	// The fan-out handler itself, again on the posts just made (a post that is not there is
	// skipped: its event would time nothing); pushing a post again rewrites the same entries.
	for i := range posts {
		for _, author := range []string{"celeb0", "normal0"} {
			p := made[author][i]
			ev := postEventOf(p.ID, author, p.CreatedAt.Time)
			t0 := time.Now()
			if err := w.a.ApplyFanout(ctx, ev); err != nil {
				b.Fatal(err)
			}
			lat["fan-out "+author] = append(lat["fan-out "+author], time.Since(t0))
		}
	}
	have := 0
	for _, r := range readers {
		t0 := time.Now()
		p, err := w.a.Feed(as(r), "", 20)
		lat["read"] = append(lat["read"], time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if slices.ContainsFunc(p.Items, func(q rookery.Post) bool { return q.ID == last.ID }) {
			have++
		}
	}
	b.StopTimer()
	pct := func(l []time.Duration, q float64) float64 {
		l = slices.Clone(l)
		slices.Sort(l)
		return float64(l[int(q*float64(len(l)-1))].Microseconds()) / 1000
	}
	for _, k := range []string{"post celeb0", "post normal0", "fan-out celeb0", "fan-out normal0", "read"} {
		b.Logf("%-16s p50 %7.3f ms  p99 %7.3f ms", k, pct(lat[k], 0.5), pct(lat[k], 0.99))
	}
	b.ReportMetric(pct(lat["post celeb0"], 0.5)/pct(lat["post normal0"], 0.5), "post-cost-ratio")
	b.ReportMetric(pct(lat["read"], 0.99), "read-p99-ms")
	b.ReportMetric(float64(have)/sampled, "readers-with-post")
	if have != sampled {
		b.Errorf("%d of %d followers' next read had the post", have, sampled)
	}
}
