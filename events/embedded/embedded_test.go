package embedded_test

import (
	"context"
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
)

func TestConformance(t *testing.T) {
	eventstest.Run(t, func(t testing.TB) events.Log {
		l, err := embedded.Open(embedded.Options{Dir: t.TempDir(), Partitions: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
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
