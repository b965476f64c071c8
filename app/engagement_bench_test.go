package app_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/table/pebble"
)

// BenchmarkRecordActivity records activities on a durable Pebble store (synced writes) from 64
// goroutines: "users" spreads them over 1,000 users, "one user" puts them all on one streak record
// (optimistic locking under contention). It reports activities/s and latency percentiles.
func BenchmarkRecordActivity(b *testing.B) {
	for _, users := range []int{1000, 1} {
		name := fmt.Sprintf("users=%d", users)
		b.Run(name, func(b *testing.B) {
			db, err := pebble.Open(pebble.Options{Dir: b.TempDir(), Schema: app.Schema, Clock: rookery.SystemClock, CursorKey: []byte("k")})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			a := newEngagementApp(b, db, rookery.SystemClock, app.Engagement{RateLimit: 1 << 30})
			ctx := context.Background()
			for i := range users {
				u := fmt.Sprintf("u%d", i)
				if _, _, err := a.PutUser(rookery.WithCaller(ctx, rookery.Caller{UserID: u}), u, app.UserInput{Username: fmt.Sprintf("user%d", i)}); err != nil {
					b.Fatal(err)
				}
			}
			var seq atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			per := b.N/64 + 1
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mine := make([]time.Duration, 0, per)
					for range per {
						n := seq.Add(1)
						u := fmt.Sprintf("u%d", n%int64(users))
						t0 := time.Now()
						if _, err := a.RecordActivity(rookery.WithCaller(ctx, rookery.Caller{UserID: u}), app.ActivityInput{Type: "like", IdempotencyKey: fmt.Sprint(n)}); err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(len(lat))/el.Seconds(), "activities/s")
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
