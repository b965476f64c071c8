package tabletest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery/table"
)

// Bench runs the table benchmarks against tables made by open: the operations the feed's hot
// paths make (a 20-item page newest first; a 20-item batch read for hydration; durable writes from
// many concurrent writers). Besides ns/op it reports latency percentiles of single operations.
func Bench(b *testing.B, open Factory) {
	b.Run("QueryPage20Desc", func(b *testing.B) { benchQuery(b, open, nil) })
	b.Run("BatchGet20", func(b *testing.B) { benchBatchGet(b, open) })
	b.Run("QueryPage20DescUnderWrites", func(b *testing.B) { benchQuery(b, open, postWrites) })
	b.Run("DurableWrites64Writers/post", func(b *testing.B) { benchWrites(b, open, WrittenPost, table.PutWrite) })
	b.Run("DurableWrites64Writers/entry", func(b *testing.B) { benchWrites(b, open, writtenEntry, table.PutWrite) })
	b.Run("DurableWrites64Writers/immutable-entry", func(b *testing.B) {
		benchWrites(b, open, writtenEntry, func(it table.Item, _ ...table.Cond) table.Write { return table.ImmutablePutWrite(it) })
	})
}

func benchTable(b *testing.B, open Factory) table.Table {
	return open(b, Config{Schema: Schema, Clock: NewClock(time.Now()), CursorKey: []byte("bench")})
}

// PostItem is the benchmarks' post: ~300 bytes, indexed by author (GSI1) newest last; i orders
// the author's posts.
func PostItem(author string, i int) table.Item {
	id := author + "-" + Padded(int64(i), 8)
	return table.Item{
		table.PK: "POST#" + id, table.SK: "META",
		"GSI1PK": "USER#" + author, "GSI1SK": Padded(1_700_000_000_000+int64(i), 13) + "#POST#" + id,
		"author_id": author, "text": postText, "created_at": int64(i),
		"tags": []string{"go", "feeds"}, "like_count": int64(i % 100), "visibility": "public",
	}
}

var postText = strings.Repeat("lorem ipsum ", 20)

// writers names the benchmarks' 64 writers; the i-th write is writer i%64's.
var writers = func() (names [64]string) {
	for w := range names {
		names[w] = "w" + strconv.Itoa(w)
	}
	return names
}()

// WrittenPost is the i-th item DurableWrites64Writers/post writes (and whose bytes the Pebble
// backend's engine-floor benchmark writes).
func WrittenPost(i int) table.Item { return PostItem(writers[i%len(writers)], i) }

func writtenEntry(i int) table.Item { return entryItem(writers[i%len(writers)], i) }

// entryItem is shaped like a timeline entry or a follow edge: ~80 bytes, not indexed.
func entryItem(user string, i int) table.Item {
	return table.Item{
		table.PK: "FEED#" + user, table.SK: Padded(1_700_000_000_000+int64(i), 13) + "#POST#" + Padded(int64(i), 8),
		"author_id": "a" + user, "post_id": Padded(int64(i), 8),
	}
}

// Padded is n in decimal, zero-padded to width digits: fmt.Sprintf("%0*d", width, n) at a
// fraction of the CPU, which the writers' benchmarks would otherwise spend beside the table on
// the same cores.
func Padded(n int64, width int) string {
	const zeros = "0000000000000000000"
	s := strconv.FormatInt(n, 10)
	if len(s) >= width {
		return s
	}
	return zeros[:min(width-len(s), len(zeros))] + s
}

func load(b *testing.B, tab table.Table, items []table.Item) {
	b.Helper()
	for chunk := range slices.Chunk(items, 25) {
		var ws []table.Write
		for _, it := range chunk {
			ws = append(ws, table.PutWrite(it))
		}
		if err := tab.TransactWrite(ctx, ws); err != nil {
			b.Fatal(err)
		}
	}
	// Read from the state a long-running store is in: a backend with a write buffer flushes it.
	if f, ok := tab.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchQuery measures QueryPage20Desc; background, if not nil, starts work that runs while the
// queries are measured and returns what stops it.
func benchQuery(b *testing.B, open Factory, background func(*testing.B, table.Table) (stop func())) {
	tab := benchTable(b, open)
	var items []table.Item
	for i := range 1000 {
		items = append(items, PostItem("ann", i))
	}
	load(b, tab, items)
	if background != nil {
		defer background(b, tab)()
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		p, err := tab.Query(ctx, table.Query{Index: "GSI1", PK: "USER#ann", Desc: true, Limit: 20})
		lat = append(lat, time.Since(start))
		if err != nil || len(p.Items) != 20 {
			b.Fatalf("query: %d items, %v", len(p.Items), err)
		}
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// postWrites is QueryPage20DescUnderWrites' background: other posts written at a steady rate
// (writeRate in all, each synced), the state of a live store: the engine's memtables fill and
// flush, level 0 holds several files, and compactions run. The writers run for a while before it
// returns, so that the engine is in that state when measuring starts. Stopping them reports the
// write rate reached.
func postWrites(b *testing.B, tab table.Table) (stop func()) {
	const (
		n         = 10     // writers
		writeRate = 10_000 // posts/s in all
		warmUp    = 2 * time.Second
	)
	done := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	began := time.Now()
	for w := range n {
		wg.Go(func() {
			tick := time.NewTicker(time.Second * n / writeRate)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				if err := tab.Put(ctx, PostItem(writers[w], i)); err != nil {
					b.Error(err)
					return
				}
				written.Add(1)
			}
		})
	}
	time.Sleep(warmUp)
	return func() {
		close(done)
		wg.Wait()
		b.ReportMetric(float64(written.Load())/time.Since(began).Seconds(), "writes/s")
	}
}

func benchBatchGet(b *testing.B, open Factory) {
	tab := benchTable(b, open)
	const n = 10_000
	var items []table.Item
	for i := range n {
		items = append(items, PostItem(fmt.Sprintf("u%d", i%100), i))
	}
	load(b, tab, items)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]table.Key, 20)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		for j := range keys {
			keys[j] = items[r.IntN(n)].Key()
		}
		start := time.Now()
		got, err := tab.BatchGet(ctx, keys)
		lat = append(lat, time.Since(start))
		if err != nil || len(got) != 20 || got[0] == nil {
			b.Fatalf("batch get: %v", err)
		}
	}
	reportPercentiles(b, lat)
}

func benchWrites(b *testing.B, open Factory, item func(i int) table.Item, put func(table.Item, ...table.Cond) table.Write) {
	tab := benchTable(b, open)
	var seq atomic.Int64
	// 64 writers in all, whatever GOMAXPROCS is.
	b.SetParallelism(max(1, len(writers)/runtimeProcs()))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(seq.Add(1))
			if err := tab.TransactWrite(ctx, []table.Write{put(item(i))}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "items/s")
}

// reportPercentiles reports the p50 and p99 of lat in microseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
