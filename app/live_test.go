package app_test

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
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/events/embedded"
	"github.com/rookery/rookery/events/eventstest"
	"github.com/rookery/rookery/internal/testtable"
	"github.com/rookery/rookery/live"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline/tablestore"
)

// The stream log: events of a present user numbered in order from the head, each source once,
// resumable after any id still kept (or the log's beginning), a reset past the newest StreamKeep;
// a user who never streamed gets nothing; concurrent appends keep the numbering gap-free; a log
// made afresh after it expired is appended to from its new head. As the only writer of its table
// a process keeps the heads it wrote (a log made afresh has moved its head behind its back).
func TestStreamLog(t *testing.T) {
	for _, sole := range []bool{false, true} {
		t.Run(fmt.Sprintf("sole writer %v", sole), func(t *testing.T) { testStreamLog(t, sole) })
	}
}

func testStreamLog(t *testing.T, sole bool) {
	ctx := context.Background()
	clock := &testClock{now: time.Now()}
	tab := testtable.FromEnv(t, app.Schema, clock)
	hub := &live.Hub{}
	a := app.New(app.Deps{Table: tab, Clock: clock, IDs: func() string { return "x" }, Streams: live.Local{Hub: hub}, SoleWriter: sole,
		Outbox: &events.Outbox{Table: tab}}) // its events are written, not relayed: only the stream log is under test
	as := func(u string) context.Context { return rookery.WithCaller(ctx, rookery.Caller{UserID: u}) }

	if _, err := a.OpenStream(as("u1"), ""); !rookery.IsKind(err, rookery.NotFound) {
		t.Fatalf("a stream of a user not yet created: %v; want NotFound", err)
	}
	if _, _, err := a.PutUser(as("u1"), "u1", app.UserInput{Username: "user1"}); err != nil {
		t.Fatal(err)
	}
	start, err := a.OpenStream(as("u1"), "")
	if err != nil || start.Head == 0 || len(start.Events) != 0 || start.Reset {
		t.Fatalf("a first stream: %+v, %v", start, err)
	}
	base := start.Head
	sub := hub.Subscribe("u1", 100)
	defer sub.Close()
	for i := 1; i <= 5; i++ {
		if err := a.AppendStreamForTest(ctx, []string{"u1", "never-streamed"}, fmt.Sprint("s", i), "streak", map[string]int{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.AppendStreamForTest(ctx, []string{"u1"}, "s3", "streak", map[string]int{"n": 3}); err != nil { // a redelivery
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if m := <-sub.C; m.Seq != base+uint64(i) || string(m.Data) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("published %d %s; want %d", m.Seq, m.Data, base+uint64(i))
		}
	}
	if len(sub.C) != 0 {
		t.Fatal("a redelivered source was published again")
	}
	if h, _ := a.StreamHead(ctx, "never-streamed"); h != 0 {
		t.Fatalf("a user who never streamed has a log (head %d)", h)
	}
	since := func(after uint64) ([]app.StreamEvent, bool) {
		t.Helper()
		evs, ok, err := a.StreamSince(ctx, "u1", after, 0)
		if err != nil {
			t.Fatal(err)
		}
		return evs, ok
	}
	if evs, ok := since(base); !ok || len(evs) != 5 || evs[0].Seq != base+1 || evs[4].Seq != base+5 {
		t.Fatalf("since the beginning: %d events, ok %v", len(evs), ok)
	}
	if evs, ok := since(base + 2); !ok || len(evs) != 3 || evs[0].Seq != base+3 {
		t.Fatalf("since the second: %d events, ok %v", len(evs), ok)
	}
	if evs, ok := since(base + 5); !ok || len(evs) != 0 {
		t.Fatalf("since the head: %d events, ok %v", len(evs), ok)
	}
	for _, after := range []uint64{base - 1, base + 6, 5} {
		if _, ok := since(after); ok {
			t.Fatalf("since %d (not of this log): ok", after)
		}
	}
	// Resuming through OpenStream: the events after the id, or a reset.
	if s, err := a.OpenStream(as("u1"), fmt.Sprint(base+3)); err != nil || s.Reset || len(s.Events) != 2 || s.Head != base+5 {
		t.Fatalf("resuming after %d: %+v, %v", base+3, s, err)
	}
	if s, err := a.OpenStream(as("u1"), "7"); err != nil || !s.Reset {
		t.Fatalf("resuming after a forgotten id: %+v, %v", s, err)
	}
	if _, err := a.OpenStream(as("u1"), "x7"); !rookery.IsKind(err, rookery.Invalid) {
		t.Fatalf("a malformed id: %v", err)
	}

	// Past StreamKeep events the oldest go: resuming from before them is a reset.
	sub.Close()
	var wg sync.WaitGroup
	const writers, each = 8, (app.StreamKeep + 40) / 8
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := a.AppendStreamForTest(ctx, []string{"u1"}, fmt.Sprintf("w%d-%d", w, i), "streak", i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	head, _ := a.StreamHead(ctx, "u1")
	if head != base+5+writers*each {
		t.Fatalf("head %d after %d appends; want %d", head, 5+writers*each, base+5+writers*each)
	}
	if _, ok := since(base + 5); ok {
		t.Fatal("resuming from an event trimmed past StreamKeep: ok")
	}
	evs, ok := since(head - app.StreamKeep + 1)
	if !ok || len(evs) != app.StreamKeep-1 {
		t.Fatalf("since the oldest kept: %d events, ok %v", len(evs), ok)
	}
	for i, ev := range evs {
		if ev.Seq != head-app.StreamKeep+2+uint64(i) {
			t.Fatalf("event %d has seq %d: the numbering has a gap", i, ev.Seq)
		}
	}

	// A user whose stream was last open StreamWindow ago is no longer present.
	clock.Add(app.StreamWindow + time.Minute)
	if h, _ := a.StreamHead(ctx, "u1"); h != 0 {
		t.Fatalf("the log outlived StreamWindow (head %d)", h)
	}
	clock.Add(time.Second) // a new log numbers from the clock, past every id of the old one
	again, err := a.OpenStream(as("u1"), "")
	if err != nil || again.Head <= head {
		t.Fatalf("a stream opened again: %+v, %v (the old head %d)", again, err, head)
	}
	if err := a.AppendStreamForTest(ctx, []string{"u1"}, "after", "streak", 1); err != nil {
		t.Fatal(err)
	}
	if evs, ok := since(again.Head); !ok || len(evs) != 1 || evs[0].Seq != again.Head+1 {
		t.Fatalf("the log made afresh, since its beginning: %+v, ok %v", evs, ok)
	}
}

// TestFeedPostJSON: a feed.post event's data, encoded without reflection, is what encoding/json
// writes for it.
func TestFeedPostJSON(t *testing.T) {
	for _, f := range []app.FeedPost{{}, {Post: rookery.Post{ID: "p<1>", Text: "a \"b\"\n", Tags: []string{}, Media: []rookery.Media{{ID: "m", Type: "image"}},
		CreatedAt: rookery.Time{Time: time.UnixMilli(1_700_000_000_000)}, LikedByMe: true}, Position: "c&d"}} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON\n%s\nencoding/json\n%s", got, want)
		}
	}
}

// TestStreamFeedPostOnce: a post enters a reader's stream once for each time it enters their feed,
// whichever of the events that bring it in the live consumers handle first, and whatever rules they
// find then (each reads them as they are when it runs: an unmute's handler may find the follow
// that came after it, a post's fan-out a follow made after the post). The events are handled here
// by hand, in the orders that used to send a post twice (TestStreams found the first in scale-out).
func TestStreamFeedPostOnce(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var got []rookery.Event
	a, _, pipe := liveApp(t, &live.Hub{}, func(ev rookery.Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ev)
	})
	// next returns the event of type typ that the actions since its last call made.
	var seen int
	next := func(typ string) rookery.Event {
		t.Helper()
		pipe.Drain(t, 30*time.Second)
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range got[seen:] {
			if ev.Type == typ {
				seen = len(got)
				return ev
			}
		}
		t.Fatalf("no %s among %d events", typ, len(got)-seen)
		return rookery.Event{}
	}
	handle := func(h func(context.Context, rookery.Event) error, evs ...rookery.Event) {
		t.Helper()
		for _, ev := range evs {
			if err := h(ctx, ev); err != nil {
				t.Fatalf("%s: %v", ev.Type, err)
			}
		}
	}
	server := rookery.WithCaller(ctx, rookery.Caller{UserID: "app", Server: true})
	as := func(u string) context.Context { return rookery.WithCaller(ctx, rookery.Caller{UserID: u}) }
	for _, u := range []string{"r", "w"} {
		if _, _, err := a.PutUser(server, u, app.UserInput{Username: "user_" + u}); err != nil {
			t.Fatal(err)
		}
	}
	post := func(text string) string {
		t.Helper()
		p, _, err := a.CreatePost(as("w"), app.PostInput{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		handle(a.ApplyFanout, next(app.PostCreated))
		return p.ID
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	start, err := a.OpenStream(as("r"), "")
	must(err)
	// r's stream since it opened, as "type post-or-author" strings.
	stream := func() []string {
		t.Helper()
		evs, ok, err := a.StreamSince(ctx, "r", start.Head, 0)
		if err != nil || !ok {
			t.Fatalf("r's log: ok %v, %v", ok, err)
		}
		var out []string
		for _, ev := range evs {
			var d struct {
				Post     struct{ ID string } `json:"post"`
				AuthorID string              `json:"author_id"`
			}
			must(json.Unmarshal(ev.Data, &d))
			out = append(out, ev.Type+" "+d.Post.ID+d.AuthorID)
		}
		return out
	}
	expect := func(step string, want ...string) {
		t.Helper()
		if got := stream(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: r's stream is\n%v\nwant\n%v", step, got, want)
		}
	}

	p1 := post("one")
	// r mutes and unmutes w while not following them, then follows: the unmute's handler runs after
	// the follow and finds it, and so does the follow's.
	must(a.Mute(as("r"), "r", "w"))
	mute := next(app.MuteCreated)
	must(a.Unmute(as("r"), "r", "w"))
	unmute := next(app.MuteDeleted)
	_, err = a.Follow(as("r"), "r", "w")
	must(err)
	follow := next(app.FollowCreated)
	handle(a.ApplyLive, mute, unmute, follow, unmute, follow) // and each delivered twice
	expect("unmute and follow", "feed.remove w", "feed.post "+p1)

	// w posts, r unfollows and follows again, and the post's fan-out runs after the follow's.
	p2, _, err := a.CreatePost(as("w"), app.PostInput{Text: "two"})
	must(err)
	created := next(app.PostCreated)
	must(a.Unfollow(as("r"), "r", "w"))
	unfollow := next(app.FollowDeleted)
	handle(a.ApplyLive, unfollow)
	_, err = a.Follow(as("r"), "r", "w")
	must(err)
	follow = next(app.FollowCreated)
	handle(a.ApplyLive, follow)
	handle(a.ApplyFanout, created, created)
	expect("follow again, then the fan-out", "feed.remove w", "feed.post "+p1, "feed.remove w", "feed.post "+p1, "feed.post "+p2.ID)
	// The unfollow and the follow delivered again (a consumer restarted before it saved its place):
	// the unfollow was appended, so it forgets nothing, and the follow adds nothing.
	handle(a.ApplyLive, unfollow, follow)
	expect("redelivered", "feed.remove w", "feed.post "+p1, "feed.remove w", "feed.post "+p1, "feed.post "+p2.ID)

	// A mute takes them out; an unmute, with r following, brings both in again, once.
	must(a.Mute(as("r"), "r", "w"))
	handle(a.ApplyLive, next(app.MuteCreated))
	must(a.Unmute(as("r"), "r", "w"))
	unmute = next(app.MuteDeleted)
	handle(a.ApplyLive, unmute, unmute)
	p3 := post("three")
	expect("mute, unmute, a new post", "feed.remove w", "feed.post "+p1, "feed.remove w", "feed.post "+p1, "feed.post "+p2.ID,
		"feed.remove w", "feed.post "+p1, "feed.post "+p2.ID, "feed.post "+p3)
}

// TestStreamPostStoredOnce: a feed.post event is stored as the post's stream post item, shared by
// every reader who sees the post alike, and its reader's position; a replay gives each reader what
// was published to them: their own position, and their own liked_by_me (which makes another item).
func TestStreamPostStoredOnce(t *testing.T) {
	ctx := context.Background()
	hub := &live.Hub{}
	var mu sync.Mutex
	var follows []rookery.Event
	a, tab, pipe := liveApp(t, hub, func(ev rookery.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == app.FollowCreated {
			follows = append(follows, ev)
		}
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	server := rookery.WithCaller(ctx, rookery.Caller{UserID: "app", Server: true})
	as := func(u string) context.Context { return rookery.WithCaller(ctx, rookery.Caller{UserID: u}) }
	readers := []string{"r1", "r2", "r3"}
	for _, u := range append([]string{"w"}, readers...) {
		_, _, err := a.PutUser(server, u, app.UserInput{Username: "user_" + u})
		must(err)
	}
	p, _, err := a.CreatePost(as("w"), app.PostInput{Text: "hello"})
	must(err)
	must(a.LikePost(as("r1"), p.ID, "r1"))
	heads := map[string]uint64{}
	subs := map[string]*live.Subscription{}
	for _, r := range readers {
		start, err := a.OpenStream(as(r), "")
		must(err)
		heads[r] = start.Head
		subs[r] = hub.Subscribe(r, 10)
		defer subs[r].Close()
		_, err = a.Follow(as(r), r, "w")
		must(err)
	}
	pipe.Drain(t, 30*time.Second)
	for _, ev := range follows { // each brings w's recent posts into its follower's stream
		must(a.ApplyLive(ctx, ev))
	}
	positions := map[string]bool{} // a feed's cursor is its reader's
	for _, r := range readers {
		evs, ok, err := a.StreamSince(ctx, r, heads[r], 0)
		if err != nil || !ok || len(evs) != 1 {
			t.Fatalf("%s's log: %d events, ok %v, %v", r, len(evs), ok, err)
		}
		published := <-subs[r].C
		if string(evs[0].Data) != string(published.Data) {
			t.Fatalf("%s's replay\n%s\nwas published as\n%s", r, evs[0].Data, published.Data)
		}
		var got app.FeedPost
		must(json.Unmarshal(evs[0].Data, &got))
		if got.Post.ID != p.ID || got.Post.LikedByMe != (r == "r1") || got.Position == "" {
			t.Fatalf("%s's feed.post: %+v", r, got)
		}
		if positions[got.Position] {
			t.Fatalf("%s's position is another reader's", r)
		}
		positions[got.Position] = true
	}
	// r2's and r3's views are alike: one item for both; r1's is another.
	page, err := tab.Query(ctx, table.Query{PK: "SPOST#" + p.ID})
	must(err)
	if len(page.Items) != 2 {
		t.Fatalf("%d stream post items; want 2 (liked by the reader, and not)", len(page.Items))
	}
}

// liveApp returns an app with streams published to hub, on a table of its own (returned) and an
// embedded log whose events are only handed to collect (the pipeline that does so is returned):
// the test hands them to the handlers.
func liveApp(t *testing.T, hub *live.Hub, collect func(rookery.Event)) (*app.App, table.Table, *eventstest.Pipeline) {
	tab := testtable.FromEnv(t, app.Schema, rookery.SystemClock)
	raw, err := embedded.Open(embedded.Options{InMemory: true, Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	outbox := &events.Outbox{Table: tab, Log: raw, Shards: 4, Poll: 10 * time.Millisecond}
	var seq atomic.Int64
	a := app.New(app.Deps{Table: tab, Events: raw, Outbox: outbox, Clock: rookery.SystemClock, Streams: live.Local{Hub: hub},
		Timelines: testtable.Timelines(t, tab, tablestore.Options{}), IDs: func() string { return fmt.Sprintf("%020d", seq.Add(1)) }})
	handle := events.Consumer{Group: "collect", Handle: func(_ context.Context, ev rookery.Event) error {
		collect(ev)
		return nil
	}}
	return a, tab, eventstest.RunPipeline(t, outbox, raw, []events.Consumer{handle})
}

// TestConsumedTypes: with home timelines the live group is not delivered PostCreated (fan-out
// streams a new post), and every other group's types, and GroupTypes, stay as they are.
func TestConsumedTypes(t *testing.T) {
	before := slices.Clone(app.GroupTypes[app.LiveGroup])
	with, without := app.ConsumedTypes(true), app.ConsumedTypes(false)
	if slices.Contains(with[app.LiveGroup], app.PostCreated) || !slices.Contains(without[app.LiveGroup], app.PostCreated) {
		t.Fatalf("live's types: %v with timelines, %v without", with[app.LiveGroup], without[app.LiveGroup])
	}
	if want := slices.DeleteFunc(slices.Clone(before), func(s string) bool { return s == app.PostCreated }); !slices.Equal(with[app.LiveGroup], want) {
		t.Fatalf("live's types with timelines: %v, want %v", with[app.LiveGroup], want)
	}
	if !slices.Equal(app.GroupTypes[app.LiveGroup], before) {
		t.Fatalf("GroupTypes changed: %v", app.GroupTypes[app.LiveGroup])
	}
	for g, types := range app.GroupTypes {
		if g != app.LiveGroup && (!slices.Equal(with[g], types) || !slices.Equal(without[g], types)) {
			t.Errorf("%s: %v with timelines, %v without, want %v", g, with[g], without[g], types)
		}
	}
}
