package app_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/internal/testtable"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/tablestore"
)

// TestFanoutAndCleanup runs the fan-out and cleanup consumers through the pipeline (every event
// delivered twice) over the table-backed timeline store.
func TestFanoutAndCleanup(t *testing.T) {
	ctx := context.Background()
	tab := backends["pebble"](t)
	tl := testtable.Timelines(t, tab, tablestore.Options{Limits: timeline.Limits{Cap: 50}})
	w := newTwiceWorld(t, app.Deps{Table: tab, Timelines: tl, CelebrityThreshold: 2})
	a := w.a
	pipeline := w.run(t)

	server := rookery.WithCaller(ctx, rookery.Caller{UserID: "app", Server: true})
	as := func(u string) context.Context { return rookery.WithCaller(ctx, rookery.Caller{UserID: u}) }
	for _, u := range []string{"author", "f1", "f2", "f3", "nofeed", "celeb"} {
		if _, _, err := a.PutUser(server, u, app.UserInput{Username: u + "_x"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"author", "f1", "f2", "f3", "celeb"} {
		if err := tl.Create(ctx, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"f1", "f2", "nofeed"} {
		if _, err := a.Follow(server, f, "author"); err != nil {
			t.Fatal(err)
		}
	}
	post := func(u, text string) string {
		p, _, err := a.CreatePost(as(u), app.PostInput{Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	stored := func(u string) []string { // the stored timeline (the feed is feedIDs)
		p, err := tl.Page(ctx, u, timeline.Entry{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range p.Entries {
			ids = append(ids, e.PostID)
		}
		return ids
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out: %s; stored timelines: f1 %v, f2 %v, f3 %v, author %v", what, stored("f1"), stored("f2"), stored("f3"), stored("author"))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Wait until the follows are counted, so the celebrity check sees them.
	eventually("follower count", func() bool { u, _ := a.User(server, "author"); return u.FollowerCount == 3 })

	// With 3 followers the author is over the threshold (2); with 2 they are fanned out.
	if err := a.Unfollow(server, "nofeed", "author"); err != nil {
		t.Fatal(err)
	}
	eventually("follower count 2", func() bool { u, _ := a.User(server, "author"); return u.FollowerCount == 2 })
	p1 := post("author", "one")
	p2 := post("author", "two")
	eventually("fan-out", func() bool {
		return slices.Equal(stored("f1"), []string{p2, p1}) && slices.Equal(stored("f2"), []string{p2, p1}) && slices.Equal(stored("author"), []string{p2, p1})
	})
	if ok, _ := tl.Exists(ctx, "nofeed"); ok {
		t.Fatal("fan-out created a timeline")
	}
	// A new follow merges the followee's recent posts.
	if _, err := a.Follow(server, "f3", "author"); err != nil {
		t.Fatal(err)
	}
	// The merge stores only what lies above the timeline's oldest entry (a fan-out may have put p2
	// there first); the feed shows both either way.
	eventually("merge on follow", func() bool {
		return len(stored("f3")) > 0 && slices.Equal(feedIDs(t, a, "f3"), []string{p2, p1})
	})
	// A deleted post leaves every timeline; an unfollow, a mute and a block take the author out.
	if err := a.DeletePost(as("author"), p1); err != nil {
		t.Fatal(err)
	}
	eventually("delete", func() bool {
		return slices.Equal(stored("f1"), []string{p2}) && slices.Equal(stored("f3"), []string{p2}) && slices.Equal(stored("author"), []string{p2})
	})
	if err := a.Unfollow(server, "f1", "author"); err != nil {
		t.Fatal(err)
	}
	if err := a.Mute(server, "f2", "author"); err != nil {
		t.Fatal(err)
	}
	if err := a.Block(server, "author", "f3"); err != nil {
		t.Fatal(err)
	}
	eventually("unfollow, mute, block", func() bool {
		return len(stored("f1")) == 0 && len(stored("f2")) == 0 && len(stored("f3")) == 0
	})
	// A celebrity (more followers than the threshold) is not fanned out.
	for _, f := range []string{"f1", "f2", "author"} {
		if _, err := a.Follow(server, f, "celeb"); err != nil {
			t.Fatal(err)
		}
	}
	eventually("celeb followers", func() bool { u, _ := a.User(server, "celeb"); return u.FollowerCount == 3 })
	pipeline.Drain(t, 30*time.Second) // the follow merges are done before the celebrity posts
	post("celeb", "famous")
	normal := post("f2", "after the celebrity's post")
	eventually("the later post arrives", func() bool { return slices.Contains(stored("f2"), normal) })
	for _, u := range []string{"f1", "author", "celeb"} {
		for _, id := range stored(u) {
			if p, _ := a.Post(server, id); p.Author.ID == "celeb" {
				t.Fatalf("%s's timeline holds the celebrity's post", u)
			}
		}
	}
}

// TestMergeAfterTrimLeavesNoHole: the cleanup consumer handles a reader's follow and unfollow
// events in either order (their keys differ). Here the follow merge of an author whose only post is
// old runs after a merge trimmed the timeline and an unfollow made room in it: the old post must not
// go in under the trimmed entries, or the feed would skip them (found by the feed model test).
func TestMergeAfterTrimLeavesNoHole(t *testing.T) {
	c := newCleanupWorld(t, 4, "r", "old", "u3", "u1")
	a, post, follow, apply := c.a, c.post, c.follow, c.apply
	pOld := post("old")
	p12 := post("u3")
	p18 := post("r")
	p22 := post("u3")
	p26 := post("r")
	follow("r", "u3")
	if got := feedIDs(t, a, "r"); !slices.Equal(got, []string{p26, p22, p18, p12}) { // the rebuild fills the cap
		t.Fatalf("first read %v", got)
	}
	p30 := post("u1")
	follow("r", "u1")
	apply(followEvent(app.FollowCreated, "r", "u1")) // merges p30: the trim takes p12 out
	if err := a.Unfollow(c.as("r"), "r", "u1"); err != nil {
		t.Fatal(err)
	}
	follow("r", "old")
	apply(followEvent(app.FollowDeleted, "r", "u1"))  // takes p30 out: room under the cap
	apply(followEvent(app.FollowCreated, "r", "old")) // pOld is older than the oldest entry: it stays out
	want := []string{p26, p22, p18, p12, pOld}
	if got := feedIDs(t, a, "r"); !slices.Equal(got, want) {
		t.Fatalf("feed %v; want %v (p30 %s)", got, want, p30)
	}
}

// cleanupWorld is an App on Pebble with table timelines of cap and users, and no pipeline: a test
// applies the cleanup events itself, in the order it wants.
type cleanupWorld struct {
	t *testing.T
	a *app.App
}

func newCleanupWorld(t *testing.T, cap int, users ...string) *cleanupWorld {
	tab := backends["pebble"](t)
	tl := testtable.Timelines(t, tab, tablestore.Options{Limits: timeline.Limits{Cap: cap}})
	c := &cleanupWorld{t: t, a: newTwiceWorld(t, app.Deps{Table: tab, Timelines: tl, TimelineCap: cap}).a}
	c.addUsers(users...)
	return c
}

// addUsers creates users, each with username <user>_x.
func (c *cleanupWorld) addUsers(users ...string) {
	c.t.Helper()
	server := rookery.WithCaller(context.Background(), rookery.Caller{UserID: "app", Server: true})
	for _, u := range users {
		if _, _, err := c.a.PutUser(server, u, app.UserInput{Username: u + "_x"}); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *cleanupWorld) as(u string) context.Context {
	return rookery.WithCaller(context.Background(), rookery.Caller{UserID: u})
}

// post makes a post of u's, a millisecond after the one before, and returns its id.
func (c *cleanupWorld) post(u string) string {
	c.t.Helper()
	p, _, err := c.a.CreatePost(c.as(u), app.PostInput{Text: "post by " + u})
	if err != nil {
		c.t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // distinct milliseconds
	return p.ID
}

func (c *cleanupWorld) follow(u, v string) {
	c.t.Helper()
	if _, err := c.a.Follow(c.as(u), u, v); err != nil {
		c.t.Fatal(err)
	}
}

// apply hands ev to the cleanup consumer's handler.
func (c *cleanupWorld) apply(ev rookery.Event) {
	c.t.Helper()
	if err := c.a.ApplyTimelineCleanup(context.Background(), ev); err != nil {
		c.t.Fatal(err)
	}
}

func followEvent(typ, follower, followee string) rookery.Event {
	b, _ := json.Marshal(app.FollowPayload{FollowerID: follower, FolloweeID: followee, At: rookery.Time{Time: time.Now()}})
	return rookery.Event{ID: typ + follower + followee, Type: typ, Payload: b}
}

// feedIDs reads the first page (20) of user's home feed and returns its post ids.
func feedIDs(t *testing.T, a *app.App, user string) []string {
	t.Helper()
	page, err := a.Feed(rookery.WithCaller(context.Background(), rookery.Caller{UserID: user}), "", 20)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range page.Items {
		ids = append(ids, p.ID)
	}
	return ids
}

// TestLateRemovalKeepsWhatIsVisibleAgain: the cleanup consumer handles events of different keys in
// any order (a block's event may be retried after a backoff while the follow that came after it is
// handled). A block's removal that arrives after the block was lifted and the follow made again
// must not take the author's posts out of the timeline: they would be missing above its floor for
// good.
func TestLateRemovalKeepsWhatIsVisibleAgain(t *testing.T) {
	c := newCleanupWorld(t, 50, "r", "b", "c")
	a, post, follow, apply := c.a, c.post, c.follow, c.apply
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	follow("r", "c")
	follow("r", "b")
	c0 := post("c")
	p1 := post("b")
	p2 := post("b")
	if got := feedIDs(t, a, "r"); !slices.Equal(got, []string{p2, p1, c0}) { // the rebuild pulls them
		t.Fatalf("first read %v", got)
	}
	must(a.Block(c.as("r"), "r", "b"))
	apply(followEvent(app.FollowDeleted, "r", "b"))
	must(a.Unblock(c.as("r"), "r", "b"))
	follow("r", "b")
	apply(followEvent(app.FollowCreated, "r", "b"))
	b, _ := json.Marshal(app.RelationPayload{UserID: "r", TargetID: "b", At: rookery.Time{Time: time.Now()}})
	apply(rookery.Event{ID: "block-r-b", Type: app.BlockCreated, Payload: b}) // late: lifted since
	if got, want := feedIDs(t, a, "r"), []string{p2, p1, c0}; !slices.Equal(got, want) {
		t.Fatalf("feed after a late block removal %v; want %v", got, want)
	}
}

// changeBeforeWrite is a timeline store whose next Merge or Push first runs change: a change
// handled by another worker between the reads of the merge or fan-out and its write.
type changeBeforeWrite struct {
	timeline.Store
	change func()
}

func (s *changeBeforeWrite) run() {
	if change := s.change; change != nil {
		s.change = nil
		change()
	}
}

func (s *changeBeforeWrite) Merge(ctx context.Context, user string, entries []timeline.Entry) error {
	s.run()
	return s.Store.Merge(ctx, user, entries)
}

func (s *changeBeforeWrite) Push(ctx context.Context, users []string, e timeline.Entry) error {
	s.run()
	return s.Store.Push(ctx, users, e)
}

// newRacingWorld is a cleanupWorld over a changeBeforeWrite store, with users r and b, b's post,
// and r's timeline built (empty).
func newRacingWorld(t *testing.T) (c *cleanupWorld, tl *changeBeforeWrite, post string) {
	tab := backends["pebble"](t)
	tl = &changeBeforeWrite{Store: testtable.Timelines(t, tab, tablestore.Options{})}
	c = &cleanupWorld{t: t, a: newTwiceWorld(t, app.Deps{Table: tab, Timelines: tl}).a}
	c.addUsers("r", "b")
	post = c.post("b")
	if got := feedIDs(t, c.a, "r"); len(got) != 0 {
		t.Fatalf("first read %v", got)
	}
	return c, tl, post
}

// deletePost deletes b's post and has the cleanup consumer handle the deletion.
func (c *cleanupWorld) deletePost(post string) {
	c.t.Helper()
	if err := c.a.DeletePost(c.as("b"), post); err != nil {
		c.t.Fatal(err)
	}
	body, _ := json.Marshal(app.PostPayload{PostID: post, AuthorID: "b"})
	c.apply(rookery.Event{ID: "delete", Type: app.PostDeleted, Payload: body})
}

// storedEmpty fails unless the change ran and r's stored timeline is empty.
func storedEmpty(t *testing.T, tl *changeBeforeWrite) {
	t.Helper()
	page, err := tl.Page(context.Background(), "r", timeline.Entry{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if tl.change != nil || len(page.Entries) != 0 {
		t.Fatalf("change ran: %v; r's stored timeline %v; want it empty", tl.change == nil, page.Entries)
	}
}

// TestMergeRacingARemoval: a follow's merge read the author's posts, and before it wrote them a
// deletion or a block was handled (its removal found nothing to take out). The merge must not leave
// behind what the reader may no longer see: the stored timeline would keep it for good.
func TestMergeRacingARemoval(t *testing.T) {
	t.Run("deletion", func(t *testing.T) {
		c, tl, p := newRacingWorld(t)
		c.follow("r", "b")
		tl.change = func() { c.deletePost(p) }
		c.apply(followEvent(app.FollowCreated, "r", "b"))
		storedEmpty(t, tl)
	})
	t.Run("block", func(t *testing.T) {
		c, tl, _ := newRacingWorld(t)
		c.follow("r", "b")
		tl.change = func() {
			if err := c.a.Block(c.as("r"), "r", "b"); err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(app.RelationPayload{UserID: "r", TargetID: "b"})
			c.apply(rookery.Event{ID: "block", Type: app.BlockCreated, Payload: body})
		}
		c.apply(followEvent(app.FollowCreated, "r", "b"))
		storedEmpty(t, tl)
	})
}

// TestFanoutRacingADeletion: a post deleted while its fan-out pushed (the cleanup's removal ran
// before the push) must not stay in the timelines the push reached.
func TestFanoutRacingADeletion(t *testing.T) {
	c, tl, p := newRacingWorld(t)
	c.follow("r", "b")
	post, err := c.a.Post(c.as("r"), p)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(app.PostPayload{PostID: p, AuthorID: "b", CreatedAt: post.CreatedAt})
	tl.change = func() { c.deletePost(p) }
	if err := c.a.ApplyFanout(context.Background(), rookery.Event{ID: "create", Type: app.PostCreated, Payload: body}); err != nil {
		t.Fatal(err)
	}
	storedEmpty(t, tl)
}

// TestFanoutOfAPostDeletedBefore: a post deleted, and its deletion's cleanup run, before its
// fan-out must not enter the timelines the fan-out reaches: whether the fan-out reads the author
// and the post first or, its author's follower list kept in memory, reads neither.
func TestFanoutOfAPostDeletedBefore(t *testing.T) {
	for _, kept := range []bool{false, true} {
		t.Run(map[bool]string{false: "read", true: "kept"}[kept], func(t *testing.T) {
			tab := backends["pebble"](t)
			tl := testtable.Timelines(t, tab, tablestore.Options{})
			d := app.Deps{Table: tab, Timelines: tl}
			if kept {
				d.SoleWriter, d.FollowerCacheIDs = true, 1000
			}
			c := &cleanupWorld{t: t, a: newTwiceWorld(t, d).a}
			c.addUsers("r", "b")
			c.follow("r", "b")
			if got := feedIDs(t, c.a, "r"); len(got) != 0 { // r's timeline is built
				t.Fatalf("first read %v", got)
			}
			fanout := func(p string, at rookery.Time) {
				body, _ := json.Marshal(app.PostPayload{PostID: p, AuthorID: "b", CreatedAt: at})
				if err := c.a.ApplyFanout(context.Background(), rookery.Event{ID: "create-" + p, Type: app.PostCreated, Payload: body}); err != nil {
					t.Fatal(err)
				}
			}
			created := func(p string) rookery.Time {
				post, err := c.a.Post(c.as("r"), p)
				if err != nil {
					t.Fatal(err)
				}
				return post.CreatedAt
			}
			p1 := c.post("b")
			fanout(p1, created(p1)) // reads b's followers (and keeps them, if kept)
			p2 := c.post("b")
			at := created(p2)
			c.deletePost(p2)
			fanout(p2, at)
			page, err := tl.Page(context.Background(), "r", timeline.Entry{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Entries) != 1 || page.Entries[0].PostID != p1 {
				t.Fatalf("r's stored timeline %v; want only %s (%s was deleted before its fan-out)", page.Entries, p1, p2)
			}
		})
	}
}

// panickyBegin is a timeline store whose Begin panics.
type panickyBegin struct{ timeline.Store }

func (panickyBegin) Begin(context.Context, string) (string, error) { panic("a bug in Begin") }

// TestRebuildPanic: a timeline rebuild runs apart from the read that began it (it outlives the
// read), where no handler's recovery covers it; a panic in it fails the read with an Internal
// error, as a panicking handler does, instead of ending the process.
func TestRebuildPanic(t *testing.T) {
	tab := backends["pebble"](t)
	tl := panickyBegin{testtable.Timelines(t, tab, tablestore.Options{})}
	c := &cleanupWorld{t: t, a: newTwiceWorld(t, app.Deps{Table: tab, Timelines: tl}).a}
	c.addUsers("r")
	_, err := c.a.Feed(c.as("r"), "", 20)
	if !rookery.IsKind(err, rookery.Internal) || !strings.Contains(err.Error(), "a bug in Begin") {
		t.Fatalf("feed read with a panicking rebuild: %v; want an Internal error naming the panic", err)
	}
}
