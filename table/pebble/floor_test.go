package pebble

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery/internal/pebblekit"
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
// batch per sync.
func BenchmarkEngineFloor(b *testing.B) {
	b.Run("commit-per-write", func(b *testing.B) {
		db := openFloor(b)
		floorWriters(b, func(k, v []byte) error {
			batch := db.NewBatch()
			defer batch.Close()
			if err := batch.Set(k, v, nil); err != nil {
				return err
			}
			return batch.Commit(cpebble.Sync)
		})
	})
	b.Run("one-committer", func(b *testing.B) {
		db := openFloor(b)
		type req struct {
			k, v []byte
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
					_ = batch.Set(r.k, r.v, nil)
				}
				err := batch.Commit(cpebble.Sync)
				batch.Close()
				for _, r := range group {
					r.done <- err
				}
			}
		}()
		defer close(reqs)
		floorWriters(b, func(k, v []byte) error {
			done := make(chan error, 1)
			reqs <- req{k, v, done}
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

// floorWriters runs b.N writes of entry-sized keys and values from 64 goroutines and reports items/s.
func floorWriters(b *testing.B, write func(k, v []byte) error) {
	var seq atomic.Int64
	val := make([]byte, 64) // an encoded timeline entry or follow edge is about this long
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			k := fmt.Appendf(nil, "bFEED#w%d\x00\x01%013d#POST#%08d\x00\x01", i%64, 1_700_000_000_000+i, i)
			if err := write(k, val); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "items/s")
}
