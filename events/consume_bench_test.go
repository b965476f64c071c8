package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"syscall"
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

// BenchmarkConsumeTrickle: the CPU a group spends per event when events arrive one at a time (as
// the relay appends them while the workers keep up), with several workers waiting: the cost of
// waking them, where BenchmarkConsume measures a backlog.
func BenchmarkConsumeTrickle(b *testing.B) {
	for _, conc := range []int{4, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			l, err := embedded.Open(embedded.Options{InMemory: true}) // no syncs: the wakes are what is measured
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			handled := make(chan struct{}, 1)
			go (&events.Runner{Log: l}).Run(ctx, events.Consumer{Group: "g", Concurrency: conc, Handle: func(context.Context, rookery.Event) error {
				handled <- struct{}{}
				return nil
			}})
			cpu0 := processCPU()
			b.ResetTimer()
			for i := range b.N {
				ev := rookery.Event{ID: fmt.Sprintf("%010d", i), Type: "T", Key: fmt.Sprintf("k%d", i%1000), Payload: json.RawMessage(`{}`)}
				if err := l.Append(ctx, []rookery.Event{ev}); err != nil {
					b.Fatal(err)
				}
				<-handled
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/event")
		})
	}
}

// processCPU is the CPU time the process has used, user and system, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
