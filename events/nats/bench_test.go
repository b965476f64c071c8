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
	const parts = 16
	b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
		g := startGroup(b, parts)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batch := make([]rookery.Event, 0, 500)
				for i := w; i < b.N; i += 4 {
					batch = append(batch, benchEvent(i, time.Time{}))
					if len(batch) == cap(batch) || i+4 >= b.N {
						now := rookery.Time{Time: time.Now()}
						for j := range batch {
							batch[j].OccurredAt = now
						}
						if err := g.log.Append(g.ctx, batch); err != nil {
							b.Error(err)
							return
						}
						batch = batch[:0]
					}
				}
			}()
		}
		wg.Wait()
		g.report(b)
	})
}

// BenchmarkLatency appends b.N events at a fixed rate, open loop (every millisecond one Append of
// the events due by then, each stamped with its scheduled time, so a stalled append counts), while
// one consumer group (concurrency = partitions) handles them; it reports the scheduled-time-to-handler
// latency percentiles and the rate reached.
func BenchmarkLatency(b *testing.B) {
	const parts = 16
	for _, rate := range []int{5000, 25000, 50000} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			g := startGroup(b, parts)
			interval := time.Second / time.Duration(rate)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			batch := make([]rookery.Event, 0, rate/100)
			for sent := 0; sent < b.N; <-tick.C {
				due := min(b.N, int(time.Since(g.start)/interval)+1)
				for ; sent < due; sent++ {
					batch = append(batch, benchEvent(sent, g.start.Add(time.Duration(sent)*interval)))
				}
				if err := g.log.Append(g.ctx, batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
			g.report(b)
		})
	}
}

func benchEvent(i int, at time.Time) rookery.Event {
	return rookery.Event{ID: fmt.Sprintf("%010d", i), Type: "PostCreated", Version: 1, OccurredAt: rookery.Time{Time: at},
		Key: fmt.Sprintf("user-%d", i%1000), Payload: json.RawMessage(`{"post_id":"01J"}`)}
}

// benchGroup is a consumer group handling a benchmark's b.N events, recording each one's latency
// from its OccurredAt to its handler.
type benchGroup struct {
	log   events.Log
	ctx   context.Context
	start time.Time
	mu    sync.Mutex
	lat   []time.Duration
	done  chan struct{}
}

func startGroup(b *testing.B, parts int) *benchGroup {
	l := openParts(b, parts)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel) // before the log's cleanup, which deletes its streams
	g := &benchGroup{log: l, ctx: ctx, lat: make([]time.Duration, 0, b.N), done: make(chan struct{})}
	go (&events.Runner{Log: g.log}).Run(ctx, events.Consumer{Group: "bench", Concurrency: parts, Handle: func(_ context.Context, ev rookery.Event) error {
		d := time.Since(ev.OccurredAt.Time)
		g.mu.Lock()
		defer g.mu.Unlock()
		g.lat = append(g.lat, d)
		if len(g.lat) == b.N {
			close(g.done)
		}
		return nil
	}})
	b.ResetTimer()
	g.start = time.Now()
	return g
}

// report waits for every event to be handled and reports events/s and latency percentiles.
func (g *benchGroup) report(b *testing.B) {
	select {
	case <-g.done:
	case <-time.After(2 * time.Minute):
		g.mu.Lock()
		defer g.mu.Unlock()
		b.Fatalf("only %d of %d events handled", len(g.lat), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(g.start).Seconds(), "events/s")
	slices.Sort(g.lat)
	pct := func(q float64) float64 { return float64(g.lat[int(q*float64(len(g.lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
}
