package ddbrelay_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/ddbrelay"
	"github.com/rookery/rookery/table"
)

var (
	benchRate    = flag.Int("relay.rate", 200, "events per second the relay benchmark writes")
	benchSeconds = flag.Int("relay.seconds", 10, "how long the relay benchmark writes")
)

// recorder is a log that notes when each event was appended (the first time).
type recorder struct {
	events.Log
	at sync.Map // id -> time.Time
	n  atomic.Int64
}

func (r *recorder) Append(ctx context.Context, evs []rookery.Event) error {
	if err := r.Log.Append(ctx, evs); err != nil {
		return err
	}
	now := time.Now()
	for _, ev := range evs {
		if _, loaded := r.at.LoadOrStore(ev.ID, now); !loaded {
			r.n.Add(1)
		}
	}
	return nil
}

// BenchmarkRelay compares the polling relay with the stream relay on DynamoDB Local: events are
// written at -relay.rate for -relay.seconds, each in its own transaction (as an API node writes
// them; the relay runs apart, as on a worker, so no Notify reaches it), and each one's time from
// its commit to its append is measured, with the read units the relay spent per event.
//
//	go test -run '^$' -bench Relay -benchtime 1x ./events/ddbrelay
func BenchmarkRelay(b *testing.B) {
	for _, kind := range []string{"poll", "stream"} {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				s := newSetup(b)
				rec := &recorder{Log: s.log}
				s.outbox.Log = rec
				var streamReads atomic.Int64
				if kind == "poll" {
					// The outbox the relay runs is not the one the writer notifies.
					relayOutbox := &events.Outbox{Table: s.db, Log: rec, Shards: 16}
					c, cancel := context.WithCancel(ctx)
					done := make(chan struct{})
					go func() { relayOutbox.Run(c); close(done) }()
					defer func() { cancel(); <-done }()
				} else {
					s.log = rec
					stop := s.runWith(b, ddbrelay.Options{Owner: "bench", Sweep: time.Minute, Relayed: func(_, reads int, _ []time.Duration) { streamReads.Add(int64(reads)) }})
					defer stop()
					time.Sleep(time.Second) // it takes its shards
				}
				before := s.db.Consumed()
				n := *benchRate * *benchSeconds
				committed := make([]time.Time, n)
				tick := time.NewTicker(time.Second / time.Duration(*benchRate))
				for i := range n {
					<-tick.C
					ev := rookery.Event{ID: fmt.Sprintf("b%07d", i), Type: "T", Version: 1, Key: fmt.Sprintf("k%d", i%50),
						OccurredAt: rookery.Time{Time: time.Now()}, Payload: []byte(`{}`)}
					w, _ := s.outbox.Write(ev)
					if err := s.db.TransactWrite(ctx, []table.Write{w}); err != nil {
						b.Fatal(err)
					}
					committed[i] = time.Now()
				}
				tick.Stop()
				deadline := time.Now().Add(30 * time.Second)
				for rec.n.Load() < int64(n) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if got := rec.n.Load(); got < int64(n) {
					b.Fatalf("%d of %d events appended", got, n)
				}
				after := s.db.Consumed()
				lat := make([]float64, n)
				for i := range n {
					at, _ := rec.at.Load(fmt.Sprintf("b%07d", i))
					lat[i] = float64(at.(time.Time).Sub(committed[i]).Microseconds()) / 1000
				}
				slices.Sort(lat)
				rcu, wcu := 0.0, 0.0
				for op, c := range after {
					rcu += c.Read - before[op].Read
					wcu += c.Write - before[op].Write
				}
				b.ReportMetric(lat[n/2], "p50-ms")
				b.ReportMetric(lat[n*99/100], "p99-ms")
				b.ReportMetric(rcu/float64(n), "table-RCU/event")
				// The writes: each event's outbox item (2 WCU: a transaction) and, by the relay, its
				// delete and the stream relay's checkpoints.
				b.ReportMetric(wcu/float64(n), "table-WCU/event")
				b.ReportMetric(float64(streamReads.Load())/float64(n), "stream-reads/event")
			}
		})
	}
}
