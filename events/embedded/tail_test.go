package embedded_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
)

// TestTailServesWhatTheEngineWould: a group that keeps up with appends reads them from memory (the
// partitions' tails, past their size too); a group of a reopened log reads the same events from the
// engine. Both must see the same events, field for field, in the same order per key.
func TestTailServesWhatTheEngineWould(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := embedded.Open(embedded.Options{Dir: dir, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	const total = 3000 // over the tails' size, so they drop their oldest events on the way
	rng := rand.New(rand.NewPCG(1, 2))
	live := make(chan []rookery.Event, 1)
	go func() {
		s, err := l.Subscribe(ctx, "live", events.SubscribeOptions{})
		if err != nil {
			t.Error(err)
			live <- nil
			return
		}
		defer s.Close()
		var got []rookery.Event
		for len(got) < total {
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			d, err := s.Next(c)
			cancel()
			if err != nil {
				t.Error(err)
				break
			}
			got = append(got, d.Event())
			d.Ack(ctx)
		}
		live <- got
	}()
	for n := 0; n < total; {
		batch := make([]rookery.Event, 0, 20)
		for range 1 + rng.IntN(20) {
			if n == total {
				break
			}
			ev := eventstest.Event(fmt.Sprintf("e%05d", n), fmt.Sprintf("k%d", rng.IntN(7)), n)
			ev.OccurredAt = rookery.Time{Time: time.Now()} // a monotonic reading and a location, as the outbox's events have
			batch = append(batch, ev)
			n++
		}
		if err := l.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(10) == 0 {
			time.Sleep(time.Millisecond) // let the group catch up now and then
		}
	}
	fromTail := <-live
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = embedded.Open(embedded.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := l.Subscribe(ctx, "later", events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fromEngine := map[string]rookery.Event{}
	var order []string
	for range total {
		d, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fromEngine[d.Event().ID] = d.Event()
		order = append(order, d.Event().ID)
		d.Ack(ctx)
	}
	if len(fromTail) != total {
		t.Fatalf("the live group saw %d events, want %d", len(fromTail), total)
	}
	lastByKey := map[string]int{}
	for _, ev := range fromTail {
		if want, ok := fromEngine[ev.ID]; !ok || !reflect.DeepEqual(ev, want) {
			t.Fatalf("live group's %+v; from the engine %+v", ev, want)
		}
		var p struct{ N int }
		json.Unmarshal(ev.Payload, &p)
		n := p.N
		if last, ok := lastByKey[ev.Key]; ok && n <= last {
			t.Fatalf("key %s: event %d after %d", ev.Key, n, last)
		}
		lastByKey[ev.Key] = n
	}
}
