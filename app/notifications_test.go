package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/table"
)

// An event's notifications are created together with its applied record: none for the actor or
// for a recipient who blocked the actor, and an event delivered again creates nothing twice, nor
// makes a notification read since unread again, nor brings back a like's notification that the
// like's undoing removed.
func TestMentionNotificationsOncePerRecipient(t *testing.T) {
	ctx := context.Background()
	a := newTwiceWorld(t, app.Deps{Table: backends["pebble"](t)}).a // no consumers run: the test applies the events
	server := rookery.WithCaller(ctx, rookery.Caller{UserID: "app", Server: true})
	for _, u := range []string{"alice", "bob", "carol", "dave", "erin"} {
		if _, _, err := a.PutUser(server, u, app.UserInput{Username: u + "_x"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Block(server, "erin", "alice"); err != nil {
		t.Fatal(err)
	}
	at := rookery.Time{Time: time.Now()}
	edit := func(mentions ...string) rookery.Event {
		p, _ := json.Marshal(app.PostPayload{PostID: "p1", AuthorID: "alice", NewMentions: mentions})
		return rookery.Event{ID: "01EVENT", Type: app.PostEdited, OccurredAt: at, Payload: p}
	}
	like := func(typ string) rookery.Event {
		p, _ := json.Marshal(app.LikePayload{PostID: "p1", AuthorID: "carol", UserID: "dave", At: at})
		return rookery.Event{ID: "01LIKE" + typ, Type: typ, OccurredAt: at, Payload: p}
	}
	list := func(user string) []app.Notification {
		p, err := a.Notifications(rookery.WithCaller(ctx, rookery.Caller{UserID: user}), false, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return p.Items
	}
	apply := func(ev rookery.Event) {
		t.Helper()
		if err := a.ApplyNotifications(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	apply(edit("bob", "carol", "alice", "erin", "dave"))
	if err := a.MarkRead(rookery.WithCaller(ctx, rookery.Caller{UserID: "bob"}), nil, true); err != nil {
		t.Fatal(err)
	}
	apply(like(app.LikeCreated))
	apply(like(app.LikeDeleted))
	apply(edit("bob", "carol", "alice", "erin", "dave")) // both delivered again
	apply(like(app.LikeCreated))
	for user, want := range map[string]int{"bob": 1, "carol": 1, "dave": 1, "alice": 0, "erin": 0} {
		if got := len(list(user)); got != want {
			t.Errorf("%s has %d notifications; want %d", user, got, want)
		}
	}
	if ns := list("bob"); len(ns) == 1 && !ns[0].Read {
		t.Errorf("bob's notification, read before the event came again, is unread")
	}
}

// putUsers creates users (username: the id and "_x") and returns a check that fails t on an error.
func putUsers(t *testing.T, a *app.App, users ...string) (must func(error)) {
	must = func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	server := rookery.WithCaller(context.Background(), rookery.Caller{UserID: "app", Server: true})
	for _, u := range users {
		_, _, err := a.PutUser(server, u, app.UserInput{Username: u + "_x"})
		must(err)
	}
	return must
}

// A post tells the users it mentioned when it was written (PostCreated's notify), even when an edit
// changed its mentions before the consumer got to the event: here the author blocked bob and
// edited the post, which no longer mentions him; and an edit that adds dave to a post that named
// nobody is for PostEdited to tell, not PostCreated. An event from before notify was written
// (nil) tells the post's mentions as the consumer finds them.
func TestMentionsToldAsWritten(t *testing.T) {
	ctx := context.Background()
	w := newTwiceWorld(t, app.Deps{Table: backends["pebble"](t)}) // no consumers run: the test applies the events
	a := w.a
	alice := rookery.WithCaller(ctx, rookery.Caller{UserID: "alice"})
	must := putUsers(t, a, "alice", "bob", "carol", "dave", "erin")
	post := func(text string) string {
		p, _, err := a.CreatePost(alice, app.PostInput{Text: text})
		must(err)
		return p.ID
	}
	edit := func(id, text string) []string {
		p, err := a.EditPost(alice, id, app.PostEdit{Text: &text})
		must(err)
		return p.Mentions
	}
	p, r, q := post("hi @bob_x @carol_x"), post("plain"), post("hi @erin_x")
	must(a.Block(alice, "alice", "bob"))
	if m := edit(p, "hi @bob_x @carol_x, edited"); fmt.Sprint(m) != "[carol]" {
		t.Fatalf("the edit after the block mentions %v; want [carol]", m)
	}
	edit(r, "plain @dave_x")
	// PostCreated of p and r as the service wrote them; q's as a version before notify did.
	must(w.outbox.Flush(ctx))
	sub, err := w.log.Subscribe(ctx, "probe", events.SubscribeOptions{})
	must(err)
	defer sub.Close()
	for applied := map[string]bool{}; len(applied) < 2; { // the log delivers each event twice
		next, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := sub.Next(next)
		cancel()
		must(err)
		if ev := d.Event(); ev.Type == app.PostCreated && ev.Key != "post:"+q {
			must(a.ApplyNotifications(ctx, ev))
			applied[ev.Key] = true
		}
		must(d.Ack(ctx))
	}
	old, _ := json.Marshal(app.PostPayload{PostID: q, AuthorID: "alice", Visibility: rookery.Public})
	must(a.ApplyNotifications(ctx, rookery.Event{ID: "01OLDEVENT", Type: app.PostCreated, OccurredAt: rookery.Time{Time: time.Now()}, Payload: old}))
	for user, want := range map[string]string{"bob": "[" + p + "]", "carol": "[" + p + "]", "dave": "[]", "erin": "[" + q + "]"} {
		page, err := a.Notifications(rookery.WithCaller(ctx, rookery.Caller{UserID: user}), false, "", 100)
		must(err)
		var got []string
		for _, n := range page.Items {
			got = append(got, *n.PostID)
		}
		if fmt.Sprint(got) != want {
			t.Errorf("%s was told of the mentions in %v; want %s", user, got, want)
		}
	}
}

// An undone follow takes its unread notification with it, and only its own: an unfollow whose
// handling comes late, after the next follow's (its first delivery outlasted its ack wait while a
// redelivery ran), leaves the next follow's notification and its ref alone, so that the next
// unfollow still takes that one.
func TestALateUnfollowKeepsTheNextFollowsNotification(t *testing.T) {
	ctx := context.Background()
	a := newTwiceWorld(t, app.Deps{Table: backends["pebble"](t)}).a // no consumers run: the test applies the events
	must := putUsers(t, a, "ann", "ben")
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	follow := func(id, typ string, at time.Duration) rookery.Event {
		p, _ := json.Marshal(app.FollowPayload{FollowerID: "ben", FolloweeID: "ann", At: rookery.Time{Time: t0.Add(at)}})
		return rookery.Event{ID: id, Type: typ, OccurredAt: rookery.Time{Time: t0.Add(at)}, Payload: p}
	}
	count := func() int {
		page, err := a.Notifications(rookery.WithCaller(ctx, rookery.Caller{UserID: "ann"}), false, "", 100)
		must(err)
		return len(page.Items)
	}
	must(a.ApplyNotifications(ctx, follow("01FOLLOW1", app.FollowCreated, 0)))
	unfollow := follow("01UNFOLLOW1", app.FollowDeleted, time.Second)
	must(a.ApplyNotifications(ctx, unfollow))
	if n := count(); n != 0 {
		t.Fatalf("after follow and unfollow ann has %d notifications; want 0", n)
	}
	must(a.ApplyNotifications(ctx, follow("01FOLLOW2", app.FollowCreated, 2*time.Second)))
	must(a.ApplyNotifications(ctx, unfollow)) // late
	if n := count(); n != 1 {
		t.Fatalf("after a late unfollow ann has %d notifications; want the second follow's", n)
	}
	must(a.ApplyNotifications(ctx, follow("01UNFOLLOW2", app.FollowDeleted, 3*time.Second)))
	if n := count(); n != 0 {
		t.Fatalf("after the second unfollow ann has %d notifications; want 0", n)
	}
}

// A post's mentions make one NotificationsCreated event, not one each: the webhooks consumer turns
// it into a message per notification, each with its own id and queued once however often the event
// comes; the erasure consumer erases the notification of a recipient deleted meanwhile and keeps
// the others.
func TestMentionsMakeOneEvent(t *testing.T) {
	ctx := context.Background()
	tab := backends["pebble"](t)
	w := newTwiceWorld(t, app.Deps{Table: tab, WebhookPolicy: app.WebhookPolicy{AllowHTTP: true, AllowPrivate: true}})
	a := w.a
	server := rookery.WithCaller(ctx, rookery.Caller{UserID: "app", Server: true})
	must := putUsers(t, a, "alice", "bob", "carol", "dave")
	url, types := "http://127.0.0.1:9/hook", []string{"notification.created"}
	hook, err := a.CreateWebhook(server, app.WebhookInput{URL: &url, Events: &types})
	must(err)
	before, err := w.outbox.Pending(ctx, 100)
	must(err)
	p, _ := json.Marshal(app.PostPayload{PostID: "p1", AuthorID: "alice", NewMentions: []string{"bob", "carol", "dave"}})
	must(a.ApplyNotifications(ctx, rookery.Event{ID: "01EVENT", Type: app.PostEdited, OccurredAt: rookery.Time{Time: time.Now()}, Payload: p}))
	if after, err := w.outbox.Pending(ctx, 100); err != nil || after != before+1 {
		t.Fatalf("%d events in the outbox after three mentions (%d before, %v); want one more", after, before, err)
	}
	must(w.outbox.Flush(ctx))
	sub, err := w.log.Subscribe(ctx, "probe", events.SubscribeOptions{})
	must(err)
	defer sub.Close()
	var ev rookery.Event
	for ev.Type != app.NotificationsCreated {
		next, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := sub.Next(next)
		cancel()
		must(err)
		ev = d.Event()
		must(d.Ack(ctx))
	}

	for range 2 {
		must(a.ApplyWebhooks(ctx, ev))
	}
	queued, err := a.DueDeliveries(ctx, hook.ID, time.Now().Add(time.Hour), 100)
	must(err)
	ids, recipients := map[string]bool{}, map[string]bool{}
	for _, d := range queued {
		var body struct {
			Type string
			Data struct {
				UserID string `json:"user_id"`
			}
		}
		must(json.Unmarshal(d.Body, &body))
		ids[d.MessageID], recipients[body.Data.UserID] = true, true
		if body.Type != "notification.created" {
			t.Errorf("a %s message", body.Type)
		}
	}
	if len(queued) != 3 || len(ids) != 3 || len(recipients) != 3 {
		t.Fatalf("%d messages queued, %d ids, to %v; want 3, each its own id, to bob, carol and dave", len(queued), len(ids), recipients)
	}

	must(a.DeleteUser(rookery.WithCaller(ctx, rookery.Caller{UserID: "carol"}), "carol"))
	must(a.ApplyErasure(ctx, ev))
	for user, want := range map[string]int{"bob": 1, "carol": 0, "dave": 1} {
		page, err := tab.Query(ctx, table.Query{PK: "NOTIF#" + user})
		must(err)
		if len(page.Items) != want {
			t.Errorf("%s has %d notifications after the erasure check; want %d", user, len(page.Items), want)
		}
	}
}

// An endpoint made just before an event gets its message, although the webhooks consumer had read
// the endpoints a moment before it was made: in one process (the table's only writer, which
// forgets its copy when it changes an endpoint) and when the endpoint is made by another process
// (an API process beside the worker: the worker reads the endpoints again for an event that
// occurred after its copy was read).
func TestWebhookEndpointsMadeJustBeforeAnEvent(t *testing.T) {
	for name, sole := range map[string]bool{"one process": true, "an API process and a worker": false} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			d := app.Deps{Table: backends["pebble"](t), SoleWriter: sole, WebhookPolicy: app.WebhookPolicy{AllowHTTP: true, AllowPrivate: true}}
			worker := newTwiceWorld(t, d).a
			api := worker
			if !sole {
				api = newTwiceWorld(t, d).a
			}
			follow := func(n int) rookery.Event {
				p, _ := json.Marshal(app.FollowPayload{FollowerID: "bob", FolloweeID: "alice", At: rookery.Time{Time: time.Now()}})
				return rookery.Event{ID: fmt.Sprintf("01EVENT%d", n), Type: app.FollowCreated, Version: 1, Key: "follow:bob",
					OccurredAt: rookery.Time{Time: time.Now()}, Payload: p}
			}
			url, types := "http://127.0.0.1:9/hook", []string{"follow.created"}
			first, err := api.CreateWebhook(server, app.WebhookInput{URL: &url, Events: &types})
			if err != nil {
				t.Fatal(err)
			}
			if err := worker.ApplyWebhooks(ctx, follow(1)); err != nil { // the worker reads the endpoints now
				t.Fatal(err)
			}
			second, err := api.CreateWebhook(server, app.WebhookInput{URL: &url, Events: &types})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Millisecond) // the event occurs after the endpoint's reply, by the clock
			if err := worker.ApplyWebhooks(ctx, follow(2)); err != nil {
				t.Fatal(err)
			}
			for hook, want := range map[string]int{first.ID: 2, second.ID: 1} {
				queued, err := worker.DueDeliveries(ctx, hook, time.Now().Add(time.Hour), 100)
				if err != nil {
					t.Fatal(err)
				}
				if len(queued) != want {
					t.Errorf("endpoint %s: %d messages queued; want %d", hook, len(queued), want)
				}
			}
		})
	}
}
