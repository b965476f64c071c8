package pebble_test

import (
	"context"
	"slices"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/internal/pebblekit"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/table/tabletest"
)

func open(t testing.TB, opts pebble.Options) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConformanceInMemory(t *testing.T) {
	tabletest.Run(t, func(t testing.TB, cfg tabletest.Config) table.Table {
		return open(t, pebble.Options{InMemory: true, Schema: cfg.Schema, Clock: cfg.Clock, CursorKey: cfg.CursorKey})
	})
}

func TestConformanceOnDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: the in-memory run covers the same code; the on-disk run is skipped")
	}
	tabletest.Run(t, func(t testing.TB, cfg tabletest.Config) table.Table {
		return open(t, pebble.Options{Dir: t.TempDir(), Schema: cfg.Schema, Clock: cfg.Clock, CursorKey: cfg.CursorKey})
	})
}

func TestReopenKeepsItemsIndexesAndTTL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := tabletest.NewClock(time.Unix(1_800_000_000, 0))
	opts := pebble.Options{Dir: dir, Schema: tabletest.Schema, Clock: clock, CursorKey: []byte("k"), SweepInterval: -1}
	db, err := pebble.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range []table.Item{
		{table.PK: "a", table.SK: "1", "GSI1PK": "X", "GSI1SK": "1"},
		{table.PK: "a", table.SK: "2", "GSI1PK": "X", "GSI1SK": "2", table.TTL: int64(1_800_000_010)},
	} {
		if err := db.Put(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(ctx, table.Key{PK: "a", SK: "1"}); !rookery.IsKind(err, rookery.Unavailable) {
		t.Fatalf("Get after Close = %v; want Unavailable", err)
	}
	db = open(t, opts)
	p, err := db.Query(ctx, table.Query{Index: "GSI1", PK: "X"})
	if err != nil || len(p.Items) != 2 {
		t.Fatalf("index after reopen: %v, %v", p.Items, err)
	}
	// The sweeper removes the expired item and its index entries, and only it.
	clock.Advance(time.Minute)
	n, err := db.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if n, _ := db.Sweep(ctx); n != 0 {
		t.Fatalf("second Sweep removed %d", n)
	}
	p, err = db.Query(ctx, table.Query{Index: "GSI1", PK: "X"})
	if err != nil || len(p.Items) != 1 || p.Items[0].String(table.SK) != "1" {
		t.Fatalf("index after sweep: %v, %v", p.Items, err)
	}
}

// TestKeysOnlyAfterFullCopies: a store whose index partitions become keys only (a schema change of
// an existing store) answers from the full copies written before, and from the keys of those written
// after (a rewritten item among them), alike.
func TestKeysOnlyAfterFullCopies(t *testing.T) {
	ctx := context.Background()
	full := table.Schema{Indexes: []table.Index{{Name: "GSI1", PK: "GSI1PK", SK: "GSI1SK"}}}
	lean := full
	lean.Indexes = []table.Index{{Name: "GSI1", PK: "GSI1PK", SK: "GSI1SK", KeysOnly: []string{"LEAN#"}}}
	opts := pebble.Options{Dir: t.TempDir(), Schema: full, Clock: rookery.SystemClock, CursorKey: []byte("k"), SweepInterval: -1}
	item := func(sk, text string) table.Item {
		return table.Item{table.PK: "p", table.SK: sk, "GSI1PK": "LEAN#x", "GSI1SK": sk, "text": text}
	}
	db, err := pebble.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, sk := range []string{"1", "2"} {
		if err := db.Put(ctx, item(sk, "old "+sk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Schema = lean
	db = open(t, opts)
	for _, it := range []table.Item{item("2", "new 2"), item("3", "new 3")} {
		if err := db.Put(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	p, err := db.Query(ctx, table.Query{Index: "GSI1", PK: "LEAN#x"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range p.Items {
		got = append(got, it.String("text"))
	}
	if want := []string{"old 1", "new 2", "new 3"}; !slices.Equal(got, want) {
		t.Fatalf("texts = %q; want %q", got, want)
	}
}

func TestBackgroundSweep(t *testing.T) {
	ctx := context.Background()
	clock := tabletest.NewClock(time.Unix(1_800_000_000, 0))
	db := open(t, pebble.Options{InMemory: true, Clock: clock, CursorKey: []byte("k"), SweepInterval: 5 * time.Millisecond})
	for i := range 2500 { // more than one sweep round
		it := table.Item{table.PK: "p", table.SK: string(rune('a'+i%26)) + time.Duration(i).String(), table.TTL: int64(1_800_000_001)}
		if err := db.Put(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Sweep returns 0 once the background sweeper has removed everything.
		n, err := db.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("background sweeper did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkPebble measures the on-disk backend with durable (synced) writes, as deployed.
func BenchmarkPebble(b *testing.B) {
	tabletest.Bench(b, func(t testing.TB, cfg tabletest.Config) table.Table {
		return open(t, pebble.Options{Dir: t.TempDir(), Schema: cfg.Schema, Clock: cfg.Clock, CursorKey: cfg.CursorKey})
	})
}

// An item rewritten without changing its index keys or TTL keeps one entry of each, still swept
// when it expires; one rewritten with new ones keeps only the new.
func TestRewriteKeepsOneEntryEach(t *testing.T) {
	ctx := context.Background()
	clock := tabletest.NewClock(time.Unix(1_800_000_000, 0))
	schema := table.Schema{Indexes: []table.Index{{Name: "GSI1", PK: "GSI1PK", SK: "GSI1SK"}}}
	db := open(t, pebble.Options{InMemory: true, Schema: schema, Clock: clock, CursorKey: []byte("k"), SweepInterval: -1})
	entries := func(space byte) int {
		it, err := db.Engine().NewIter(&cpebble.IterOptions{LowerBound: []byte{space}, UpperBound: []byte{space + 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		n := 0
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		return n
	}
	k := table.Key{PK: "p", SK: "s"}
	put := func(ttl int64, isk string, n int64) {
		t.Helper()
		if err := db.Put(ctx, table.Item{table.PK: k.PK, table.SK: k.SK, "GSI1PK": "x", "GSI1SK": isk, "n": n, table.TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	put(1_800_000_100, "a", 1)
	if _, err := db.Update(ctx, k, table.Update{Add: map[string]int64{"n": 1}}); err != nil {
		t.Fatal(err)
	}
	put(1_800_000_100, "a", 3)
	if ix, ttl := entries(pebblekit.TableIndexes), entries(pebblekit.TableTTL); ix != 1 || ttl != 1 {
		t.Fatalf("after rewrites with the same keys: %d index entries, %d TTL entries; want 1, 1", ix, ttl)
	}
	p, err := db.Query(ctx, table.Query{Index: "GSI1", PK: "x"})
	if err != nil || len(p.Items) != 1 || p.Items[0].Int("n") != 3 {
		t.Fatalf("query = %v, %v; want the item with n 3", p.Items, err)
	}
	put(1_800_000_200, "b", 4)
	if ix, ttl := entries(pebblekit.TableIndexes), entries(pebblekit.TableTTL); ix != 1 || ttl != 1 {
		t.Fatalf("after a rewrite with new keys: %d index entries, %d TTL entries; want 1, 1", ix, ttl)
	}
	clock.Advance(150 * time.Second) // past the first TTL, not the second
	if n, err := db.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before the new TTL removed %d (%v); want 0", n, err)
	}
	clock.Advance(100 * time.Second)
	if n, err := db.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep after the new TTL removed %d (%v); want 1", n, err)
	}
	if ix, ttl := entries(pebblekit.TableIndexes), entries(pebblekit.TableTTL); ix != 0 || ttl != 0 {
		t.Fatalf("after the sweep: %d index entries, %d TTL entries; want 0, 0", ix, ttl)
	}
}
