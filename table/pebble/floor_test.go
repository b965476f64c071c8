package pebble

import (
	"log/slog"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery/internal/pebblekit"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/tabletest"
)

// BenchmarkEngineFloor measures what the storage engine alone sustains on this machine for the
// DurableWrites64Writers benchmark's shape: 64 writers, each committing one entry-sized key with a
// synced WAL, with the table's engine options and nothing of the table layer (no reads, no
// locks, no index or TTL keys, no encoding). It is the ceiling the table's durable writes are
// measured against, in the same run:
//
//	go test -run '^$' -bench 'EngineFloor|Pebble/DurableWrites' -benchtime 2s -count 3 ./table/pebble/
//
// "commit-per-write" is Pebble's own group commit (concurrent batches share a WAL sync);
// "one-committer" is group commit done by hand: one goroutine folds every waiting write into one
// batch per sync. "commit-per-write-post" is the first with the post benchmark's bytes: the two
// keys a post is stored as (the item and its index entry), each with the encoded item as value.
func BenchmarkEngineFloor(b *testing.B) {
	commitPerWrite := func(b *testing.B, shape floorShape) {
		db := openFloor(b)
		floorWriters(b, shape, func(kvs [][2][]byte) error {
			batch := db.NewBatch()
			defer batch.Close()
			for _, kv := range kvs {
				if err := batch.Set(kv[0], kv[1], nil); err != nil {
					return err
				}
			}
			return batch.Commit(cpebble.Sync)
		})
	}
	b.Run("commit-per-write", func(b *testing.B) { commitPerWrite(b, entryShape) })
	b.Run("commit-per-write-post", func(b *testing.B) { commitPerWrite(b, postShape) })
	b.Run("one-committer", func(b *testing.B) {
		db := openFloor(b)
		type req struct {
			kvs  [][2][]byte
			done chan error
		}
		reqs := make(chan req, 64)
		go func() {
			for r := range reqs {
				group := []req{r}
			more:
				for {
					select {
					case r, ok := <-reqs:
						if !ok {
							break more
						}
						group = append(group, r)
					default:
						break more
					}
				}
				batch := db.NewBatch()
				for _, r := range group {
					for _, kv := range r.kvs {
						_ = batch.Set(kv[0], kv[1], nil)
					}
				}
				err := batch.Commit(cpebble.Sync)
				batch.Close()
				for _, r := range group {
					r.done <- err
				}
			}
		}()
		defer close(reqs)
		floorWriters(b, entryShape, func(kvs [][2][]byte) error {
			done := make(chan error, 1)
			reqs <- req{kvs, done}
			return <-done
		})
	})
}

func openFloor(b *testing.B) *cpebble.DB {
	db, err := pebblekit.Open("floor", pebblekit.Config{Name: "floor", Dir: b.TempDir(), CacheBytes: 128 << 20,
		Logger: slog.New(slog.DiscardHandler), Tune: tune})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// A floorShape is what the i-th write stores: its keys and their values.
type floorShape func(i int64) [][2][]byte

// entryShape is one entry-sized key and value, as a timeline entry or a follow edge is stored.
func entryShape(i int64) [][2][]byte {
	k := "bFEED#w" + strconv.FormatInt(i%64, 10) + "\x00\x01" + tabletest.Padded(1_700_000_000_000+i, 13) + "#POST#" + tabletest.Padded(i, 8) + "\x00\x01"
	return [][2][]byte{{[]byte(k), entryValue}}
}

var entryValue = make([]byte, 64) // an encoded timeline entry or follow edge is about this long

// postShape is what the table stores for the post benchmark's i-th write: the item's key and its
// index entry's, each with the encoded item (one item's encoding for all, so that the floor does
// no encoding).
func postShape(i int64) [][2][]byte {
	it := tabletest.WrittenPost(int(i))
	ix := tabletest.Schema.Indexes[0]
	ipk, isk, _ := indexKeyOf(ix, it)
	return [][2][]byte{{baseKey(it.Key()), postValue}, {indexKey(ix.Name, ipk, isk, it.Key()), postValue}}
}

var postValue = table.AppendItem(nil, tabletest.PostItem("w0", 0))

// floorWriters runs b.N writes of shape from 64 goroutines and reports items/s.
func floorWriters(b *testing.B, shape floorShape, write func(kvs [][2][]byte) error) {
	var seq atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := write(shape(seq.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "items/s")
}
