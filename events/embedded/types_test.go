package embedded_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
)

// TestGroupsReceiveTheirTypes: a group named in Options.Groups is delivered only the events of its
// types, in order per key, and is not behind for the others: those appended while it is idle (passed
// over as they are published) and those appended while it has a delivery in flight (passed over
// when it reaches them); a group named with nil and one not named get every event; what a group
// passed over stays passed over when the log is opened again.
func TestGroupsReceiveTheirTypes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := embedded.Options{Dir: dir, Partitions: 2, Groups: map[string][]string{"some": {"A"}, "all": nil}}
	l, err := embedded.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	subs := map[string]events.Subscription{}
	for _, g := range []string{"some", "all", "unnamed"} {
		s, err := l.Subscribe(ctx, g, events.SubscribeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		subs[g] = s
	}
	typed := func(id, key, typ string) rookery.Event {
		ev := eventstest.Event(id, key, 0)
		ev.Type = typ
		return ev
	}
	var evs []rookery.Event
	for i := range 40 {
		typ := "B"
		if i%3 == 0 {
			typ = "A"
		}
		evs = append(evs, typed(fmt.Sprintf("e%02d", i), fmt.Sprintf("k%d", i%5), typ))
	}
	// The first appends find every group idle.
	if err := l.Append(ctx, evs[:20]); err != nil {
		t.Fatal(err)
	}
	// Then "some" holds a delivery while the rest is appended.
	held := eventstest.Next(t, subs["some"])
	if held.Event().ID != "e00" {
		t.Fatalf("the first delivery to some is %s, want e00", held.Event().ID)
	}
	if err := l.Append(ctx, evs[20:]); err != nil {
		t.Fatal(err)
	}
	if err := held.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, ev := range evs {
		want["all"] = append(want["all"], ev.ID)
		if ev.Type == "A" {
			want["some"] = append(want["some"], ev.ID)
		}
	}
	want["unnamed"] = want["all"]
	got := map[string][]string{"some": {"e00"}}
	for g, s := range subs {
		for len(got[g]) < len(want[g]) {
			d := eventstest.Next(t, s)
			got[g] = append(got[g], d.Event().ID)
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// The keys spread over both partitions: the order holds per key (below), not overall.
		if !sameSet(got[g], want[g]) {
			t.Errorf("group %s got %v, want %v", g, got[g], want[g])
		}
		if lag, _, err := l.Lag(ctx, g); err != nil || lag != 0 {
			t.Errorf("group %s: lag %d (%v) after its last delivery, want 0", g, lag, err)
		}
	}
	keyOf := map[string]string{}
	for _, ev := range evs {
		keyOf[ev.ID] = ev.Key
	}
	for g, ids := range got {
		for k := range 5 {
			var perKey []string
			for _, id := range ids {
				if keyOf[id] == fmt.Sprintf("k%d", k) {
					perKey = append(perKey, id)
				}
			}
			if !slices.IsSorted(perKey) {
				t.Errorf("group %s: key k%d's events out of order: %v", g, k, perKey)
			}
		}
	}
	// Only B events: "some" is not behind for them, and nothing is delivered to it.
	if err := l.Append(ctx, []rookery.Event{typed("f1", "k1", "B"), typed("f2", "k2", "B")}); err != nil {
		t.Fatal(err)
	}
	if lag, _, err := l.Lag(ctx, "some"); err != nil || lag != 0 {
		t.Errorf("some: lag %d (%v) after events it does not receive, want 0", lag, err)
	}
	eventstest.None(t, subs["some"], 200*time.Millisecond)
	for _, s := range subs {
		s.Close()
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = embedded.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if lag, _, err := l.Lag(ctx, "some"); err != nil || lag != 0 {
		t.Errorf("some: lag %d (%v) after reopening, want 0", lag, err)
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
