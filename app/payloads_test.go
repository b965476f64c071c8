package app

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rookery/rookery"
)

func TestPayloadsDecodeOnce(t *testing.T) {
	var ps payloads
	ev := rookery.Event{ID: "e1", Type: PostCreated, Payload: json.RawMessage(`{"post_id":"p1","author_id":"a"}`)}
	p, err := payloadOf[PostPayload](&ps, ev)
	if err != nil || p.PostID != "p1" || p.AuthorID != "a" {
		t.Fatalf("first decoding: %+v, %v", p, err)
	}
	// The same event for another group: the kept value, not a decoding (this payload would fail).
	again := ev
	again.Payload = json.RawMessage(`not json`)
	if p, err := payloadOf[PostPayload](&ps, again); err != nil || p.PostID != "p1" {
		t.Fatalf("second decoding of one event: %+v, %v; want the kept one", p, err)
	}
	// Another type is decoded apart.
	type authorOnly struct {
		AuthorID string `json:"author_id"`
	}
	if _, err := payloadOf[authorOnly](&ps, again); err == nil {
		t.Fatal("a type not kept for the event was not decoded")
	}
	// A payload that does not decode is not kept: it fails again.
	bad := rookery.Event{ID: "e2", Type: PostCreated, Payload: json.RawMessage(`{"post_id":1}`)}
	for range 2 {
		if _, err := payloadOf[PostPayload](&ps, bad); err == nil {
			t.Fatal("a malformed payload decoded")
		}
	}
	// After payloadsKept more decodings the first is decoded anew.
	for i := range payloadsKept {
		e := rookery.Event{ID: fmt.Sprint("f", i), Payload: json.RawMessage(`{"post_id":"x"}`)}
		if _, err := payloadOf[PostPayload](&ps, e); err != nil {
			t.Fatal(err)
		}
	}
	if len(ps.byID) != payloadsKept {
		t.Fatalf("%d payloads kept; want %d", len(ps.byID), payloadsKept)
	}
	if _, err := payloadOf[PostPayload](&ps, again); err == nil {
		t.Fatal("an event past the kept ones was not decoded anew")
	}
}
