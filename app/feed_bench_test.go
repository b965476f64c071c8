package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/internal/cputime"
	"github.com/rookery/rookery/internal/testenv"
	"github.com/rookery/rookery/internal/testtable"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/pebblestore"
	tlredis "github.com/rookery/rookery/timeline/redis"
	"github.com/rookery/rookery/timeline/tablestore"
)

// The home timeline benchmarks, on Pebble on disk (synced, as `rookery serve` runs it)
// with timelines in the store's engine (rookery serve's default), table-backed or in Redis:
//
//	go test -run '^$' -bench 'Fanout|FeedRead' -benchtime 3x ./app
type benchWorld struct {
	a        *app.App
	tl       timeline.Store
	tab      table.Table
	log      events.Log
	outbox   *events.Outbox
	pipeline *eventstest.Pipeline
	ids      atomic.Int64
}

func newBenchWorld(b *testing.B, timelines string, threshold int) *benchWorld {
	db, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Schema: app.Schema, Clock: rookery.SystemClock, CursorKey: []byte("k")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return newBenchWorldOn(b, db, timelines, threshold)
}

func newBenchWorldOn(b *testing.B, db table.Table, timelines string, threshold int, with ...func(*app.Deps)) *benchWorld {
	var err error
	w := &benchWorld{tab: db}
	logOpts := embedded.Options{InMemory: true, Partitions: 4}
	switch timelines {
	case "store":
		// As rookery serve keeps them: in the Pebble store's engine, in their own layout, written
		// unsynced since the event log and its consumer offsets are in the same engine.
		engine := db.(*pebble.DB).Engine()
		logOpts.Engine = engine
		s := pebblestore.New(engine, pebblestore.Options{SweepEvery: -1, Unsynced: true})
		b.Cleanup(func() { s.Close() })
		w.tl = s
	case "table":
		w.tl = testtable.Timelines(b, db, tablestore.Options{})
	case "redis":
		client := goredis.NewUniversalClient(tlredis.ClientOptions([]string{testenv.RedisAddr()}))
		prefix := fmt.Sprintf("rookerybench-%d", time.Now().UnixNano())
		s := tlredis.New(client, tlredis.Options{Prefix: prefix})
		b.Cleanup(func() { s.Drop(context.Background()); client.Close() })
		w.tl = s
	}
	raw, err := embedded.Open(logOpts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { raw.Close() })
	w.log = raw
	w.outbox = &events.Outbox{Table: db, Log: raw, Shards: 4, Poll: 10 * time.Millisecond}
	d := app.Deps{Table: db, Events: raw, Outbox: w.outbox, Clock: rookery.SystemClock, Timelines: w.tl,
		CelebrityThreshold: threshold, IDs: func() string { return fmt.Sprintf("%020d", w.ids.Add(1)) }}
	for _, f := range with {
		f(&d)
	}
	w.a = app.New(d)
	return w
}

// run starts the pipeline (for the setup; the measured part calls the handlers or reads).
func (w *benchWorld) run(b *testing.B) {
	w.pipeline = eventstest.RunPipeline(b, w.outbox, w.log, w.a.Consumers())
}

func (w *benchWorld) drain(b *testing.B) { w.pipeline.Drain(b, 5*time.Minute) }

var server = rookery.WithCaller(context.Background(), rookery.Caller{UserID: "app", Server: true})

func as(u string) context.Context {
	return rookery.WithCaller(context.Background(), rookery.Caller{UserID: u})
}

func (w *benchWorld) users(b *testing.B, prefix string, n int) []string {
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		if _, _, err := w.a.PutUser(server, id, app.UserInput{Username: "user_" + id}); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// fanoutWorld is an author with n followers whose timelines exist, each holding held older
// entries.
func fanoutWorld(b *testing.B, store string, n, held int) *benchWorld {
	w := newBenchWorld(b, store, 0)
	w.users(b, "author", 1)
	old := make([]timeline.Entry, held)
	for i := range old {
		old[i] = timeline.Entry{PostID: fmt.Sprintf("O%012d", i), AuthorID: "other", At: time.Now().Add(-2*time.Hour + time.Duration(i)*time.Second)}
	}
	for _, f := range w.users(b, "f", n) {
		if _, err := w.a.Follow(server, f, "author0"); err != nil {
			b.Fatal(err)
		}
		if err := w.tl.Create(context.Background(), f, old); err != nil {
			b.Fatal(err)
		}
	}
	return w
}

// newest returns the post of user's newest timeline entry ("" if it has none).
func newest(b *testing.B, w *benchWorld, user string) string {
	pg, err := w.tl.Page(context.Background(), user, timeline.Entry{}, 1)
	if err != nil {
		b.Fatal(err)
	}
	if len(pg.Entries) == 0 {
		return ""
	}
	return pg.Entries[0].PostID
}

// settle flushes the Pebble engine under tab (if it is one), waits until no flush or compaction
// has run for 200 ms (Pebble starts one whenever a level is over its target), and returns when the
// last one it saw ended (to within a 20 ms poll), or when the flush returned: the engine's work
// ends there, and the 200 ms that confirm it is idle are not part of it.
func settle(b *testing.B, tab table.Table) time.Time {
	db, ok := tab.(*pebble.DB)
	if !ok {
		return time.Now()
	}
	engine := db.Engine()
	if err := engine.Flush(); err != nil {
		b.Fatal(err)
	}
	busy := time.Now()
	deadline := busy.Add(5 * time.Minute)
	last := engine.Metrics()
	for idle := 0; idle < 10; {
		time.Sleep(20 * time.Millisecond)
		m := engine.Metrics()
		idle++
		if m.Compact.NumInProgress > 0 || m.Flush.NumInProgress > 0 || m.Compact.Count != last.Compact.Count || m.Flush.Count != last.Flush.Count {
			idle, busy = 0, time.Now()
		}
		last = m
		if time.Now().After(deadline) {
			b.Fatal("still compacting after 5 minutes")
		}
	}
	return busy
}

func postEvent(n int64, at time.Time) rookery.Event { return postEventOf(postIDOf(n), "author0", at) }

// postIDOf is the id of the n-th post a benchmark makes (makePosts): a ULID (CreatePost takes no
// other id) that sorts as n does.
func postIDOf(n int64) string { return fmt.Sprintf("01J%023d", n) }

// postEventOf is the PostCreated event of post id by author.
func postEventOf(id, author string, at time.Time) rookery.Event {
	p, _ := json.Marshal(app.PostPayload{PostID: id, AuthorID: author, CreatedAt: rookery.Time{Time: at}})
	return rookery.Event{ID: "ev-" + id, Type: app.PostCreated, Payload: p}
}

// makePosts creates posts from..to (postIDOf) by author, untimed: the fan-out reads the post it
// pushes and does nothing for one that is not there (deleted before its fan-out), so a benchmark
// of events of posts never made would time nothing.
func makePosts(b *testing.B, w *benchWorld, author string, from, to int64) {
	for n := from; n <= to; n++ {
		if _, _, err := w.a.CreatePost(as(author), app.PostInput{ID: postIDOf(n), Text: fmt.Sprintf("post %d", n)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFanout measures fan-out throughput: PostCreated events of an author with 10,000
// followers (every timeline exists), handled by 8 workers as the fan-out consumer runs them. In
// "redis-full" every timeline already holds 200 entries, as timelines in use do: Redis keeps a
// sorted set of more than 128 entries as a skip list, where an insert costs more.
//
// The timed part ends when Pebble has flushed and compacted what the run wrote (and starts once
// the setup's writes are compacted), so the figure is a rate the store can keep up, not one that
// leaves compaction debt behind (on two cores that debt made runs of the same code differ 2x).
// entries/s is over that span; ns/op also counts the 200 ms in which settle sees the engine idle.
func BenchmarkFanout(b *testing.B) {
	for _, c := range []struct {
		name, store string
		held        int
	}{{"store", "store", 0}, {"table", "table", 0}, {"redis", "redis", 0}, {"redis-full", "redis", 200}} {
		b.Run(c.name, func(b *testing.B) {
			const followers = 10_000
			w := fanoutWorld(b, c.store, followers, c.held)
			var seq atomic.Int64
			start := time.Now().Add(-time.Hour)
			b.SetParallelism(4) // 8 workers on 2 cores
			makePosts(b, w, "author0", 1, int64(b.N))
			settle(b, w.tab)
			cpu0 := cputime.Process()
			b.ResetTimer()
			began := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					if err := w.a.ApplyFanout(context.Background(), postEvent(n, start.Add(time.Duration(n)*time.Millisecond))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			end := settle(b, w.tab)
			b.StopTimer()
			// A run whose pushes wrote nothing (its posts skipped) would report a rate of nothing.
			if newest(b, w, "f0") != postIDOf(int64(b.N)) {
				b.Fatal("follower f0's newest entry is not the last post pushed")
			}
			b.ReportMetric(float64(b.N)*followers/end.Sub(began).Seconds(), "entries/s")
			b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N*followers), "cpu-µs/entry")
		})
	}
}

// BenchmarkRemovePost measures the cleanup of a deleted post held by 10,000 timelines (the time of
// RemovePost alone; the fan-out before it is not timed).
func BenchmarkRemovePost(b *testing.B) {
	for _, store := range []string{"store", "table", "redis"} {
		b.Run(store, func(b *testing.B) {
			w := fanoutWorld(b, store, 10_000, 0)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				makePosts(b, w, "author0", int64(i+1), int64(i+1))
				ev := postEvent(int64(i+1), time.Now())
				if err := w.a.ApplyFanout(ctx, ev); err != nil {
					b.Fatal(err)
				}
				// Untimed: the post reached the timelines, so that the removal has something to remove.
				post := postIDOf(int64(i + 1))
				if newest(b, w, "f0") != post {
					b.Fatalf("follower f0's newest entry is not post %s before its removal", post)
				}
				b.StartTimer()
				if err := w.tl.RemovePost(ctx, post); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if newest(b, w, "f0") == post {
					b.Fatalf("post %s is still in follower f0's timeline after its removal", post)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkFeedRead measures GET /v1/feed's application work (20 hydrated posts): a reader who
// follows 200 authors with 20 posts each, from a stored timeline; and a reader who follows 50
// celebrities (merged at read time) with 20 posts each.
func BenchmarkFeedRead(b *testing.B) {
	for _, store := range []string{"store", "table", "redis"} {
		for _, shape := range []string{"followees", "celebrities"} {
			b.Run(store+"/"+shape, func(b *testing.B) {
				authors := 200
				threshold := 1_000
				if shape == "celebrities" {
					authors, threshold = 50, 1 // two followers make a celebrity
				}
				w := newBenchWorld(b, store, threshold)
				w.run(b)
				readers := w.users(b, "reader", 2)
				for _, r := range readers {
					if _, err := w.a.Feed(as(r), "", 20); err != nil { // the timeline exists from now on
						b.Fatal(err)
					}
				}
				for _, au := range w.users(b, "a", authors) {
					for _, r := range readers {
						if _, err := w.a.Follow(server, r, au); err != nil {
							b.Fatal(err)
						}
					}
				}
				w.drain(b)
				for i := range 20 {
					for j := range authors {
						if _, _, err := w.a.CreatePost(as(fmt.Sprintf("a%d", j)), app.PostInput{Text: fmt.Sprintf("post %d", i)}); err != nil {
							b.Fatal(err)
						}
					}
				}
				w.drain(b)
				ctx := as(readers[0])
				if p, err := w.a.Feed(ctx, "", 20); err != nil || len(p.Items) != 20 {
					b.Fatalf("feed = %d posts, %v", len(p.Items), err)
				}
				lat := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for range b.N {
					t0 := time.Now()
					if _, err := w.a.Feed(ctx, "", 20); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				b.StopTimer()
				slices.Sort(lat)
				pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
				b.ReportMetric(pct(0.5), "p50-ms")
				b.ReportMetric(pct(0.99), "p99-ms")
			})
		}
	}
}
