package embedded_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rookery/rookery/internal/testtable"

	cpebble "github.com/cockroachdb/pebble/v2"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/table/pebble"
	"github.com/rookery/rookery/table/tabletest"
)

var _ pebble.Stager = (*embedded.Log)(nil)

// TestStoredFormats: a log holds events in three forms — JSON from before the binary form, appended
// ones and staged ones (the store's transactions, with no de-duplication key). All are delivered
// in order per key, counted by Lag, and trimmed, each with its de-duplication key if it has one.
func TestStoredFormats(t *testing.T) {
	ctx := context.Background()
	clock := tabletest.NewClock(time.Now())
	store := testtable.Pebble(t, table.Schema{}, clock)
	engine := store.Engine()
	// As an earlier version wrote them: 10 events of keys k0, k1, k2 in 2 partitions.
	const parts = 2
	engine.Set([]byte("mpartitions"), binary.BigEndian.AppendUint16(nil, parts), nil)
	next := make([]uint64, parts)
	var want []rookery.Event
	for i := range 10 {
		ev := eventstest.Event(fmt.Sprintf("a%02d", i), fmt.Sprintf("k%d", i%3), i)
		ev.OccurredAt = rookery.Time{Time: clock.Now().UTC().Truncate(time.Millisecond)}
		p := events.Partition(ev.Key, parts)
		ek := binary.BigEndian.AppendUint64([]byte{'e', 0, byte(p)}, next[p])
		next[p]++
		val, _ := json.Marshal(map[string]any{"e": ev, "t": clock.Now().UnixNano()})
		engine.Set(ek, val, nil)
		engine.Set(append([]byte{'d'}, ev.ID...), ek[1:], nil)
		want = append(want, ev)
	}
	l, err := embedded.Open(embedded.Options{Engine: engine, Clock: clock, Retain: time.Hour, TrimEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n, oldest, err := l.Lag(ctx, "g"); err != nil || n != 10 || oldest.IsZero() {
		t.Fatalf("lag over the old events: %d %v %v", n, oldest, err)
	}
	var appended []rookery.Event
	for i := range 5 {
		appended = append(appended, eventstest.Event(fmt.Sprintf("b%02d", i), fmt.Sprintf("k%d", i%3), 10+i))
	}
	if err := l.Append(ctx, appended); err != nil {
		t.Fatal(err)
	}
	want = append(want, appended...)
	store.SetStager(l)
	ob := &events.Outbox{Table: store, Log: l, Direct: true}
	for i := range 5 {
		ev := eventstest.Event(fmt.Sprintf("c%02d", i), fmt.Sprintf("k%d", i%3), 15+i)
		w, err := ob.Write(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.TransactWrite(ctx, []table.Write{table.PutWrite(table.Item{table.PK: "DATA", table.SK: ev.ID}), w}); err != nil {
			t.Fatal(err)
		}
		want = append(want, ev)
	}
	if n, _ := ob.Pending(ctx, 100); n != 0 {
		t.Fatalf("%d staged events were left in the outbox", n)
	}
	s, err := l.Subscribe(ctx, "g", events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int{}
	for range want {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := s.Next(c)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ev := d.Event()
		w := want[seq(ev)]
		if ev.ID != w.ID || ev.Type != w.Type || ev.Key != w.Key || !ev.OccurredAt.Equal(w.OccurredAt.Time) || string(ev.Payload) != string(w.Payload) {
			t.Fatalf("delivered %+v, stored %+v", ev, w)
		}
		if n, ok := last[ev.Key]; ok && n >= seq(ev) {
			t.Fatalf("key %s: event %d delivered after %d", ev.Key, seq(ev), n)
		}
		last[ev.Key] = seq(ev)
		d.Ack(ctx)
	}
	s.Close()
	clock.Advance(2 * time.Hour)
	if n, err := l.Trim(ctx); err != nil || n != len(want)-parts {
		t.Fatalf("trimmed %d (%v), want all but the last of each partition: %d", n, err, len(want)-parts)
	}
	// Left: one de-duplication key at most per partition (a kept event's, if it has one).
	iter, _ := engine.NewIter(&cpebble.IterOptions{LowerBound: []byte{'d'}, UpperBound: []byte{'e'}})
	var dkeys []string
	for ok := iter.First(); ok; ok = iter.Next() {
		dkeys = append(dkeys, string(iter.Key()))
	}
	iter.Close()
	if len(dkeys) != 0 {
		t.Fatalf("de-duplication keys left after the trim: %q (the last events are staged ones, which have none)", dkeys)
	}
}

// seq is the number eventstest.Event put in the event's payload.
func seq(ev rookery.Event) int {
	var p struct{ N int }
	json.Unmarshal(ev.Payload, &p)
	return p.N
}
