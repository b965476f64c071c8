package events

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookery/rookery"
	"go.opentelemetry.io/otel/trace"
)

// Handler processes one event. It must be idempotent: the same event may be delivered again (after
// a crash, a timeout or a replay), and applying it twice must change nothing. Its error decides
// what happens next: nil acks the event; an Unavailable error is retried with backoff until
// Consumer.MaxAttempts; any other error sends the event to the dead-letter queue at once.
type Handler func(ctx context.Context, ev rookery.Event) error

// Consumer is one consumer group and how to run it.
type Consumer struct {
	// Group names the consumer group (1..64 of [A-Za-z0-9_-]); every group sees every event.
	Group  string
	Handle Handler
	// MaxAttempts is how many deliveries an event gets before it is dead-lettered; 0 means 8.
	MaxAttempts int
	// Concurrency is how many events are processed at once (each key's events still in order);
	// 0 means 4.
	Concurrency int
	// Backoff returns the delay before retry attempt n (1, 2, ...); nil means exponential from
	// 100 ms, capped at 30 s, with full jitter.
	Backoff func(attempt int) time.Duration
	// BreakAfter consecutive Unavailable failures open the circuit breaker: the consumer stops
	// pulling for Cooldown instead of burning its events' retries on a dependency that is down.
	// 0 means 10 failures; a Cooldown of 0 means 30 s.
	BreakAfter int
	Cooldown   time.Duration
	// AckWait is passed to the log (see SubscribeOptions).
	AckWait time.Duration
	// Types are the event types Handle handles; nil: every type. The runner acks the others without
	// calling Handle, on every log, so a list that misses a type fails every backend's tests alike;
	// a log that can filter (SNS's filter policies) does not deliver them at all.
	Types []string
	// Background consumers give way to the others of their Runner while those are behind (see
	// Runner.YieldAfter): work that may wait (counts, notifications, leaderboards) yields the CPU to
	// work whose delay users see at once (home feeds, live streams).
	Background bool
	// FirstDeliveries says that Handle asks IsFirstDelivery. Only then does the Runner ask the log
	// (FirstDelivery) and keep a redelivery of an event from running beside its first delivery's
	// handling: the other consumers pay nothing for it.
	FirstDeliveries bool
}

// Outcome is what happened to one delivery, as reported to a Stats function.
type Outcome string

const (
	Processed    Outcome = "processed"     // handled and acked
	Retried      Outcome = "retried"       // failed with Unavailable; will be delivered again
	DeadLettered Outcome = "dead_lettered" // failed for good; in the dead-letter queue
	BreakerOpen  Outcome = "breaker_open"  // the circuit breaker opened (took is the cooldown)
)

// Stats is told every outcome, with the handler's latency.
type Stats func(group string, outcome Outcome, took time.Duration)

// Runner runs consumers over a log.
type Runner struct {
	Log    Log
	Clock  rookery.Clock
	Logger *slog.Logger
	Stats  Stats
	// Age, if set, is told for each event handled successfully the time from its occurrence to the
	// end of its handling: end-to-end lag (for the fan-out group and PostCreated, a post's fan-out
	// lag).
	Age func(group, eventType string, age time.Duration)
	// Tracing receives a span for every delivery handled, in the trace of the event (events.go's
	// TraceParent); nil: none.
	Tracing trace.TracerProvider
	// YieldAfter, if positive, makes the Background consumers yield: for yieldHold after a
	// foreground consumer finished an event more than YieldAfter after it occurred, one that was
	// waiting for it already (the foreground is behind with a backlog: the process is saturated,
	// or catching up; a late event that found its consumer idle says the path to it is slow, which
	// yielding would not help), the Background consumers handle one event at a time between them.
	// They go on, slowly, so none is starved however long it lasts.
	YieldAfter time.Duration

	yieldOnce sync.Once
	yield     *yielder
}

// yieldHold is how long one late foreground event keeps the Background consumers yielding: long
// enough to span the gaps between a saturated foreground's events, short enough that they resume
// soon after it caught up.
const yieldHold = 250 * time.Millisecond

// yielder is what a Runner's consumers share to yield: when the foreground was last behind, and
// the one turn the Background consumers take while it is.
type yielder struct {
	behindAt atomic.Int64  // Unix nanoseconds of the last late foreground event (0: none yet)
	turn     chan struct{} // holds a token while a Background event is handled during a yield
}

// lateAt notes that a foreground event ended late at now.
func (y *yielder) lateAt(now time.Time) { y.behindAt.Store(now.UnixNano()) }

// wait returns at once while the foreground keeps up (release does nothing then); while it is
// behind, it waits for the Background consumers' one turn, which release gives back. It returns
// ok false if ctx ended first.
func (y *yielder) wait(ctx context.Context, now time.Time) (release func(), ok bool) {
	if now.UnixNano()-y.behindAt.Load() >= int64(yieldHold) {
		return func() {}, true
	}
	select {
	case y.turn <- struct{}{}:
		return func() { <-y.turn }, true
	case <-ctx.Done():
		return nil, false
	}
}

func (r *Runner) yielder() *yielder {
	r.yieldOnce.Do(func() { r.yield = &yielder{turn: make(chan struct{}, 1)} })
	return r.yield
}

// Run runs c until ctx ends, then returns nil; it returns an error only if it cannot subscribe.
func (r *Runner) Run(ctx context.Context, c Consumer) error {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.BreakAfter <= 0 {
		c.BreakAfter = 10
	}
	if c.Cooldown <= 0 {
		c.Cooldown = 30 * time.Second
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	clock := r.Clock
	if clock == nil {
		clock = rookery.SystemClock
	}
	stats := r.Stats
	if stats == nil {
		stats = func(string, Outcome, time.Duration) {}
	}
	w := &worker{c: c, log: log.With("consumer", c.Group), clock: clock, stats: stats, age: r.Age, l: r.Log}
	if r.YieldAfter > 0 {
		w.yield, w.yieldAfter = r.yielder(), r.YieldAfter
	}
	if r.Tracing != nil {
		w.tracer = r.Tracing.Tracer("github.com/rookery/rookery/events")
	}
	var subs []Subscription
	for range c.Concurrency {
		s, err := r.Log.Subscribe(ctx, c.Group, SubscribeOptions{AckWait: c.AckWait})
		if err != nil {
			for _, s := range subs {
				s.Close()
			}
			return err
		}
		subs = append(subs, s)
	}
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			// Profiles (rookery serve --pprof-addr) attribute the consumers' CPU to their groups.
			pprof.Do(ctx, pprof.Labels("consumer", c.Group), func(ctx context.Context) { w.loop(ctx, s) })
		}()
	}
	wg.Wait()
	return nil
}

type worker struct {
	c      Consumer
	l      Log
	log    *slog.Logger
	clock  rookery.Clock
	stats  Stats
	age    func(group, eventType string, age time.Duration)
	tracer trace.Tracer // nil: no spans
	// yield is the Runner's yielder (nil: Background consumers never yield); a foreground worker
	// notes events that end yieldAfter after they occurred, a Background one waits on it.
	yield      *yielder
	yieldAfter time.Duration

	mu        sync.Mutex
	failures  int       // consecutive Unavailable failures
	openUntil time.Time // the breaker is open until then
	// firsts holds the events being handled on a first delivery (IsFirstDelivery), by id, each
	// with a channel closed when that handling ends: a redelivery of one (its ack wait passed)
	// waits for it, so that its handler finds what the first one wrote.
	firsts map[string]chan struct{}
}

func (w *worker) loop(ctx context.Context, s Subscription) {
	for ctx.Err() == nil {
		if !w.waitBreaker(ctx) {
			return
		}
		asked := time.Now()
		d, err := s.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Error("receiving from the event log failed", "err", err)
				rookery.Sleep(ctx, time.Second)
			}
			continue
		}
		w.handle(ctx, d, time.Since(asked) >= waitedFor)
	}
}

// waitedFor is how long a Next must block for its event not to count as waiting already (the
// consumer then has a backlog).
const waitedFor = time.Millisecond

// handle handles d; waited says whether Next blocked for it (the consumer had no backlog).
func (w *worker) handle(ctx context.Context, d Delivery, waited bool) {
	ev := d.Event()
	if w.c.Types != nil && !slices.Contains(w.c.Types, ev.Type) {
		if err := d.Ack(ctx); err != nil {
			w.log.Warn("ack failed; the event will be delivered again", "event", ev.ID, "err", err)
		}
		return
	}
	first := false
	if fd, ok := d.(FirstDelivery); ok && w.c.FirstDeliveries && fd.First() {
		done := w.handlingFirst(ev.ID)
		// Asked again once noted: a redelivery handed out before the note would not have waited
		// for this handling, and the log says then that this delivery is no longer the first.
		if first = fd.First(); first {
			defer done()
			ctx = withFirstDelivery(ctx)
		} else {
			done()
		}
	}
	if w.c.FirstDeliveries && !first && !w.afterFirst(ctx, ev.ID) {
		return // not acked: delivered again
	}
	if w.yield != nil && w.c.Background {
		release, ok := w.yield.wait(ctx, w.clock.Now())
		if !ok {
			return // not acked: delivered again
		}
		defer release()
	}
	start := time.Now()
	var err error
	if w.tracer == nil { // tracing off: nothing added to the pipeline's hottest loop
		err = safeCall(ctx, w.c.Handle, ev)
	} else {
		hctx, span := startHandling(ctx, w.tracer, w.c.Group, ev, d.Attempt())
		err = safeCall(hctx, w.c.Handle, ev)
		endHandling(span, err)
	}
	took := time.Since(start)
	switch {
	case err == nil:
		w.succeeded()
		if aerr := d.Ack(ctx); aerr != nil {
			w.log.Warn("ack failed; the event will be delivered again", "event", ev.ID, "err", aerr)
		}
		if w.log.Enabled(ctx, slog.LevelDebug) {
			w.log.Debug("event handled", "event", ev.ID, "type", ev.Type, "key", ev.Key, "attempt", d.Attempt(), "took", took)
		}
		w.stats(w.c.Group, Processed, took)
		now := w.clock.Now()
		age := now.Sub(ev.OccurredAt.Time)
		if w.age != nil {
			w.age(w.c.Group, ev.Type, age)
		}
		if w.yield != nil && !w.c.Background && age > w.yieldAfter && !waited {
			w.yield.lateAt(now)
		}
	case rookery.IsKind(err, rookery.Unavailable) && d.Attempt() < w.c.MaxAttempts:
		w.failed()
		delay := w.c.Backoff(d.Attempt())
		w.log.Warn("handler failed; retrying", "event", ev.ID, "type", ev.Type, "attempt", d.Attempt(), "retry_in", delay, "err", err)
		if nerr := d.Nak(ctx, delay); nerr != nil {
			w.log.Warn("nak failed; the event will be delivered again after the ack wait", "event", ev.ID, "err", nerr)
		}
		w.stats(w.c.Group, Retried, took)
	default:
		if rookery.IsKind(err, rookery.Unavailable) {
			w.failed()
		}
		w.log.Error("handler failed for good; dead-lettering the event", "event", ev.ID, "type", ev.Type, "attempt", d.Attempt(), "err", err)
		dl := DeadLetter{Event: ev, Error: err.Error(), Attempts: d.Attempt(), FailedAt: rookery.Time{Time: w.clock.Now().UTC()}}
		if derr := w.l.DeadLetter(ctx, w.c.Group, dl); derr != nil {
			// Not acked: the event stays in the log and is tried again rather than lost.
			w.log.Error("dead-lettering failed; the event will be delivered again", "event", ev.ID, "err", derr)
			d.Nak(ctx, w.c.Backoff(d.Attempt()))
			return
		}
		if aerr := d.Ack(ctx); aerr != nil {
			w.log.Warn("ack after dead-lettering failed", "event", ev.ID, "err", aerr)
		}
		w.stats(w.c.Group, DeadLettered, took)
	}
}

// safeCall runs h, turning a panic into an Internal error.
func safeCall(ctx context.Context, h Handler, ev rookery.Event) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = rookery.E(rookery.Op("events.handler"), rookery.Internal, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
		}
	}()
	return h(ctx, ev)
}

// handlingFirst notes that the event with id is being handled on its first delivery, until the
// returned func is called.
func (w *worker) handlingFirst(id string) (done func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.firsts == nil {
		w.firsts = map[string]chan struct{}{}
	}
	w.firsts[id] = ch
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		if w.firsts[id] == ch {
			delete(w.firsts, id)
		}
		w.mu.Unlock()
		close(ch)
	}
}

// afterFirst waits until no first delivery of the event with id is being handled; it returns
// false if ctx ended first.
func (w *worker) afterFirst(ctx context.Context, id string) bool {
	w.mu.Lock()
	ch := w.firsts[id]
	w.mu.Unlock()
	if ch == nil {
		return true
	}
	w.log.Warn("an event was delivered again while its first delivery is still being handled; waiting for it", "event", id)
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *worker) succeeded() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failures >= w.c.BreakAfter {
		w.log.Info("circuit breaker closed: the dependency answers again")
	}
	w.failures = 0
}

func (w *worker) failed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failures++
	if w.failures == w.c.BreakAfter || w.failures > w.c.BreakAfter && !w.clock.Now().Before(w.openUntil) {
		// Opens on reaching the threshold, and again on a failure after a cooldown (half-open).
		w.openUntil = w.clock.Now().Add(w.c.Cooldown)
		w.log.Warn("circuit breaker open: a dependency keeps failing; pausing", "failures", w.failures, "cooldown", w.c.Cooldown)
		w.stats(w.c.Group, BreakerOpen, w.c.Cooldown)
	}
}

// waitBreaker blocks while the breaker is open; it returns false if ctx ends.
func (w *worker) waitBreaker(ctx context.Context) bool {
	for {
		w.mu.Lock()
		wait := w.openUntil.Sub(w.clock.Now())
		w.mu.Unlock()
		if wait <= 0 {
			return true
		}
		if !rookery.Sleep(ctx, min(wait, 100*time.Millisecond)) {
			return false
		}
	}
}

// DefaultBackoff is exponential from 100 ms, doubling per attempt, capped at 30 s, with full
// jitter (a uniformly random delay up to the ceiling).
func DefaultBackoff(attempt int) time.Duration {
	ceiling := min(100*time.Millisecond<<min(attempt-1, 10), 30*time.Second)
	return time.Duration(rand.Int64N(int64(ceiling))) + time.Millisecond
}
