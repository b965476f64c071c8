package events_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/internal/testenv"
)

func newLog(t *testing.T) events.Log {
	t.Helper()
	l, err := embedded.Open(embedded.Options{InMemory: true, Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// start runs c on l until the test ends.
func start(t *testing.T, l events.Log, c events.Consumer, stats events.Stats) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&events.Runner{Log: l, Stats: stats}).Run(ctx, c) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func appendN(t *testing.T, l events.Log, n, keys int) {
	t.Helper()
	for i := range n {
		if err := l.Append(context.Background(), []rookery.Event{eventstest.Event(fmt.Sprintf("e%04d", i), fmt.Sprintf("k%d", i%keys), i)}); err != nil {
			t.Fatal(err)
		}
	}
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, ok)
}

func fastBackoff(int) time.Duration { return 10 * time.Millisecond }

func TestRunnerProcessesEveryEventInOrderPerKey(t *testing.T) {
	l := newLog(t)
	var mu sync.Mutex
	last := map[string]int{}
	var outOfOrder, processed atomic.Int64
	appendN(t, l, 300, 7)
	start(t, l, events.Consumer{Group: "order", Concurrency: 4, Handle: func(_ context.Context, ev rookery.Event) error {
		mu.Lock()
		defer mu.Unlock()
		n := eventsSeq(ev)
		if prev, ok := last[ev.Key]; ok && n < prev {
			outOfOrder.Add(1)
		}
		last[ev.Key] = n
		processed.Add(1)
		return nil
	}}, nil)
	eventually(t, "all processed", func() bool { return processed.Load() == 300 })
	if outOfOrder.Load() != 0 {
		t.Fatalf("%d events out of order per key", outOfOrder.Load())
	}
	eventually(t, "lag 0", func() bool { n, _, _ := l.Lag(context.Background(), "order"); return n == 0 })
}

func eventsSeq(ev rookery.Event) int {
	var n int
	fmt.Sscanf(string(ev.Payload), `{"n":%d}`, &n)
	return n
}

func TestRunnerRetriesUnavailableThenSucceeds(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 1, 1)
	var calls atomic.Int64
	var outcomes sync.Map
	start(t, l, events.Consumer{Group: "retry", Backoff: fastBackoff, Handle: func(context.Context, rookery.Event) error {
		if calls.Add(1) < 3 {
			return rookery.E(rookery.Unavailable, "redis down")
		}
		return nil
	}}, func(_ string, o events.Outcome, _ time.Duration) {
		v, _ := outcomes.LoadOrStore(o, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	})
	eventually(t, "processed", func() bool { v, ok := outcomes.Load(events.Processed); return ok && v.(*atomic.Int64).Load() == 1 })
	if r, _ := outcomes.Load(events.Retried); r.(*atomic.Int64).Load() != 2 || calls.Load() != 3 {
		t.Fatalf("calls %d, retried %v", calls.Load(), r)
	}
	if dl, _ := l.DeadLetters(context.Background(), "retry", "", 10); len(dl) != 0 {
		t.Fatalf("dead letters: %+v", dl)
	}
}

func TestRunnerDeadLetters(t *testing.T) {
	cases := []struct {
		name         string
		err          error
		wantAttempts int
	}{
		{"an Unavailable error, after the last attempt", rookery.E(rookery.Unavailable, "still down"), 3},
		{"any other error, at once", rookery.E(rookery.Invalid, "bad payload"), 1},
		{"an error without a kind, at once", errors.New("plain error"), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLog(t)
			appendN(t, l, 2, 1)
			var calls atomic.Int64
			start(t, l, events.Consumer{Group: "dlq", MaxAttempts: 3, Backoff: fastBackoff, BreakAfter: 100, Handle: func(_ context.Context, ev rookery.Event) error {
				if ev.ID == "e0001" {
					return nil
				}
				calls.Add(1)
				return c.err
			}}, nil)
			var dl []events.DeadLetter
			eventually(t, "dead-lettered", func() bool { dl, _ = l.DeadLetters(context.Background(), "dlq", "", 10); return len(dl) == 1 })
			if dl[0].Event.ID != "e0000" || dl[0].Attempts != c.wantAttempts || dl[0].Error != c.err.Error() || dl[0].FailedAt.IsZero() {
				t.Fatalf("dead letter = %+v", dl[0])
			}
			// The next event of the same key is not held back by the dead one.
			eventually(t, "lag 0", func() bool { n, _, _ := l.Lag(context.Background(), "dlq"); return n == 0 })
			if calls.Load() != int64(c.wantAttempts) {
				t.Fatalf("handler called %d times", calls.Load())
			}
		})
	}
}

func TestRunnerSurvivesPanics(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 2, 2)
	start(t, l, events.Consumer{Group: "panic", Handle: func(_ context.Context, ev rookery.Event) error {
		if ev.ID == "e0000" {
			panic("nil map")
		}
		return nil
	}}, nil)
	var dl []events.DeadLetter
	eventually(t, "the panic dead-lettered", func() bool { dl, _ = l.DeadLetters(context.Background(), "panic", "", 10); return len(dl) == 1 })
	eventually(t, "the other event processed", func() bool { n, _, _ := l.Lag(context.Background(), "panic"); return n == 0 })
}

// TestHandlersCarryTheGroupsProfilerLabel: a handler runs under the profiler label consumer=<group>
// (and what it starts inherits it), so a CPU profile of rookery serve splits the consumers' work by
// group.
func TestHandlersCarryTheGroupsProfilerLabel(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 3, 3)
	var mu sync.Mutex
	var labels []string
	start(t, l, events.Consumer{Group: "labelled", Handle: func(ctx context.Context, _ rookery.Event) error {
		v, _ := pprof.Label(ctx, "consumer")
		mu.Lock()
		labels = append(labels, v)
		mu.Unlock()
		return nil
	}}, nil)
	eventually(t, "every event handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(labels) == 3 })
	mu.Lock()
	defer mu.Unlock()
	for _, v := range labels {
		if v != "labelled" {
			t.Fatalf("a handler ran with the label consumer=%q; want %q", v, "labelled")
		}
	}
}

func TestCircuitBreakerStopsPulling(t *testing.T) {
	l := newLog(t)
	appendN(t, l, 50, 50)
	var calls, opened atomic.Int64
	start(t, l, events.Consumer{
		Group: "breaker", MaxAttempts: 1000, Concurrency: 1, Backoff: fastBackoff,
		BreakAfter: 3, Cooldown: 400 * time.Millisecond,
		Handle: func(context.Context, rookery.Event) error {
			calls.Add(1)
			return rookery.E(rookery.Unavailable, "dependency down")
		},
	}, func(_ string, o events.Outcome, _ time.Duration) {
		if o == events.BreakerOpen {
			opened.Add(1)
		}
	})
	eventually(t, "breaker open", func() bool { return opened.Load() == 1 })
	during := calls.Load()
	time.Sleep(250 * time.Millisecond)
	if n := calls.Load(); n != during {
		t.Fatalf("the handler was called %d times while the breaker was open", n-during)
	}
	// After the cooldown it tries again (half-open), fails, and opens again.
	eventually(t, "breaker reopened", func() bool { return opened.Load() >= 2 })
	if calls.Load() > during+3 {
		t.Fatalf("half-open allowed %d calls", calls.Load()-during)
	}
}

// A consumer with Types sees only those types; the others are acked without it.
func TestRunnerSkipsOtherTypes(t *testing.T) {
	l := newLog(t)
	for i, typ := range []string{"PostCreated", "LikeCreated", "PostCreated", "FollowCreated"} {
		ev := eventstest.Event(fmt.Sprintf("t%d", i), "k", i)
		ev.Type = typ
		if err := l.Append(context.Background(), []rookery.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var seen []string
	start(t, l, events.Consumer{Group: "typed", Types: []string{"PostCreated", "FollowCreated"}, Handle: func(_ context.Context, ev rookery.Event) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, ev.Type)
		return nil
	}}, nil)
	eventually(t, "lag 0", func() bool { n, _, _ := l.Lag(context.Background(), "typed"); return n == 0 })
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != "[PostCreated PostCreated FollowCreated]" {
		t.Fatalf("handled %v", seen)
	}
}

// TestBackgroundYields: while a foreground consumer has a backlog of late events, the Background
// consumers of its Runner handle one event at a time between them; when it keeps up, or its late
// events find it idle (a slow path to it, not a saturated process), as many as their concurrency
// allows.
func TestBackgroundYields(t *testing.T) {
	l := newLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := &events.Runner{Log: l, YieldAfter: 50 * time.Millisecond}
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	run := func(c events.Consumer) {
		wg.Add(1)
		go func() { defer wg.Done(); r.Run(ctx, c) }()
	}

	var lateHandled atomic.Int64
	run(events.Consumer{Group: "fg", Types: []string{"Late"}, Concurrency: 2, Handle: func(context.Context, rookery.Event) error {
		time.Sleep(2 * time.Millisecond)
		lateHandled.Add(1)
		return nil
	}})
	var inFlight, most, handled atomic.Int64
	run(events.Consumer{Group: "bg", Background: true, Types: []string{"Work"}, Concurrency: 8, Handle: func(context.Context, rookery.Event) error {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		handled.Add(1)
		return nil
	}})
	appendOf := func(typ, id, key string, at time.Time) {
		ev := eventstest.Event(id, key, 0)
		ev.Type, ev.OccurredAt = typ, rookery.Time{Time: at}
		if err := l.Append(ctx, []rookery.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	// phase works 24 background events while late foreground events (occurred an hour ago) come
	// in bursts of burst every 10 ms (none: no foreground events), and returns the most background
	// events handled at once.
	phase := func(name string, burst int) int64 {
		t.Helper()
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for i := 0; burst > 0; i++ {
				for j := range burst {
					appendOf("Late", fmt.Sprintf("%s-late%d-%d", name, i, j), fmt.Sprintf("l%d", j), time.Now().Add(-time.Hour))
				}
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
		if burst > 0 {
			seen := lateHandled.Load()
			eventually(t, "late events handled", func() bool { return lateHandled.Load() > seen+int64(burst) })
		}
		most.Store(0)
		before := handled.Load()
		for i := range 24 {
			appendOf("Work", fmt.Sprintf("%s-w%d", name, i), fmt.Sprintf("k%d", i), time.Now())
		}
		eventually(t, "the work of phase "+name+" done", func() bool { return handled.Load() == before+24 })
		close(stop)
		<-stopped
		eventually(t, "the foreground caught up", func() bool { n, _, _ := l.Lag(ctx, "fg"); return n == 0 })
		time.Sleep(400 * time.Millisecond) // longer than a yield lasts
		return most.Load()
	}

	if m := phase("backlog", 20); m != 1 {
		t.Fatalf("while the foreground had a backlog of late events, %d background events were handled at once; want 1", m)
	}
	if m := phase("idle", 0); m < 2 {
		t.Fatalf("with no foreground events, at most %d background event was handled at once; want several", m)
	}
	if m := phase("trickle", 1); m < 2 {
		t.Fatalf("while late foreground events found it idle, at most %d background event was handled at once; want several", m)
	}
}

// A handler on an event's first delivery is told so (IsFirstDelivery), and a redelivery of that
// event (its ack wait passed while the handler ran) waits for it to end: the redelivery's handler
// must find what the first one wrote.
func TestRedeliveryWaitsForTheFirstHandling(t *testing.T) {
	delivered := &atomic.Int64{}
	l := countingLog{newLog(t), delivered}
	release := make(chan struct{})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	defer let() // before the runner stops (start's cleanup), even if the test fails first
	type call struct {
		first      bool
		start, end time.Time
	}
	var mu sync.Mutex
	var calls []call
	start(t, l, events.Consumer{Group: "g", Concurrency: 2, AckWait: 100 * time.Millisecond, FirstDeliveries: true, Handle: func(ctx context.Context, ev rookery.Event) error {
		c := call{first: events.IsFirstDelivery(ctx), start: time.Now()}
		mu.Lock()
		n := len(calls)
		calls = append(calls, c)
		mu.Unlock()
		if n == 0 {
			<-release // past the ack wait: the log delivers the event again meanwhile
		}
		mu.Lock()
		calls[n].end = time.Now()
		mu.Unlock()
		return nil
	}}, nil)
	appendN(t, l, 1, 1)
	eventually(t, "the event delivered again", func() bool { return delivered.Load() >= 2 })
	time.Sleep(100 * time.Millisecond) // for a redelivery's handling that did not wait to begin
	mu.Lock()
	began := len(calls)
	mu.Unlock()
	if began != 1 {
		t.Fatalf("%d handlings began while the first delivery's was under way; want 1", began)
	}
	let()
	// The redeliveries' own ack waits may pass while they wait: more than one may run after it.
	eventually(t, "the event acked", func() bool { n, _, _ := l.Lag(context.Background(), "g"); return n == 0 })
	mu.Lock()
	seen := slices.Clone(calls) // asserted on without the lock, which late handlings take
	mu.Unlock()
	if len(seen) < 2 || !seen[0].first {
		t.Fatalf("%d handlings, the first with IsFirstDelivery %v; want 2 or more, true", len(seen), len(seen) > 0 && seen[0].first)
	}
	for _, c := range seen[1:] {
		if c.first {
			t.Fatal("a redelivery's handler was told IsFirstDelivery")
		}
		if c.start.Before(seen[0].end) {
			t.Fatal("a redelivery's handling began before the first delivery's ended")
		}
	}
	if events.IsFirstDelivery(context.Background()) {
		t.Fatal("IsFirstDelivery outside a handler")
	}
}

// countingLog counts the deliveries its subscriptions hand out, passing them on as they are.
type countingLog struct {
	events.Log
	delivered *atomic.Int64
}

func (c countingLog) Subscribe(ctx context.Context, group string, opts events.SubscribeOptions) (events.Subscription, error) {
	s, err := c.Log.Subscribe(ctx, group, opts)
	if err != nil {
		return nil, err
	}
	return countingSub{s, c.delivered}, nil
}

type countingSub struct {
	events.Subscription
	delivered *atomic.Int64
}

func (c countingSub) Next(ctx context.Context) (events.Delivery, error) {
	d, err := c.Subscription.Next(ctx)
	if err == nil {
		c.delivered.Add(1)
	}
	return d, err
}
