package tabletest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery/table"
)

// Bench runs the table benchmarks against tables made by open: the operations the feed's hot
// paths make (a 20-item page newest first; a 20-item batch read for hydration; durable writes from
// many concurrent writers). Besides ns/op it reports latency percentiles of single operations.
func Bench(b *testing.B, open Factory) {
	b.Run("QueryPage20Desc", func(b *testing.B) { benchQuery(b, open) })
	b.Run("BatchGet20", func(b *testing.B) { benchBatchGet(b, open) })
	b.Run("DurableWrites64Writers/post", func(b *testing.B) { benchWrites(b, open, postItem, table.PutWrite) })
	b.Run("DurableWrites64Writers/entry", func(b *testing.B) { benchWrites(b, open, entryItem, table.PutWrite) })
	b.Run("DurableWrites64Writers/immutable-entry", func(b *testing.B) {
		benchWrites(b, open, entryItem, func(it table.Item, _ ...table.Cond) table.Write { return table.ImmutablePutWrite(it) })
	})
}

func benchTable(b *testing.B, open Factory) table.Table {
	return open(b, Config{Schema: Schema, Clock: NewClock(time.Now()), CursorKey: []byte("bench")})
}

// postItem is shaped like a post: ~300 bytes, indexed by author.
func postItem(author string, i int) table.Item {
	id := fmt.Sprintf("%s-%08d", author, i)
	return table.Item{
		table.PK: "POST#" + id, table.SK: "META",
		"GSI1PK": "USER#" + author, "GSI1SK": fmt.Sprintf("%013d#POST#%s", 1_700_000_000_000+int64(i), id),
		"author_id": author, "text": strings.Repeat("lorem ipsum ", 20), "created_at": int64(i),
		"tags": []string{"go", "feeds"}, "like_count": int64(i % 100), "visibility": "public",
	}
}

// entryItem is shaped like a timeline entry or a follow edge: ~80 bytes, not indexed.
func entryItem(user string, i int) table.Item {
	return table.Item{
		table.PK: "FEED#" + user, table.SK: fmt.Sprintf("%013d#POST#%08d", 1_700_000_000_000+int64(i), i),
		"author_id": "a" + user, "post_id": fmt.Sprintf("%08d", i),
	}
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

func benchQuery(b *testing.B, open Factory) {
	tab := benchTable(b, open)
	var items []table.Item
	for i := range 1000 {
		items = append(items, postItem("ann", i))
	}
	load(b, tab, items)
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
	reportPercentiles(b, lat)
}

func benchBatchGet(b *testing.B, open Factory) {
	tab := benchTable(b, open)
	const n = 10_000
	var items []table.Item
	for i := range n {
		items = append(items, postItem(fmt.Sprintf("u%d", i%100), i))
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

func benchWrites(b *testing.B, open Factory, make func(string, int) table.Item, put func(table.Item, ...table.Cond) table.Write) {
	tab := benchTable(b, open)
	var seq atomic.Int64
	// 64 writers in all, whatever GOMAXPROCS is.
	b.SetParallelism(max(1, 64/runtimeProcs()))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(seq.Add(1))
			if err := tab.TransactWrite(ctx, []table.Write{put(make(fmt.Sprintf("w%d", i%64), i))}); err != nil {
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
