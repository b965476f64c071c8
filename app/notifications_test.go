package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
	"github.com/rookery/rookery/events"
	"github.com/rookery/rookery/table"
)

// An event's notifications are written together; an event delivered again, whole or after only
// some of them were written, still leaves exactly one notification per recipient, and none for the
// actor or for a recipient who blocked the actor.
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
	edit := func(mentions ...string) rookery.Event {
		p, _ := json.Marshal(app.PostPayload{PostID: "p1", AuthorID: "alice", NewMentions: mentions})
		return rookery.Event{ID: "01EVENT", Type: app.PostEdited, OccurredAt: rookery.Time{Time: time.Now()}, Payload: p}
	}
	count := func(user string) int {
		p, err := a.Notifications(rookery.WithCaller(ctx, rookery.Caller{UserID: user}), false, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Items)
	}
	// A first delivery that wrote only bob's (as one transaction per notification could leave it).
	if err := a.ApplyNotifications(ctx, edit("bob")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // then the whole event, twice
		if err := a.ApplyNotifications(ctx, edit("bob", "carol", "alice", "erin", "dave")); err != nil {
			t.Fatal(err)
		}
	}
	for user, want := range map[string]int{"bob": 1, "carol": 1, "dave": 1, "alice": 0, "erin": 0} {
		if got := count(user); got != want {
			t.Errorf("%s has %d notifications; want %d", user, got, want)
		}
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
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		_, _, err := a.PutUser(server, u, app.UserInput{Username: u + "_x"})
		must(err)
	}
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
