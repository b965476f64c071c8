package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/internal/testtable"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
	"github.com/rookery/rookery/timeline/tablestore"
)

// crashingTable fails every write after the first budget of them, as a process that dies there:
// what was written stays written, nothing after it is.
type crashingTable struct {
	table.Table
	budget atomic.Int64 // writes left; negative: no limit
}

func (c *crashingTable) write() error {
	if c.budget.Load() < 0 || c.budget.Add(-1) >= 0 {
		return nil
	}
	return rookery.E("crashingTable", rookery.Unavailable, "the process died here")
}

func (c *crashingTable) Put(ctx context.Context, it table.Item, conds ...table.Cond) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Table.Put(ctx, it, conds...)
}

func (c *crashingTable) Delete(ctx context.Context, k table.Key, conds ...table.Cond) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Table.Delete(ctx, k, conds...)
}

func (c *crashingTable) TransactWrite(ctx context.Context, ws []table.Write) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Table.TransactWrite(ctx, ws)
}

// TestErasureResumesAfterACrash deletes an account with something of every kind, and runs its
// erasure so that it dies after a few writes, again and again, each time from the redelivered
// event (as the pipeline would hand it over after a crash), until one run completes: then nothing
// of the account is stored, and everything of the others is.
func TestErasureResumesAfterACrash(t *testing.T) {
	ctx := context.Background()
	tab := &crashingTable{Table: backends["pebble"](t)}
	tab.budget.Store(-1)
	tl := testtable.Timelines(t, tab, tablestore.Options{Limits: timeline.Limits{Cap: 50}})
	a := newTwiceWorld(t, app.Deps{Table: tab, Timelines: tl}).a // no pipeline: the test hands events over
	server := rookery.WithCaller(ctx, rookery.Caller{UserID: "app", Server: true})
	as := func(u string) context.Context { return rookery.WithCaller(ctx, rookery.Caller{UserID: u}) }
	for _, u := range []string{"doomed", "bob", "cy"} {
		if _, _, err := a.PutUser(server, u, app.UserInput{Username: u + "_x"}); err != nil {
			t.Fatal(err)
		}
		if err := tl.Create(ctx, u, nil); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	post := func(u, text string) string {
		p, _, err := a.CreatePost(as(u), app.PostInput{Text: text})
		must(err)
		return p.ID
	}
	var doomedPosts []string
	for i := range 12 {
		doomedPosts = append(doomedPosts, post("doomed", fmt.Sprintf("post %d #erase", i)))
	}
	bobPost := post("bob", "bob's")
	for _, f := range [][2]string{{"doomed", "bob"}, {"bob", "doomed"}, {"cy", "doomed"}, {"cy", "bob"}} {
		_, err := a.Follow(server, f[0], f[1])
		must(err)
	}
	must(a.LikePost(as("doomed"), bobPost, "doomed"))
	for _, p := range doomedPosts { // a crash falls between some post's removal and its likes'
		must(a.LikePost(as("bob"), p, "bob"))
	}
	_, _, err := a.AddComment(as("doomed"), bobPost, app.CommentInput{Text: "hi"})
	must(err)
	_, _, err = a.AddComment(as("cy"), bobPost, app.CommentInput{Text: "hey"})
	must(err)
	// cy's post mentions doomed, who is notified (the test hands the event over).
	cyPost := post("cy", "hey @doomed_x")
	created, _ := json.Marshal(app.PostPayload{PostID: cyPost, AuthorID: "cy", CreatedAt: rookery.Time{Time: time.Now()}})
	must(a.ApplyNotifications(ctx, rookery.Event{ID: "MENTION1", Type: app.PostCreated, Version: 1, Key: "post:" + cyPost,
		OccurredAt: rookery.Time{Time: time.Now()}, Payload: created}))
	if n, err := tab.Query(ctx, table.Query{PK: "NOTIF#doomed"}); err != nil || len(n.Items) != 1 {
		t.Fatalf("doomed's notifications before the deletion: %v, %v; want cy's mention", n.Items, err)
	}
	must(a.Mute(server, "doomed", "cy"))
	must(a.Block(server, "bob", "doomed"))

	must(a.DeleteUser(as("doomed"), "doomed"))
	payload, _ := json.Marshal(app.UserDeletedPayload{UserID: "doomed", Username: "doomed_x", At: rookery.Time{Time: time.Now()}})
	ev := rookery.Event{ID: "ERASE1", Type: app.UserDeleted, Version: 1, Key: "user:doomed", Payload: payload}

	crashes := 0
	for {
		tab.budget.Store(3) // each run gets three writes done before it dies
		if crashes > 100 {
			t.Fatal("the erasure does not get anywhere across crashes")
		}
		err := a.ApplyErasure(ctx, ev)
		if err == nil {
			break
		}
		if !rookery.IsKind(err, rookery.Unavailable) {
			t.Fatal(err)
		}
		crashes++
	}
	tab.budget.Store(-1)
	if crashes < 5 {
		t.Fatalf("the erasure died only %d times: the test no longer crashes it part way", crashes)
	}

	for _, q := range []table.Query{
		{PK: "USER#doomed", Index: "GSI1"}, {PK: "COMMENTS#doomed", Index: "GSI1"}, {PK: "LIKED#doomed", Index: "GSI1"},
		{PK: "FOLLOWING#doomed", Index: "GSI1"}, {PK: "FOLLOWEE#doomed", Index: "GSI3"}, {PK: "BLOCKED#doomed", Index: "GSI3"},
		{PK: "MUTE#doomed"}, {PK: "TAG#erase", Index: "GSI2"}, {PK: "NOTIF#doomed"},
	} {
		p, err := tab.Query(ctx, q)
		must(err)
		if len(p.Items) > 0 {
			t.Fatalf("after %d crashes and a completed erasure, %s %s still holds %v", crashes, q.Index, q.PK, p.Items)
		}
	}
	for _, p := range doomedPosts { // nothing others left on the erased posts either, but the mark that their ids were used
		page, err := tab.Query(ctx, table.Query{PK: "POST#" + p})
		must(err)
		if page.Items = slices.DeleteFunc(page.Items, func(it table.Item) bool { return it[table.SK] == "GONE" }); len(page.Items) > 0 {
			t.Fatalf("after %d crashes and a completed erasure, the erased post %s still holds %v", crashes, p, page.Items)
		}
	}
	if page, err := tab.Query(ctx, table.Query{PK: "LIKED#bob", Index: "GSI1"}); err != nil || len(page.Items) > 0 {
		t.Fatalf("bob's likes of the erased posts: %v, %v", page.Items, err)
	}
	if ok, err := tl.Exists(ctx, "doomed"); err != nil || ok {
		t.Fatalf("the erased user's timeline: exists %v, %v", ok, err)
	}
	// cy's post keeps its text, and mentions nobody (a new account under the id is not named).
	if it, err := tab.Get(ctx, table.Key{PK: "POST#" + cyPost, SK: "META"}); err != nil || len(it.Strings("mentions")) != 0 || it.String("text") != "hey @doomed_x" {
		t.Fatalf("cy's post after the erasure: %v, %v; want its text, and no mentions", it, err)
	}
	// The others keep theirs: bob's post with cy's comment, cy's follow of bob, bob's block is gone
	// with its target.
	for _, k := range []struct {
		q    table.Query
		want int
	}{
		{table.Query{PK: "POST#" + bobPost, SK: table.SKCond{Op: table.SKBeginsWith, Value: "COMMENT#"}}, 1},
		{table.Query{PK: "FOLLOWING#cy", Index: "GSI1"}, 1},
		{table.Query{PK: "BLOCK#bob"}, 0},
		{table.Query{PK: "USER#bob", Index: "GSI1"}, 1},
	} {
		p, err := tab.Query(ctx, k.q)
		must(err)
		if len(p.Items) != k.want {
			t.Fatalf("%s %s holds %d items after the erasure; want %d: %v", k.q.Index, k.q.PK, len(p.Items), k.want, p.Items)
		}
	}
}

// TestGoneUsersKept: a process that is its store's only writer keeps which users are deleted, and
// a deletion, or the creation of an id whose tombstone expired, is seen at once by the lists that
// hide deleted users (here bob's followers, before the erasure has run).
func TestGoneUsersKept(t *testing.T) {
	var offset atomic.Int64 // the table's clock runs ahead of the App's by this much
	clock := rookery.ClockFunc(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	tab := testtable.Pebble(t, app.Schema, clock)
	a := newTwiceWorld(t, app.Deps{Table: tab, SoleWriter: true, DeletedGrace: time.Hour, PostCacheTTL: time.Hour}).a
	for _, u := range []string{"ann", "bob", "cat"} {
		if _, _, err := a.PutUser(server, u, app.UserInput{Username: u}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"ann", "cat"} {
		if _, err := a.Follow(as(u), u, "bob"); err != nil {
			t.Fatal(err)
		}
	}
	followers := func(want ...string) {
		t.Helper()
		for range 2 { // the second read is served by what the first kept
			p, err := a.Followers(server, "bob", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range p.Items {
				got = append(got, f.UserID)
			}
			if slices.Sort(got); !slices.Equal(got, want) {
				t.Fatalf("bob's followers: %v, want %v", got, want)
			}
		}
	}
	// A mention reads the username's claim, which says whether its user is deleted (the deletion
	// marks it): what it keeps is what the list then reads of cat, before and after the deletion.
	mention := func() {
		t.Helper()
		if _, _, err := a.CreatePost(as("bob"), app.PostInput{Text: "hi @cat"}); err != nil {
			t.Fatal(err)
		}
	}
	mention()
	followers("ann", "cat")
	if err := a.DeleteUser(server, "cat"); err != nil {
		t.Fatal(err)
	}
	mention()
	followers("ann")
	// A post's author comes from the process's copy of their profile: a deleted author has none.
	post := func(display string) error {
		t.Helper()
		p, _, err := a.CreatePost(as("ann"), app.PostInput{Text: "hi"})
		if err == nil && p.Author.DisplayName != display {
			t.Fatalf("the post's author is %+v; want display name %q", p.Author, display)
		}
		return err
	}
	if err := post("ann"); err != nil { // the display name defaults to the username
		t.Fatal(err)
	}
	if err := a.DeleteUser(server, "ann"); err != nil {
		t.Fatal(err)
	}
	followers() // deleted: hidden until the erasure deletes the edge (its pipeline is not running)
	if err := post("ann"); !rookery.IsKind(err, rookery.NotFound) {
		t.Fatalf("a deleted user posted: %v; want NotFound", err)
	}
	offset.Store(int64(2 * time.Hour))
	again := "Ann again"
	if _, _, err := a.PutUser(server, "ann", app.UserInput{Username: "ann", DisplayName: &again}); err != nil {
		t.Fatal(err) // the tombstone expired: the id is free
	}
	followers("ann") // the edge is the erased account's, but the id is a live user's again
	if err := post("Ann again"); err != nil {
		t.Fatal(err)
	}
}
