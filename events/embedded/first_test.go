package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
)

// A delivery is First only when no delivery of its event to its group can have been handled
// before: not a retry, not one after the ack wait passed, not a replay, not an event appended
// before the log opened (a process before this one may have handled it), and not once it was
// handed out again.
func TestFirstDelivery(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := embedded.Open(embedded.Options{Dir: dir, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	appendEv := func(l *embedded.Log, id string) {
		t.Helper()
		if err := l.Append(ctx, []rookery.Event{eventstest.Event(id, "k", 0)}); err != nil {
			t.Fatal(err)
		}
	}
	next := func(s events.Subscription) (events.Delivery, bool) {
		t.Helper()
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		d, err := s.Next(nctx)
		if err != nil {
			t.Fatal(err)
		}
		fd, ok := d.(events.FirstDelivery)
		if !ok {
			t.Fatal("the embedded log's delivery is no events.FirstDelivery")
		}
		return d, fd.First()
	}
	appendEv(l, "a1")
	appendEv(l, "a2")
	s, _ := l.Subscribe(ctx, "g", events.SubscribeOptions{AckWait: 200 * time.Millisecond})
	d, first := next(s)
	if d.Event().ID != "a1" || !first {
		t.Fatalf("the first delivery of a1: %s, first %v; want a1, true", d.Event().ID, first)
	}
	d.Nak(ctx, 0)
	if d, first = next(s); d.Event().ID != "a1" || first {
		t.Fatalf("a1 after a nak: %s, first %v; want a1, false", d.Event().ID, first)
	}
	d.Ack(ctx)
	old, first := next(s)
	if old.Event().ID != "a2" || !first {
		t.Fatalf("the first delivery of a2: %s, first %v; want a2, true", old.Event().ID, first)
	}
	time.Sleep(300 * time.Millisecond) // the ack wait passes
	if d, first = next(s); d.Event().ID != "a2" || first {
		t.Fatalf("a2 after its ack wait: %s, first %v; want a2, false", d.Event().ID, first)
	}
	if old.(events.FirstDelivery).First() {
		t.Fatal("a2's first delivery still says First after it was handed out again")
	}
	d.Ack(ctx)
	if err := l.DeadLetter(ctx, "g", events.DeadLetter{Event: eventstest.Event("a9", "k", 9), Error: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Replay(ctx, "g", "a9"); err != nil {
		t.Fatal(err)
	}
	if d, first = next(s); d.Event().ID != "a9" || first {
		t.Fatalf("a replay: %s, first %v; want a9, false", d.Event().ID, first)
	}
	d.Ack(ctx)
	appendEv(l, "a3") // not delivered before the restart
	s.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = embedded.Open(embedded.Options{Dir: dir, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendEv(l, "a4")
	s, _ = l.Subscribe(ctx, "g", events.SubscribeOptions{})
	defer s.Close()
	if d, first = next(s); d.Event().ID != "a3" || first {
		t.Fatalf("an event appended before the log reopened: %s, first %v; want a3, false", d.Event().ID, first)
	}
	d.Ack(ctx)
	if d, first = next(s); d.Event().ID != "a4" || !first {
		t.Fatalf("an event appended since the log reopened: %s, first %v; want a4, true", d.Event().ID, first)
	}
	d.Ack(ctx)
	// A new group starts at the oldest event kept, appended before the log opened.
	s2, _ := l.Subscribe(ctx, "new", events.SubscribeOptions{})
	defer s2.Close()
	if d, first = next(s2); d.Event().ID != "a1" || first {
		t.Fatalf("a new group's first event: %s, first %v; want a1, false", d.Event().ID, first)
	}
}
