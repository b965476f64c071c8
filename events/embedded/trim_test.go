package embedded_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/table/tabletest"
)

var ctx = context.Background()

// TestTrimKeepsWhatGroupsNeed: two groups consume 3,000 events while a writer appends them and
// trims run every millisecond with no retention period: each group still gets every event, in
// order per key, though one of them naks a tenth of its deliveries and so lags behind.
func TestTrimKeepsWhatGroupsNeed(t *testing.T) {
	l, err := embedded.Open(embedded.Options{Dir: t.TempDir(), Partitions: 4, Retain: time.Nanosecond, TrimEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 3000
	subs := map[string]events.Subscription{}
	for _, g := range []string{"fast", "naky"} {
		s, err := l.Subscribe(ctx, g, events.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		subs[g] = s
	}
	go func() {
		for i := 0; i < n; i += 50 {
			var evs []rookery.Event
			for j := i; j < i+50; j++ {
				evs = append(evs, eventstest.Event(fmt.Sprintf("e%05d", j), fmt.Sprintf("k%d", j%13), j))
			}
			if err := l.Append(ctx, evs); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for g, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := map[string]int{}
			seen := map[string]bool{}
			for len(seen) < n {
				c, cancel := context.WithTimeout(ctx, 10*time.Second)
				d, err := s.Next(c)
				cancel()
				if err != nil {
					t.Errorf("%s: %d of %d events, then %v", g, len(seen), n, err)
					return
				}
				ev := d.Event()
				if g == "naky" && rand.IntN(10) == 0 {
					d.Nak(ctx, 0)
					continue
				}
				var seq int
				fmt.Sscanf(ev.ID, "e%d", &seq)
				if prev, ok := last[ev.Key]; ok && seq <= prev && !seen[ev.ID] {
					t.Errorf("%s: %s after e%05d on key %s", g, ev.ID, prev, ev.Key)
				}
				last[ev.Key] = max(last[ev.Key], seq)
				seen[ev.ID] = true
				if err := d.Ack(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	// Both groups acked everything: what is left is each partition's last event.
	if _, err := l.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := l.Subscribe(ctx, "late", events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	left := 0
	for {
		c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		d, err := s.Next(c)
		cancel()
		if err != nil {
			break
		}
		left++
		d.Ack(ctx)
	}
	if left > 4 {
		t.Fatalf("%d events left after trimming what both groups acked; want at most one per partition", left)
	}
}

// TestTrimRetention: events stay for the retention period and until the groups have acked them;
// a partition keeps its last event, so a reopened log goes on from the offsets it had; a group
// that subscribes later starts at the oldest event kept; an id trimmed away can be appended
// again, one kept cannot.
func TestTrimRetention(t *testing.T) {
	dir := t.TempDir()
	c := tabletest.NewClock(time.Now())
	open := func() *embedded.Log {
		l, err := embedded.Open(embedded.Options{Dir: dir, Partitions: 2, Clock: c, Retain: time.Hour, TrimEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := open()
	var evs []rookery.Event
	for i := range 40 {
		evs = append(evs, eventstest.Event(fmt.Sprintf("e%03d", i), fmt.Sprintf("k%d", i%5), i))
	}
	if err := l.Append(ctx, evs); err != nil {
		t.Fatal(err)
	}
	// take subscribes group, acks want events and leaves; drain also checks nothing more is there.
	take := func(l *embedded.Log, group string, want int, more bool) []string {
		t.Helper()
		s, err := l.Subscribe(ctx, group, events.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var ids []string
		for range want {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			d, err := s.Next(c)
			cancel()
			if err != nil {
				t.Fatalf("%s: %d events of %d, then %v", group, len(ids), want, err)
			}
			ids = append(ids, d.Event().ID)
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if more {
			return ids
		}
		c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if d, err := s.Next(c); err == nil {
			t.Fatalf("%s: an event more than the %d expected: %s", group, want, d.Event().ID)
		}
		return ids
	}
	drain := func(l *embedded.Log, group string, want int) []string { return take(l, group, want, false) }
	drain(l, "all", 40)
	trim := func(want int) {
		t.Helper()
		if n, err := l.Trim(ctx); err != nil || n != want {
			t.Fatalf("Trim = %d, %v; want %d", n, err, want)
		}
	}
	trim(0) // within the retention period
	c.Advance(2 * time.Hour)
	// "slow" acks nothing yet: it holds every event while it is subscribed.
	slow, err := l.Subscribe(ctx, "slow", events.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	trim(0)
	slow.Close()
	// "half" acks 10 events and leaves: its offsets, written at Close, hold the rest.
	half := take(l, "half", 10, true)
	l.Close()

	// Reopened: "slow" left no offset (it acked nothing), so "all" and "half" hold events; at
	// most the 10 events "half" acked go, and "half" then gets the other 30.
	l = open()
	if n, err := l.Trim(ctx); err != nil || n > 10 {
		t.Fatalf("Trim with half the events not acked by a group that left = %d, %v", n, err)
	}
	seen := map[string]bool{}
	for _, id := range append(half, drain(l, "half", 30)...) {
		seen[id] = true
	}
	if len(seen) != 40 {
		t.Fatalf(`"half" got %d distinct events of 40 across the reopen`, len(seen))
	}
	lastOf := map[int]string{} // partition -> its last event
	for _, ev := range evs {
		lastOf[events.Partition(ev.Key, 2)] = ev.ID
	}
	if n, err := l.Trim(ctx); err != nil || n > 40-len(lastOf) || n < 30-len(lastOf) {
		t.Fatalf("Trim once every group acked everything = %d, %v", n, err)
	}
	late := drain(l, "late", len(lastOf))
	for _, id := range late {
		if lastOf[0] != id && lastOf[1] != id {
			t.Errorf("a late group got %s; want the partitions' last events %v", id, lastOf)
		}
	}
	// Offsets go on from where they were: new events reach every group, after what it had.
	more := []rookery.Event{eventstest.Event("e000", "k0", 100), eventstest.Event("e039", "k4", 101), eventstest.Event("e040", "k1", 102)}
	if err := l.Append(ctx, more); err != nil {
		t.Fatal(err)
	}
	got := drain(l, "all", 2) // e000 was trimmed: appended again; e039 is kept: a duplicate
	if len(got) != 2 || got[0] == "e039" || got[1] == "e039" {
		t.Fatalf(`"all" after the new appends got %v; want e000 and e040`, got)
	}
	if n, _, err := l.Lag(ctx, "all"); err != nil || n != 0 {
		t.Fatalf("lag of a group that acked everything = %d, %v", n, err)
	}
	l.Close()
}
