package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
)

// BenchmarkConsume: how fast one consumer group drains events already in the log.
func BenchmarkConsume(b *testing.B) {
	for _, conc := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			l, err := embedded.Open(embedded.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			batch := make([]rookery.Event, 0, 500)
			for i := range b.N {
				batch = append(batch, rookery.Event{ID: fmt.Sprintf("%010d", i), Type: "T", Key: fmt.Sprintf("k%d", i%1000), Payload: json.RawMessage(`{}`)})
				if len(batch) == cap(batch) || i == b.N-1 {
					if err := l.Append(ctx, batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			var n atomic.Int64
			done := make(chan struct{})
			b.ResetTimer()
			start := time.Now()
			go (&events.Runner{Log: l}).Run(ctx, events.Consumer{Group: "g", Concurrency: conc, Handle: func(context.Context, rookery.Event) error {
				if n.Add(1) == int64(b.N) {
					close(done)
				}
				return nil
			}})
			<-done
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}
