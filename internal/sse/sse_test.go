package sse_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/rookery/rookery/internal/sse"
)

func TestRead(t *testing.T) {
	in := "retry: 2000\n\nid: 7\n\n: heartbeat\n\nid: 8\nevent: feed.post\ndata: {\"a\":1}\n\nevent: x\ndata: one\ndata:two\n\n"
	var got []sse.Event
	if err := sse.Read(strings.NewReader(in), func(e sse.Event) bool { got = append(got, e); return true }); err != nil {
		t.Fatal(err)
	}
	want := []sse.Event{{ID: "7"}, {ID: "8", Type: "feed.post", Data: `{"a":1}`}, {Type: "x", Data: "one\ntwo"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v; want %+v", got, want)
	}
	n := 0
	sse.Read(strings.NewReader(in), func(sse.Event) bool { n++; return false })
	if n != 1 {
		t.Fatalf("read on after fn returned false: %d calls", n)
	}
}
