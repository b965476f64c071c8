package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// BenchmarkThroughput: 4 producers append b.N events in batches of 500 while one consumer group
// (concurrency = partitions) handles them; it reports events/s from the first append to the last handler
// call, and the append-to-handler latency percentiles.
func BenchmarkThroughput(b *testing.B) {
	for _, parts := range []int{16} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) { benchThroughput(b, parts) })
	}
}

func benchThroughput(b *testing.B, parts int) {
	l := openParts(b, parts)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	done := make(chan struct{})
	go (&events.Runner{Log: l}).Run(ctx, events.Consumer{Group: "bench", Concurrency: parts, Handle: func(_ context.Context, ev rookery.Event) error {
		d := time.Since(ev.OccurredAt.Time)
		mu.Lock()
		defer mu.Unlock()
		lat = append(lat, d)
		if len(lat) == b.N {
			close(done)
		}
		return nil
	}})
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]rookery.Event, 0, 500)
			for i := w; i < b.N; i += 4 {
				batch = append(batch, rookery.Event{ID: fmt.Sprintf("%010d", i), Type: "PostCreated", Version: 1,
					Key: fmt.Sprintf("user-%d", i%1000), Payload: json.RawMessage(`{"post_id":"01J"}`)})
				if len(batch) == cap(batch) || i+4 >= b.N {
					now := rookery.Time{Time: time.Now()}
					for j := range batch {
						batch[j].OccurredAt = now
					}
					if err := l.Append(ctx, batch); err != nil {
						b.Error(err)
						return
					}
					batch = batch[:0]
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("only %d of %d events handled", len(lat), b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	slices.Sort(lat)
	pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
