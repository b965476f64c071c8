// Package eventstest is the conformance suite of events.Log: every event log backend runs Run.
package eventstest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/internal/clocktest"
)

// Factory opens an empty log on clock and registers its cleanup with t. A log whose delays a
// server keeps (NATS's nak delays and ack waits) may ignore clock: the suite moves clock on and
// then waits for the delivery, which such a log makes once the server's own clock has moved on.
type Factory func(t testing.TB, clock rookery.Clock) events.Log

var ctx = context.Background()

// Run runs the whole suite against logs made by open; each test gets a fresh log and a fake clock
// of its own (clocktest), set to the wall clock's time.
func Run(t *testing.T, open Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, l events.Log, clock *clocktest.Clock)
	}{
		{"events with one key arrive in the order they were appended", testOrderPerKey},
		{"every group sees every event", testGroups},
		{"the subscriptions of one group share the work and see each event once", testSharedGroup},
		{"a nak delivers the event again after the delay, counting attempts", testNak},
		{"an unacked delivery is delivered again after the ack wait", testAckWait},
		{"a consumer that leaves without acking loses nothing", testConsumerCrash},
		{"appending an event id twice delivers it once", testDedupe},
		{"dead letters are listed, replayed to their group only, and dropped", testDeadLetters},
		{"lag counts unacked events and the oldest one's age", testLag},
		{"malformed events and groups are invalid", testInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.New(time.Now())
			tc.fn(t, open(t, clock), clock)
		})
	}
}

// Event returns a test event with key k and sequence n in its payload.
func Event(id, key string, n int) rookery.Event {
	return rookery.Event{
		ID: id, Type: "TestEvent", Version: 1, Key: key,
		OccurredAt: rookery.Time{Time: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)},
		Payload:    json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)),
	}
}

func seqOf(ev rookery.Event) int {
	var p struct{ N int }
	json.Unmarshal(ev.Payload, &p)
	return p.N
}

func appendAll(t *testing.T, l events.Log, evs []rookery.Event) {
	t.Helper()
	for chunk := range slices.Chunk(evs, 37) {
		if err := l.Append(ctx, chunk); err != nil {
			t.Fatal(err)
		}
	}
}

func subscribe(t *testing.T, l events.Log, group string, opts events.SubscribeOptions) events.Subscription {
	t.Helper()
	s, err := l.Subscribe(ctx, group, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// NextWait is how long Next waits: the default ack wait and 10 s more, because a delivery lost on
// its way (an SQS receive whose answer never came) is delivered again after the ack wait, as the
// contract allows; a log that loses an event for good still fails.
const NextWait = events.DefaultAckWait + 10*time.Second

// Next waits up to NextWait for a delivery of s. If it gets none, a subscription that describes
// its state (fmt.Stringer) is described in the failure.
func Next(t *testing.T, s events.Subscription) events.Delivery {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, NextWait)
	defer cancel()
	d, err := s.Next(c)
	if err != nil {
		if st, ok := s.(fmt.Stringer); ok {
			t.Fatalf("Next: %v; %s", err, st)
		}
		t.Fatalf("Next: %v", err)
	}
	return d
}

// None checks that nothing is delivered to s within wait.
func None(t *testing.T, s events.Subscription, wait time.Duration) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if d, err := s.Next(c); err == nil {
		t.Fatalf("unexpected delivery of %s (attempt %d)", d.Event().ID, d.Attempt())
	}
}

func ack(t *testing.T, d events.Delivery) {
	t.Helper()
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// consume acks n deliveries and returns their events.
func consume(t *testing.T, s events.Subscription, n int) []rookery.Event {
	t.Helper()
	var out []rookery.Event
	for range n {
		d := Next(t, s)
		out = append(out, d.Event())
		ack(t, d)
	}
	return out
}

func testOrderPerKey(t *testing.T, l events.Log, clock *clocktest.Clock) {
	var evs []rookery.Event
	for i := range 400 {
		evs = append(evs, Event(fmt.Sprintf("e%04d", i), fmt.Sprintf("key-%d", i%13), i))
	}
	appendAll(t, l, evs)
	got := consume(t, subscribe(t, l, "order", events.SubscribeOptions{}), len(evs))
	last := map[string]int{}
	for _, ev := range got {
		if n, ok := last[ev.Key]; ok && seqOf(ev) < n {
			t.Fatalf("key %s: %d delivered after %d", ev.Key, seqOf(ev), n)
		}
		last[ev.Key] = seqOf(ev)
	}
	// Envelopes arrive whole.
	if got[0].Type != "TestEvent" || got[0].Version != 1 || !got[0].OccurredAt.Equal(evs[0].OccurredAt.Time) {
		t.Fatalf("envelope = %+v", got[0])
	}
}

func testGroups(t *testing.T, l events.Log, clock *clocktest.Clock) {
	var evs []rookery.Event
	for i := range 50 {
		evs = append(evs, Event(fmt.Sprintf("g%03d", i), fmt.Sprintf("k%d", i%5), i))
	}
	appendAll(t, l, evs)
	for _, g := range []string{"fanout", "counters"} {
		got := consume(t, subscribe(t, l, g, events.SubscribeOptions{}), len(evs))
		ids := map[string]bool{}
		for _, ev := range got {
			ids[ev.ID] = true
		}
		if len(ids) != len(evs) {
			t.Fatalf("group %s saw %d distinct events of %d", g, len(ids), len(evs))
		}
	}
	// A group created after the events still starts at the beginning.
	if got := consume(t, subscribe(t, l, "late", events.SubscribeOptions{}), 1); len(got) != 1 {
		t.Fatal("a new group saw nothing")
	}
}

func testSharedGroup(t *testing.T, l events.Log, clock *clocktest.Clock) {
	const n = 300
	var evs []rookery.Event
	for i := range n {
		evs = append(evs, Event(fmt.Sprintf("s%03d", i), fmt.Sprintf("k%d", i%37), i))
	}
	appendAll(t, l, evs)
	var mu sync.Mutex
	seen := map[string]int{}
	perSub := make([]int, 3)
	var total atomic.Int64
	var wg sync.WaitGroup
	for i := range perSub {
		s := subscribe(t, l, "shared", events.SubscribeOptions{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for total.Load() < n {
				c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				d, err := s.Next(c)
				cancel()
				if err != nil {
					continue
				}
				mu.Lock()
				seen[d.Event().ID]++
				perSub[i]++
				mu.Unlock()
				time.Sleep(time.Millisecond) // let the others take partitions too
				if err := d.Ack(ctx); err != nil {
					t.Error(err)
				}
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("the group saw %d distinct events of %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("event %s delivered %d times to one group without a failure", id, c)
		}
	}
	busy := 0
	for _, c := range perSub {
		if c > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Fatalf("work split %v: the subscriptions did not share it", perSub)
	}
}

func testNak(t *testing.T, l events.Log, clock *clocktest.Clock) {
	appendAll(t, l, []rookery.Event{Event("n1", "k", 1), Event("n2", "k", 2)})
	s := subscribe(t, l, "nak", events.SubscribeOptions{})
	d := Next(t, s)
	if d.Event().ID != "n1" || d.Attempt() != 1 {
		t.Fatalf("first delivery %s attempt %d", d.Event().ID, d.Attempt())
	}
	if err := d.Nak(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// Not before the delay, and n2 has the same key: it must wait behind n1.
	None(t, s, 150*time.Millisecond)
	clock.Advance(300 * time.Millisecond)
	d = Next(t, s)
	if d.Event().ID != "n1" || d.Attempt() != 2 {
		t.Fatalf("after a nak: %s attempt %d; want n1 attempt 2", d.Event().ID, d.Attempt())
	}
	ack(t, d)
	if d := Next(t, s); d.Event().ID != "n2" || d.Attempt() != 1 {
		t.Fatalf("then %s attempt %d", d.Event().ID, d.Attempt())
	}
}

func testAckWait(t *testing.T, l events.Log, clock *clocktest.Clock) {
	appendAll(t, l, []rookery.Event{Event("w1", "k", 1)})
	s := subscribe(t, l, "wait", events.SubscribeOptions{AckWait: 300 * time.Millisecond})
	first := Next(t, s)
	None(t, s, 150*time.Millisecond) // not before the ack wait
	clock.Advance(300 * time.Millisecond)
	again := Next(t, s)
	if again.Event().ID != "w1" || again.Attempt() != 2 {
		t.Fatalf("redelivery %s attempt %d", again.Event().ID, again.Attempt())
	}
	if err := first.Ack(ctx); !rookery.IsKind(err, rookery.Conflict) {
		t.Fatalf("ack of the expired delivery = %v; want Conflict", err)
	}
	ack(t, again)
	clock.Advance(time.Second)
	None(t, s, 400*time.Millisecond)
}

func testConsumerCrash(t *testing.T, l events.Log, clock *clocktest.Clock) {
	appendAll(t, l, []rookery.Event{Event("c1", "k", 1), Event("c2", "k", 2)})
	s := subscribe(t, l, "crash", events.SubscribeOptions{})
	ack(t, Next(t, s))
	if d := Next(t, s); d.Event().ID != "c2" {
		t.Fatalf("got %s", d.Event().ID)
	}
	s.Close() // dies holding c2
	s2 := subscribe(t, l, "crash", events.SubscribeOptions{})
	d := Next(t, s2)
	if d.Event().ID != "c2" {
		t.Fatalf("after the crash: %s; want c2 again (c1 was acked)", d.Event().ID)
	}
	ack(t, d)
	None(t, s2, 300*time.Millisecond)
}

func testDedupe(t *testing.T, l events.Log, clock *clocktest.Clock) {
	appendAll(t, l, []rookery.Event{Event("d1", "k", 1), Event("d2", "k", 2), Event("d1", "k", 1)})
	appendAll(t, l, []rookery.Event{Event("d2", "k", 2), Event("d3", "k", 3)})
	s := subscribe(t, l, "dedupe", events.SubscribeOptions{})
	got := consume(t, s, 3)
	if got[0].ID != "d1" || got[1].ID != "d2" || got[2].ID != "d3" {
		t.Fatalf("got %v", []string{got[0].ID, got[1].ID, got[2].ID})
	}
	None(t, s, 300*time.Millisecond)
}

func testDeadLetters(t *testing.T, l events.Log, clock *clocktest.Clock) {
	appendAll(t, l, []rookery.Event{Event("q1", "a", 1), Event("q2", "b", 2), Event("q3", "c", 3)})
	for _, g := range []string{"broken", "healthy"} {
		consume(t, subscribe(t, l, g, events.SubscribeOptions{}), 3)
	}
	now := rookery.Time{Time: clock.Now().UTC().Truncate(time.Millisecond)}
	for i, id := range []string{"q1", "q2", "q3"} {
		d := events.DeadLetter{Event: Event(id, "k", i), Error: "boom " + id, Attempts: 5, FailedAt: now}
		if err := l.DeadLetter(ctx, "broken", d); err != nil {
			t.Fatal(err)
		}
	}
	list, err := l.DeadLetters(ctx, "broken", "", 2)
	if err != nil || len(list) != 2 || list[0].Event.ID != "q1" || list[0].Error != "boom q1" || list[0].Attempts != 5 {
		t.Fatalf("first page = %+v, %v", list, err)
	}
	rest, err := l.DeadLetters(ctx, "broken", list[1].Event.ID, 10)
	if err != nil || len(rest) != 1 || rest[0].Event.ID != "q3" {
		t.Fatalf("second page = %+v, %v", rest, err)
	}
	if other, _ := l.DeadLetters(ctx, "healthy", "", 10); len(other) != 0 {
		t.Fatalf("another group's queue holds %v", other)
	}
	if d, err := l.DeadLetterByID(ctx, "broken", "q2"); err != nil || d.Error != "boom q2" || d.Event.ID != "q2" {
		t.Fatalf("DeadLetterByID = %+v, %v", d, err)
	}
	if _, err := l.DeadLetterByID(ctx, "healthy", "q2"); !rookery.IsKind(err, rookery.NotFound) {
		t.Fatalf("DeadLetterByID in another group = %v", err)
	}
	if err := l.Replay(ctx, "broken", "q2"); err != nil {
		t.Fatal(err)
	}
	if err := l.Drop(ctx, "broken", "q3"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{l.Replay(ctx, "broken", "q2"), l.Drop(ctx, "broken", "nope")} {
		if !rookery.IsKind(err, rookery.NotFound) {
			t.Fatalf("replay/drop of a missing dead letter = %v", err)
		}
	}
	if left, _ := l.DeadLetters(ctx, "broken", "", 10); len(left) != 1 || left[0].Event.ID != "q1" {
		t.Fatalf("queue after replay and drop = %+v", left)
	}
	// The replayed event reaches its group again, and only its group.
	d := Next(t, subscribe(t, l, "broken", events.SubscribeOptions{}))
	if d.Event().ID != "q2" || seqOf(d.Event()) != 1 {
		t.Fatalf("replayed delivery = %+v", d.Event())
	}
	ack(t, d)
	None(t, subscribe(t, l, "healthy", events.SubscribeOptions{}), 300*time.Millisecond)
}

func testLag(t *testing.T, l events.Log, clock *clocktest.Clock) {
	var evs []rookery.Event
	for i := range 10 {
		evs = append(evs, Event(fmt.Sprintf("l%02d", i), fmt.Sprintf("k%d", i%3), i))
	}
	before := clock.Now()
	appendAll(t, l, evs)
	s := subscribe(t, l, "lag", events.SubscribeOptions{})
	consume(t, s, 4)
	// The count holds at once. A backend may learn an event's time only when it receives the
	// event (SQS: of the messages this process holds, and a poll may still be bringing the rest),
	// so the oldest may show a moment later, but it must show.
	var oldest time.Time
	for deadline := time.Now().Add(5 * time.Second); oldest.IsZero() && time.Now().Before(deadline); {
		n, o, err := l.Lag(ctx, "lag")
		if err != nil || n != 6 {
			t.Fatalf("lag = %d, %v; want 6", n, err)
		}
		if oldest = o; o.IsZero() {
			time.Sleep(20 * time.Millisecond)
		}
	}
	clock.Advance(time.Minute)
	// A server's clock may differ from the test's by a little.
	if oldest.Before(before.Add(-time.Second)) || oldest.After(before.Add(time.Second)) {
		t.Fatalf("oldest unacked event appended at %v", oldest)
	}
	consume(t, s, 6)
	if n, oldest, err := l.Lag(ctx, "lag"); err != nil || n != 0 || !oldest.IsZero() {
		t.Fatalf("lag when caught up = %d, %v, %v", n, oldest, err)
	}
}

func testInvalid(t *testing.T, l events.Log, clock *clocktest.Clock) {
	for name, ev := range map[string]rookery.Event{
		"no id":   {Type: "T", Key: "k"},
		"no key":  {ID: "x", Type: "T"},
		"no type": {ID: "x", Key: "k"},
	} {
		if err := l.Append(ctx, []rookery.Event{ev}); !rookery.IsKind(err, rookery.Invalid) {
			t.Fatalf("append of an event with %s = %v", name, err)
		}
	}
	if _, err := l.Subscribe(ctx, "bad group!", events.SubscribeOptions{}); !rookery.IsKind(err, rookery.Invalid) {
		t.Fatalf("subscribe with a bad group = %v", err)
	}
}

// Pipeline is a running relay and its consumers (RunPipeline).
type Pipeline struct {
	outbox *events.Outbox
	log    events.Log
	groups []string
}

// RunPipeline runs, until the test ends, the outbox relay and the consumers over l, as `rookery
// serve` does, but with retries 5 ms apart and a circuit breaker that cools down in 50 ms, so tests
// see redeliveries and recoveries quickly.
func RunPipeline(t testing.TB, outbox *events.Outbox, l events.Log, consumers []events.Consumer) *Pipeline {
	ctx, stop := context.WithCancel(context.Background())
	p := &Pipeline{outbox: outbox, log: l}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); outbox.Run(ctx) }()
	for _, c := range consumers {
		p.groups = append(p.groups, c.Group)
		c.Backoff = func(int) time.Duration { return 5 * time.Millisecond }
		c.Cooldown = 50 * time.Millisecond
		wg.Add(1)
		go func() { defer wg.Done(); (&events.Runner{Log: l}).Run(ctx, c) }()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	return p
}

// Drain waits until the pipeline is idle — nothing in the outbox and every consumer group caught
// up, twice in a row 20 ms apart — and fails t if that takes longer than within.
func (p *Pipeline) Drain(t interface{ Fatalf(string, ...any) }, within time.Duration) {
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for idle := 0; idle < 2; {
		time.Sleep(20 * time.Millisecond)
		busy := ""
		if n, err := p.outbox.Pending(ctx, 1); err != nil || n > 0 {
			busy = fmt.Sprintf("outbox pending %d (%v)", n, err)
		}
		for _, g := range p.groups {
			if n, _, err := p.log.Lag(ctx, g); err != nil || n > 0 {
				busy = fmt.Sprintf("group %s lags %d (%v)", g, n, err)
			}
		}
		if busy == "" {
			idle++
			continue
		}
		idle = 0
		if time.Now().After(deadline) {
			t.Fatalf("the event pipeline did not drain in %v: %s", within, busy)
		}
	}
}
