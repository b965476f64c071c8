package app

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rookery/rookery"
)

// TestPostPayloads: a post event's payload is decoded once and then shared while it is recent; an
// event whose id was seen with other bytes, or a malformed one, is decoded on its own.
func TestPostPayloads(t *testing.T) {
	a := &App{postPayloads: newPostPayloads(4)}
	event := func(id, post string) rookery.Event {
		b, err := json.Marshal(PostPayload{PostID: post, AuthorID: "u1", CreatedAt: rookery.Time{Time: time.UnixMilli(1).UTC()}})
		if err != nil {
			t.Fatal(err)
		}
		return rookery.Event{ID: id, Type: PostCreated, Payload: b}
	}
	get := func(ev rookery.Event) PostPayload {
		t.Helper()
		p, err := a.postPayload(ev)
		if err != nil {
			t.Fatalf("postPayload(%s): %v", ev.ID, err)
		}
		return p
	}
	kept := func(id string) bool {
		_, now := a.postPayloads.now[id]
		_, old := a.postPayloads.old[id]
		return now || old
	}

	e1 := event("e1", "p1")
	if p := get(e1); p.PostID != "p1" || p.AuthorID != "u1" {
		t.Fatalf("e1 decoded as %+v", p)
	}
	if !kept("e1") {
		t.Fatal("e1's payload is not kept")
	}
	// What another group finds is the kept value: shown by changing the kept one (tests only).
	d := a.postPayloads.now["e1"]
	d.p.Visibility = "kept"
	a.postPayloads.now["e1"] = d
	if p := get(e1); p.Visibility != "kept" {
		t.Fatalf("e1 decoded again: %+v", p)
	}
	// The same id with other bytes is not the kept event.
	if p := get(event("e1", "p2")); p.PostID != "p2" || p.Visibility != "" {
		t.Fatalf("e1 with other bytes gave %+v", p)
	}
	// A malformed payload is an error, and keeps nothing.
	if _, err := a.postPayload(rookery.Event{ID: "bad", Type: PostCreated, Payload: []byte(`{"post_id":`)}); err == nil {
		t.Fatal("a malformed payload decoded")
	}
	if kept("bad") {
		t.Fatal("a malformed payload is kept")
	}
	// Two generations of four: at least the latest four events are kept, and at most eight.
	for i := range 10 {
		get(event(fmt.Sprintf("n%d", i), "p"))
	}
	for i := range 10 {
		if k := kept(fmt.Sprintf("n%d", i)); i >= 6 && !k || i < 2 && k {
			t.Errorf("n%d kept: %v", i, k)
		}
	}
}
