package events_test

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
	"github.com/rookery/rookery/internal/cputime"
	"github.com/rookery/rookery/table"
)

func benchPipeline(b *testing.B, layout string) (table.Table, events.Log, *events.Outbox, context.CancelFunc) {
	ob := &events.Outbox{}
	tab, l := openPipeline(b, b.TempDir(), layout, ob)
	ctx, cancel := context.WithCancel(context.Background())
	go ob.Run(ctx)
	return tab, l, ob, cancel
}

// BenchmarkOutboxThroughput: 8 writers commit transactions of 50 events each through the outbox;
// the figure is events per second until the log holds them all (durable at both ends), and the
// process's CPU per event.
func BenchmarkOutboxThroughput(b *testing.B) {
	for _, layout := range pipelineLayouts {
		b.Run(layout, func(b *testing.B) { benchOutboxThroughput(b, layout) })
	}
}

func benchOutboxThroughput(b *testing.B, layout string) {
	tab, l, ob, cancel := benchPipeline(b, layout)
	defer cancel()
	ctx := context.Background()
	const perTx, writers = 50, 8
	total := b.N * perTx
	b.ResetTimer()
	start, cpu := time.Now(), cputime.Process()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += writers {
				ws := make([]table.Write, 0, perTx)
				for j := range perTx {
					ev := rookery.Event{ID: fmt.Sprintf("%010d-%03d", i, j), Type: "PostCreated", Version: 1,
						Key: fmt.Sprintf("user-%d", (i*perTx+j)%1000), Payload: json.RawMessage(`{"post_id":"01J","author_id":"u"}`)}
					wr, _ := ob.Write(ev)
					ws = append(ws, wr)
				}
				if err := tab.TransactWrite(ctx, ws); err != nil {
					b.Error(err)
					return
				}
				ob.Notify()
			}
		}()
	}
	wg.Wait()
	for {
		n, _, _ := l.Lag(ctx, "bench")
		if n >= int64(total) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64((cputime.Process()-cpu).Microseconds())/float64(total), "cpu-µs/event")
}

// BenchmarkOutboxToHandlerLatency: events are written one per transaction at 5,000/s (open loop:
// each at its scheduled time); a consumer records the time from the scheduled write to its
// handler. It runs b.N events. The write's own share (scheduled time to commit) is reported too.
func BenchmarkOutboxToHandlerLatency(b *testing.B) {
	for _, layout := range pipelineLayouts {
		b.Run(layout, func(b *testing.B) { benchOutboxToHandlerLatency(b, layout) })
	}
}

func benchOutboxToHandlerLatency(b *testing.B, layout string) {
	tab, l, ob, cancel := benchPipeline(b, layout)
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	defer func() { stop(); <-stopped; cancel() }()
	const rate = 5000
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	done := make(chan struct{})
	go func() {
		defer close(stopped)
		(&events.Runner{Log: l}).Run(ctx, events.Consumer{Group: "lat", Concurrency: 8, Handle: func(_ context.Context, ev rookery.Event) error {
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, time.Since(ev.OccurredAt.Time))
			if len(lat) == b.N {
				close(done)
			}
			return nil
		}})
	}()
	b.ResetTimer()
	start := time.Now()
	if testing.Verbose() {
		go func() {
			for range 6 {
				time.Sleep(300 * time.Millisecond)
				p, _ := ob.Pending(ctx, 100000)
				lag, _, _ := l.Lag(ctx, "lat")
				b.Logf("t=%v outbox pending %d, consumer lag %d", time.Since(start).Round(time.Millisecond), p, lag)
			}
		}()
	}
	var wg sync.WaitGroup
	var wmu sync.Mutex
	wlat := make([]time.Duration, 0, b.N)
	sem := make(chan struct{}, 64)
	for i := range b.N {
		at := start.Add(time.Duration(i) * time.Second / rate)
		time.Sleep(time.Until(at))
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ev := rookery.Event{ID: fmt.Sprintf("%010d", i), Type: "PostCreated", Version: 1, Key: fmt.Sprintf("user-%d", i%500),
				OccurredAt: rookery.Time{Time: at}, Payload: json.RawMessage(`{}`)}
			wr, _ := ob.Write(ev)
			if err := tab.TransactWrite(ctx, []table.Write{table.PutWrite(table.Item{table.PK: "DATA", table.SK: ev.ID}), wr}); err != nil {
				b.Error(err)
			}
			wmu.Lock()
			wlat = append(wlat, time.Since(at))
			wmu.Unlock()
			ob.Notify()
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.Fatal("not all events reached the handler")
	}
	b.StopTimer()
	slices.Sort(lat)
	slices.Sort(wlat)
	pct := func(lat []time.Duration, q float64) float64 {
		return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(lat, 0.50), "p50-ms")
	b.ReportMetric(pct(lat, 0.99), "p99-ms")
	b.ReportMetric(pct(lat, 1.0), "max-ms")
	b.ReportMetric(pct(wlat, 0.50), "write-p50-ms")
	b.ReportMetric(pct(wlat, 0.99), "write-p99-ms")
}
