package pebblestore

import (
	"fmt"
	"testing"
	"time"

	"github.com/rookery/rookery/timeline"
)

// TestHeadCachePushAfterRemoval: a removal that commits after a push began, and drops the heads,
// may have taken the push's entry away; a head read after it does not show the entry, and the push
// ending must not add it: the head is dropped. A push that nothing raced adds its entry.
func TestHeadCachePushAfterRemoval(t *testing.T) {
	c := newHeadCache(64)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	he := func(n int) headEntry {
		e := timeline.Entry{PostID: fmt.Sprintf("P%03d", n), AuthorID: "A", At: t0.Add(time.Duration(n) * time.Millisecond)}
		return headEntry{key: entryKey("u", ms(e.At), e.PostID), e: e}
	}
	read := func() { // a reader that misses, reads the engine (entry 1 alone) and keeps what it read
		_, epoch := c.get("u")
		c.add("u", &head{marked: true, entries: []headEntry{he(1)}, all: true}, epoch)
	}
	read()
	others := c.pushStart([]string{"u"})
	// The push commits entry 2; a removal of it commits and drops the head; a reader reads the
	// engine without entry 2 and keeps that head; then the push ends.
	c.drop("u")
	read()
	c.pushed([]string{"u"}, others, he(2).e)
	if h, _ := c.get("u"); h != nil {
		t.Fatalf("the head after a racing removal: %v; want it dropped", h.entries)
	}

	read()
	others = c.pushStart([]string{"u"})
	c.pushed([]string{"u"}, others, he(3).e)
	c.pushed([]string{"u"}, c.pushStart([]string{"u"}), he(2).e) // out of order: a head is newest first
	h, _ := c.get("u")
	if h == nil || len(h.entries) != 3 || h.entries[0].e != he(3).e || h.entries[1].e != he(2).e || h.entries[2].e != he(1).e {
		t.Fatalf("the head after pushes of 3 and 2 onto 1: %+v", h)
	}
}

// TestHeadWithKeepsItsSize: pushes onto a head of every entry of its timeline keep it at most
// headEntries long, and a head that leaves entries out no longer says it holds all of them.
func TestHeadWithKeepsItsSize(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	he := func(n int) headEntry {
		e := timeline.Entry{PostID: fmt.Sprintf("P%03d", n), AuthorID: "A", At: t0.Add(time.Duration(n) * time.Millisecond)}
		return headEntry{key: entryKey("u", ms(e.At), e.PostID), e: e}
	}
	h := &head{marked: true, all: true}
	for n := headEntries - 1; n >= 1; n-- { // 49 entries, newest first
		h.entries = append(h.entries, he(n))
	}
	got := h.with("u", []headEntry{he(headEntries + 1), he(headEntries), he(headEntries)})
	if len(got.entries) != headEntries || got.all {
		t.Fatalf("49 entries and 2 pushed: %d entries, all %v; want %d, false", len(got.entries), got.all, headEntries)
	}
	if got.entries[0].e != he(headEntries+1).e || got.entries[headEntries-1].e != he(2).e {
		t.Fatalf("newest %v, oldest %v", got.entries[0].e, got.entries[headEntries-1].e)
	}
	if again := h.with("u", []headEntry{he(headEntries)}); len(again.entries) != headEntries || !again.all {
		t.Fatalf("49 entries and 1 pushed: %d entries, all %v; want %d, true", len(again.entries), again.all, headEntries)
	}
}
