package sqs_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/sqs"
)

// List prices, us-east-1 (aws.amazon.com/sns/pricing and /sqs/pricing, as of 2026): SNS FIFO
// publish requests $0.30 per million and $0.017 per GB of payload; deliveries from a FIFO topic to
// SQS $0.01 per million and $0.001 per GB; SQS FIFO requests $0.50 per million (per 64 KB chunk).
const (
	snsPublishPerM  = 0.30
	snsPublishPerGB = 0.017
	snsDeliverPerM  = 0.01
	snsDeliverPerGB = 0.001
	sqsFIFOPerM     = 0.50
)

// BenchmarkPostsCost appends PostCreated events (each post its own key, in the relay's batches of
// 100) to the SNS/SQS log with the application's consumer groups and filter policies, runs every
// group with a handler that does nothing, and reports the API requests per post and what a million
// posts cost at list prices. Throughput is the emulator's, not AWS's.
//
//	go test -run '^$' -bench PostsCost -benchtime 2000x ./events/sqs
func BenchmarkPostsCost(b *testing.B) {
	groups := map[string][]string{"export": nil}
	for g, types := range app.GroupTypes {
		groups[g] = types
	}
	l := open(b, sqs.Options{Groups: groups})
	receiving := 0
	for _, types := range groups {
		if types == nil || slices.Contains(types, app.PostCreated) {
			receiving++
		}
	}
	var handled atomic.Int64
	runner := &events.Runner{Log: l}
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	for g, types := range groups {
		go runner.Run(c, events.Consumer{Group: g, Types: types, Concurrency: 8,
			Handle: func(context.Context, rookery.Event) error { handled.Add(1); return nil }})
	}
	time.Sleep(2 * time.Second) // the groups' first receives are under way
	before := l.Requests()
	b.ResetTimer()
	start := time.Now()
	payload := []byte(`{"post_id":"01JZ0000000000000000000000","author_id":"author-1","created_at":"2026-11-25T12:00:00Z","tags":["go"],"mentions":[]}`)
	for i := 0; i < b.N; i += 100 {
		var evs []rookery.Event
		for j := i; j < min(i+100, b.N); j++ {
			evs = append(evs, rookery.Event{ID: fmt.Sprintf("cost-%08d", j), Type: app.PostCreated, Version: 1,
				Key: fmt.Sprintf("post:%d", j), OccurredAt: rookery.Time{Time: time.Now()}, Payload: payload})
		}
		if err := l.Append(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
	want := int64(b.N * receiving)
	for handled.Load() < want {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("%d of %d deliveries handled", handled.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	b.StopTimer()
	after := l.Requests()
	var ops []string
	total := map[string]float64{}
	for op, n := range after {
		if d := n - before[op]; d > 0 {
			ops = append(ops, op)
			total[op] = float64(d) / float64(b.N)
		}
	}
	sort.Strings(ops)
	sqsReq, snsReq := 0.0, 0.0
	for _, op := range ops {
		b.Logf("%-36s %.3f requests per post", op, total[op])
		if op[:3] == "SQS" {
			sqsReq += total[op]
		} else {
			snsReq += total[op]
		}
	}
	gb := float64(len(payload)+200) / 1e9 // the event's JSON
	perMillion := 1e6 * (snsReq*snsPublishPerM/1e6 + gb*snsPublishPerGB +
		float64(receiving)*(snsDeliverPerM/1e6+gb*snsDeliverPerGB) + sqsReq*sqsFIFOPerM/1e6)
	b.ReportMetric(snsReq, "SNS-req/post")
	b.ReportMetric(sqsReq, "SQS-req/post")
	b.ReportMetric(float64(receiving), "deliveries/post")
	b.ReportMetric(perMillion, "USD/M-posts")
	b.ReportMetric(float64(b.N)/took.Seconds(), "posts/s-emulator")
}
