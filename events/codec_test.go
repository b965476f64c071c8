package events_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/events"
)

// viaJSON is what an event was after it was stored as JSON: the stored form must decode to the same.
func viaJSON(t *testing.T, ev rookery.Event) rookery.Event {
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var out rookery.Event
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameEvent(t *testing.T, got, want rookery.Event) {
	t.Helper()
	var gp, wp any
	if err := json.Unmarshal(got.Payload, &gp); err != nil {
		t.Fatalf("payload %q: %v", got.Payload, err)
	}
	json.Unmarshal(want.Payload, &wp)
	if !reflect.DeepEqual(gp, wp) {
		t.Fatalf("payload %s, want %s", got.Payload, want.Payload)
	}
	got.Payload, want.Payload = nil, nil
	if !reflect.DeepEqual(got, want) || !got.OccurredAt.Equal(want.OccurredAt.Time) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

func TestEventCodec(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		var b strings.Builder
		for range rnd.IntN(40) {
			b.WriteRune([]rune("aZ09-_#é日\x00 \"\\")[rnd.IntN(13)])
		}
		return b.String()
	}
	cases := []rookery.Event{
		{},
		{ID: "01J", Type: "PostCreated", Version: 1, Key: "post-1", Payload: json.RawMessage(`{"post_id":"p"}`)},
		{ID: "x", OccurredAt: rookery.Time{Time: time.Date(1969, 12, 31, 23, 59, 59, 998_765_432, time.UTC)}, Payload: json.RawMessage(" [1, 2,\n 3] ")},
		{ID: "y", OccurredAt: rookery.Time{Time: time.Date(2026, 11, 23, 10, 4, 5, 123_999_999, time.FixedZone("X", 3600))}, Payload: json.RawMessage(`"<&>"`)},
		{ID: "t", Type: "PostCreated", Key: "post-2", Payload: json.RawMessage(`{}`), Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	for range 500 {
		payload, _ := json.Marshal(map[string]any{str(): str(), "n": rnd.Int64(), "f": rnd.Float64()})
		cases = append(cases, rookery.Event{ID: str(), Type: str(), Version: rnd.IntN(1 << 20), Key: str(), Payload: payload,
			OccurredAt: rookery.Time{Time: time.Unix(rnd.Int64N(4e9)-1e9, rnd.Int64N(1e9))}, Trace: str()})
	}
	for _, ev := range cases {
		b, err := events.AppendEvent([]byte("prefix"), ev)
		if err != nil {
			t.Fatal(err)
		}
		if string(b[:6]) != "prefix" {
			t.Fatal("AppendEvent did not append")
		}
		got, err := events.DecodeEvent(b[6:])
		if err != nil {
			t.Fatalf("%+v: %v", ev, err)
		}
		sameEvent(t, got, viaJSON(t, ev))
		// Events stored as JSON before are read as they were.
		old, _ := json.Marshal(ev)
		got, err = events.DecodeEvent(old)
		if err != nil {
			t.Fatal(err)
		}
		sameEvent(t, got, viaJSON(t, ev))
		for cut := range len(b) - 6 {
			if _, err := events.DecodeEvent(b[6 : 6+cut]); err == nil && cut < len(b)-6-len(got.Payload) {
				t.Fatalf("%+v cut at %d of %d decoded", ev, cut, len(b)-6)
			}
		}
	}
	if _, err := events.AppendEvent(nil, rookery.Event{ID: "x", Payload: json.RawMessage(`{"a":`)}); !rookery.IsKind(err, rookery.Invalid) {
		t.Fatalf("a payload that is not JSON: %v", err)
	}
}
