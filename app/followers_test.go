package app

import (
	"slices"
	"testing"
)

// A list is served from memory only if it was read whole with no change of any follows begun or
// ended meanwhile, and no change of its author's since; while a change is under way it is read
// from the store.
func TestFollowerLists(t *testing.T) {
	f := newFollowerLists(10, 5)
	read := func(author string, ids ...string) *followerFill { // a read from the store, kept at once
		ff := f.fill(author)
		ff.add(ids)
		return ff
	}
	f.keep(read("a", "x", "y"))
	if l, ok := f.get("a"); !ok || !slices.Equal(l, []string{"x", "y"}) {
		t.Fatalf("a's list = %v, %v", l, ok)
	}

	// A change drops the list when it begins, and lists read while it is under way are not kept,
	// nor are lists whose read began before it ended.
	done := f.change("a")
	if _, ok := f.get("a"); ok {
		t.Fatal("a's list is served while a follow of a is being written")
	}
	if ff := f.fill("a"); ff != nil {
		t.Fatal("a's list may be filled while a follow of a is being written")
	}
	during := read("b", "z")
	done()
	f.keep(during)
	if _, ok := f.get("b"); ok {
		t.Fatal("a list read while a change was under way was kept")
	}
	before := f.fill("a")
	before.add([]string{"x"})
	f.change("c")() // a change of another author's follows, begun and ended during the read
	f.keep(before)
	if _, ok := f.get("a"); ok {
		t.Fatal("a list whose read overlapped a change was kept")
	}

	// Lists longer than the longest kept are not kept; the ids kept stay under the bound.
	f.keep(read("long", "1", "2", "3", "4", "5", "6"))
	if _, ok := f.get("long"); ok {
		t.Fatal("a list longer than maxList was kept")
	}
	for _, a := range []string{"p", "q", "r", "s"} {
		f.keep(read(a, "1", "2", "3", "4"))
		if _, ok := f.get(a); !ok || f.total > 10 {
			t.Fatalf("after keeping %s: kept %v, %d ids", a, ok, f.total)
		}
	}
	f.keep(read("p", "1"))
	f.keep(read("p", "1", "2"))
	total := 0
	for _, l := range f.vals {
		total += l.n
	}
	if total != f.total {
		t.Fatalf("%d ids counted, %d kept", f.total, total)
	}

	var off *followerLists = newFollowerLists(0, 5) // no cache: every method a no-op
	off.change("a")()
	off.keep(off.fill("a"))
	if _, ok := off.get("a"); ok {
		t.Fatal("a disabled cache served a list")
	}
}
