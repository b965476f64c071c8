package nats_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/events/nats"
	"github.com/rookery/rookery/internal/testenv"
)

// The tests use the NATS server of internal/testenv (scripts/test.sh starts one for the run); each
// test has streams of its own, deleted when it ends. A server that does not answer fails the
// tests: they never skip.
func url() string { return testenv.NATSURL() }

var seq atomic.Int64

func open(t testing.TB) *nats.Log { return openParts(t, 4) }

func openParts(t testing.TB, parts int) *nats.Log {
	return openOpts(t, nats.Options{Prefix: newPrefix(), Partitions: parts})
}

func newPrefix() string {
	return fmt.Sprintf("rookerytest_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6, seq.Add(1))
}

// openOpts opens a log with o (its URL is the tests' server) and deletes its streams when the test
// ends.
func openOpts(t testing.TB, o nats.Options) *nats.Log {
	t.Helper()
	l := openShared(t, o)
	t.Cleanup(func() {
		if err := l.Destroy(context.Background()); err != nil {
			t.Errorf("deleting streams of %s: %v", o.Prefix, err)
		}
	})
	return l
}

// openShared opens another Log on the streams of o.Prefix, as a second process would; it is
// closed when the test ends.
func openShared(t testing.TB, o nats.Options) *nats.Log {
	t.Helper()
	o.URL = url()
	l, err := nats.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("NATS JetStream at %s: %v", url(), err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestConformance(t *testing.T) {
	// The server keeps the delays on its own clock (eventstest.Factory).
	eventstest.Run(t, func(t testing.TB, _ rookery.Clock) events.Log { return open(t) })
}

// record is the events a consumer (or all of a test's consumers) handled, in the order they were
// handed out.
type record struct {
	sync.Mutex
	handled []rookery.Event
}

func (r *record) add(ev rookery.Event) {
	r.Lock()
	defer r.Unlock()
	r.handled = append(r.handled, ev)
}

func (r *record) ids() map[string]bool {
	r.Lock()
	defer r.Unlock()
	ids := map[string]bool{}
	for _, ev := range r.handled {
		ids[ev.ID] = true
	}
	return ids
}

func (r *record) count() int {
	r.Lock()
	defer r.Unlock()
	return len(r.handled)
}

// consumeIn consumes group on l until stop is closed or the test ends, and returns the record of
// what it handled; everyone records it too.
func consumeIn(t *testing.T, l *nats.Log, group string, everyone *record, stop <-chan struct{}) *record {
	m := &record{}
	s, err := l.Subscribe(context.Background(), group, events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { <-stop; cancel() }()
	go func() {
		defer close(done)
		for {
			d, err := s.Next(ctx)
			if err != nil {
				return
			}
			everyone.add(d.Event())
			m.add(d.Event())
			time.Sleep(2 * time.Millisecond) // a handler's work, so that both members get some
			d.Ack(context.Background())
		}
	}()
	t.Cleanup(func() { cancel(); <-done; s.Close() })
	return m
}

func keyEvents(from, n, keys int) []rookery.Event {
	var evs []rookery.Event
	for i := from; i < from+n; i++ {
		evs = append(evs, eventstest.Event(fmt.Sprintf("m%04d", i), fmt.Sprintf("k%d", i%keys), i))
	}
	return evs
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, what, cond)
}

// inOrder checks that each key's events appear in handled in the order of their sequence numbers.
func inOrder(t *testing.T, who string, handled []rookery.Event) {
	t.Helper()
	last := map[string]string{}
	for _, ev := range handled {
		if prev, ok := last[ev.Key]; ok && ev.ID < prev {
			t.Fatalf("%s: key %s: %s handled after %s", who, ev.Key, ev.ID, prev)
		}
		last[ev.Key] = ev.ID
	}
}

// Two Logs on one stream, as two processes: they split the group's partitions, each event is
// handled once and each key's events in order across both; when one crashes, the other takes its
// partitions over once their leases expire and handles everything the crashed one had not acked.
func TestGroupMembersShareAndTakeOver(t *testing.T) {
	ctx := context.Background()
	o := nats.Options{Prefix: newPrefix(), Partitions: 8, LeaseTTL: time.Second}
	survivor := openOpts(t, o)
	doomed := openShared(t, o)
	if err := survivor.Append(ctx, keyEvents(0, 400, 40)); err != nil {
		t.Fatal(err)
	}
	stopDoomed := make(chan struct{})
	everyone := &record{}
	a := consumeIn(t, doomed, "g", everyone, stopDoomed)
	waitFor(t, "the first member to start", func() bool { return a.count() > 0 })
	b := consumeIn(t, survivor, "g", everyone, nil)
	waitFor(t, "all 400 events", func() bool { return a.count()+b.count() >= 400 })
	if a.count() == 0 || b.count() == 0 {
		t.Fatalf("one member did all the work: %d and %d events", a.count(), b.count())
	}
	everyone.Lock()
	if len(everyone.handled) != 400 {
		t.Fatalf("400 events were handled %d times without a failure", len(everyone.handled))
	}
	// Each key's events in order, across both members (a partition moves only between events).
	inOrder(t, "members a and b", everyone.handled)
	everyone.Unlock()

	// Crash a while it holds partitions with work in them.
	if err := survivor.Append(ctx, keyEvents(400, 400, 40)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a to take a share of the new events", func() bool { return a.count() > 220 })
	doomed.Crash()
	close(stopDoomed)
	bBefore := b.count()
	if err := survivor.Append(ctx, keyEvents(800, 200, 40)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the survivor to handle every event a had not", func() bool {
		ids := a.ids()
		for id := range b.ids() {
			ids[id] = true
		}
		return len(ids) == 1000
	})
	b.Lock()
	inOrder(t, "the survivor", b.handled[bBefore:])
	b.Unlock()
	// The last events may still be in their handlers: lag reaches 0 once they are acked.
	waitFor(t, "lag 0 after the takeover", func() bool {
		n, _, err := survivor.Lag(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}
