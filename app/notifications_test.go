package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/app"
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
