package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/eventstest"
)

// With the wall clock a waiting Next looks for work only every idlePoll, a safety net: every change
// that may make a delivery ready must wake it, and deadlines (a nak's delay, an ack wait) are waited
// for exactly. With the net taken away (an idle poll of an hour), each of them still delivers; a
// missing wake-up fails the test at its deadline instead of passing on the poll.
func TestChangesWakeWaitingNexts(t *testing.T) {
	l, err := Open(Options{InMemory: true, Partitions: 4, TrimEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.idlePoll = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sub := func(ackWait time.Duration) events.Subscription {
		s, err := l.Subscribe(ctx, "g", events.SubscribeOptions{AckWait: ackWait})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// waiting starts a Next on s; its result is read from the channel once the change is made.
	type result struct {
		d   events.Delivery
		err error
	}
	waiting := func(s events.Subscription) chan result {
		c := make(chan result, 1)
		go func() {
			d, err := s.Next(ctx)
			c <- result{d, err}
		}()
		time.Sleep(50 * time.Millisecond) // most likely waiting by now; if not, it finds the change
		return c
	}
	want := func(what string, c chan result, id string, attempt int) events.Delivery {
		t.Helper()
		r := <-c
		if r.err != nil {
			t.Fatalf("%s: Next = %v (nothing woke it)", what, r.err)
		}
		if r.d.Event().ID != id || r.d.Attempt() != attempt {
			t.Fatalf("%s: delivered %s attempt %d; want %s attempt %d", what, r.d.Event().ID, r.d.Attempt(), id, attempt)
		}
		return r.d
	}
	appendEv := func(evs ...rookery.Event) {
		t.Helper()
		if err := l.Append(ctx, evs); err != nil {
			t.Fatal(err)
		}
	}
	// s1's deliveries expire soon; s2's and s3's never in the test, so that only a wake-up can
	// deliver what waits behind them.
	s1, s2, s3 := sub(200*time.Millisecond), sub(time.Hour), sub(time.Hour)

	c := waiting(s1)
	appendEv(eventstest.Event("e1", "k", 1))
	d := want("an append", c, "e1", 1)

	if err := d.Nak(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d = want("a nak's delay", waiting(s1), "e1", 2)
	// Not acked: the ack wait passes and it is delivered again.
	d = want("an ack wait", waiting(s1), "e1", 3)
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}

	appendEv(eventstest.Event("e2", "k", 2), eventstest.Event("e3", "k", 3))
	d = want("a second append", waiting(s2), "e2", 1)
	c = waiting(s3) // e3 waits behind e2, in flight on its partition
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	d = want("an ack", c, "e3", 1)

	if err := l.DeadLetter(ctx, "g", events.DeadLetter{Event: d.Event(), Error: "boom", Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	c = waiting(s1)
	if err := l.Replay(ctx, "g", "e3"); err != nil {
		t.Fatal(err)
	}
	want("a replay", c, "e3", 1)
}
