package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/rookery/rookery/internal/testtable"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/table"
)

func TestConformance(t *testing.T) {
	eventstest.Run(t, func(t testing.TB, clock rookery.Clock) events.Log {
		l, err := embedded.Open(embedded.Options{Dir: t.TempDir(), Partitions: 8, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	})
}

// On the table store's engine (as `rookery serve` runs it), beside the store's items: the log
// passes the same suite, the store's items are untouched, and closing the log leaves the engine
// open for the store.
func TestConformanceOnTheStoresEngine(t *testing.T) {
	ctx := context.Background()
	eventstest.Run(t, func(t testing.TB, clock rookery.Clock) events.Log {
		store := testtable.Pebble(t, table.Schema{Indexes: []table.Index{{Name: "GSI1", PK: "gsi1pk", SK: "gsi1sk"}}}, clock)
		item := table.Item{table.PK: "A", table.SK: "1", "gsi1pk": "X", "gsi1sk": "2", "ttl": time.Now().Add(time.Hour).Unix()}
		if err := store.Put(ctx, item); err != nil {
			t.Fatal(err)
		}
		l, err := embedded.Open(embedded.Options{Engine: store.Engine(), Partitions: 8, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := l.Close(); err != nil {
				t.Error(err)
			}
			got, err := store.Get(ctx, table.Key{PK: "A", SK: "1"})
			if err != nil || got.String("gsi1sk") != "2" {
				t.Errorf("the store's item after the suite and the log's Close: %v, %v", got, err)
			}
			p, err := store.Query(ctx, table.Query{Index: "GSI1", PK: "X"})
			if err != nil || len(p.Items) != 1 {
				t.Errorf("the store's index after the suite: %v, %v", p.Items, err)
			}
			if err := store.Close(); err != nil {
				t.Error(err)
			}
		})
		return l
	})
}

// The log, group offsets, dead letters and the partition count survive a restart.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := embedded.Open(embedded.Options{Dir: dir, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	var evs = []string{"a1", "a2", "a3"}
	for i, id := range evs {
		if err := l.Append(ctx, []rookery.Event{eventstest.Event(id, "k", i)}); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := l.Subscribe(ctx, "g", events.SubscribeOptions{})
	d, _ := s.Next(ctx)
	d.Ack(ctx)
	l.DeadLetter(ctx, "g", events.DeadLetter{Event: eventstest.Event("a9", "k", 9), Error: "x"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened with another partition count: the stored one wins, so keys keep their partition.
	l, err = embedded.Open(embedded.Options{Dir: dir, Partitions: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Append(ctx, []rookery.Event{eventstest.Event("a1", "k", 0), eventstest.Event("a4", "k", 3)}); err != nil {
		t.Fatal(err)
	}
	s, _ = l.Subscribe(ctx, "g", events.SubscribeOptions{})
	var got []string
	for range 3 {
		d, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Event().ID)
		d.Ack(ctx)
	}
	if got[0] != "a2" || got[1] != "a3" || got[2] != "a4" {
		t.Fatalf("after reopen: %v; want a2 a3 a4 (a1 acked before, and de-duplicated)", got)
	}
	if dl, _ := l.DeadLetters(ctx, "g", "", 10); len(dl) != 1 || dl[0].Event.ID != "a9" {
		t.Fatalf("dead letters after reopen: %+v", dl)
	}
}
