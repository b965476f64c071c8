package app

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rookery/rookery/timeline"
)

// TestRecentPostsIgnoreAQueryThatRacedAForget: a query that began before a post was created (and
// its author forgotten) must not fill the cache with the list that lacks the post.
func TestRecentPostsIgnoreAQueryThatRacedAForget(t *testing.T) {
	var c recentPosts
	stale := recentEntry{entries: []timeline.Entry{{PostID: "old"}}, complete: true, at: time.Now()}
	s := c.stamp("ann")
	c.forget("ann") // a post by ann was committed while the query ran
	c.put("ann", stale, s)
	if _, ok := c.get("ann", time.Now()); ok {
		t.Fatal("a query that raced a forget filled the cache")
	}
	c.put("ann", stale, c.stamp("ann"))
	if _, ok := c.get("ann", time.Now()); !ok {
		t.Fatal("a query after the forget did not fill the cache")
	}
	s = c.stamp("bob")
	c.forget("ann") // another author's forget does not matter
	c.put("bob", stale, s)
	if _, ok := c.get("bob", time.Now()); !ok {
		t.Fatal("another author's forget kept bob's entry out")
	}
}

// TestRecentPostsAdd: a committed post goes into its author's cached entry in order, once; an
// entry that does not reach down to it is left alone; a full entry drops its oldest reference and
// is no longer complete; and a query that raced the add does not fill the cache.
func TestRecentPostsAdd(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
	entry := func(id string, ms int64) timeline.Entry {
		return timeline.Entry{PostID: id, AuthorID: "ann", At: at(ms)}
	}
	ids := func(e recentEntry) (s []string) {
		for _, x := range e.entries {
			s = append(s, x.PostID)
		}
		return s
	}
	now := time.Now()

	var c recentPosts
	c.add(entry("p0", 5)) // nothing cached: nothing to add to
	if _, ok := c.get("ann", now); ok {
		t.Fatal("add made an entry")
	}
	// Room to grow in place: an add that inserted into the cached slice would change a reader's.
	first := append(make([]timeline.Entry, 0, 10), entry("p3", 30), entry("p1", 10))
	c.put("ann", recentEntry{entries: first, complete: true, at: now}, c.stamp("ann"))
	held, _ := c.get("ann", now)
	c.add(entry("p4", 40))
	c.add(entry("p2", 20))
	c.add(entry("p2", 20)) // again: fan-out adds what this process created
	c.add(entry("p0", 5))  // the entry is complete: it reaches down to anything
	got, _ := c.get("ann", now)
	if want := []string{"p4", "p3", "p2", "p1", "p0"}; !slices.Equal(ids(got), want) || !got.complete {
		t.Fatalf("after adds: %v complete=%v, want %v complete", ids(got), got.complete, want)
	}
	if want := []string{"p3", "p1"}; !slices.Equal(ids(held), want) {
		t.Fatalf("a reader's slice changed under it: %v", ids(held))
	}

	// An incomplete entry: an older post is below what it covers.
	c.put("bob", recentEntry{entries: []timeline.Entry{{PostID: "b2", AuthorID: "bob", At: at(20)}}, at: now}, c.stamp("bob"))
	c.add(timeline.Entry{PostID: "b1", AuthorID: "bob", At: at(10)})
	if got, _ := c.get("bob", now); len(got.entries) != 1 {
		t.Fatalf("a post below an incomplete entry was added: %v", ids(got))
	}

	// A full entry (longer than recentPerUser, as a deep first page fills it) keeps its length.
	var full []timeline.Entry
	for i := 2 * recentPerUser; i > 0; i-- {
		full = append(full, entry(fmt.Sprintf("f%03d", i), int64(100+i)))
	}
	c.put("ann", recentEntry{entries: full, complete: true, at: now}, c.stamp("ann"))
	c.add(entry("new", 1000))
	c.add(entry("oldest", 1)) // past the end of a full entry
	got, _ = c.get("ann", now)
	if len(got.entries) != 2*recentPerUser || got.entries[0].PostID != "new" || got.complete {
		t.Fatalf("a full entry after adds: %d references, first %s, complete=%v", len(got.entries), got.entries[0].PostID, got.complete)
	}

	// A query that began before the add does not fill the cache.
	s := c.stamp("cat")
	c.add(timeline.Entry{PostID: "c1", AuthorID: "cat", At: at(10)})
	c.put("cat", recentEntry{complete: true, at: now}, s)
	if _, ok := c.get("cat", now); ok {
		t.Fatal("a query that raced an add filled the cache")
	}
}

// TestRecentPostsBounded: the cache keeps its size (references, and one an entry) within
// recentRefs whatever is put, added and forgotten, and counts it right; authors without posts cost
// one each, so many fit.
func TestRecentPostsBounded(t *testing.T) {
	var c recentPosts
	now := time.Now()
	check := func() {
		t.Helper()
		sum := 0
		for _, e := range c.authors {
			sum += e.size()
		}
		if sum != c.refs || c.refs > recentRefs {
			t.Fatalf("size %d counted %d; the bound is %d", sum, c.refs, recentRefs)
		}
	}
	for i := range 100_000 { // authors who never posted
		c.put(fmt.Sprint("quiet", i), recentEntry{complete: true, at: now}, c.stamp(fmt.Sprint("quiet", i)))
	}
	check()
	if len(c.authors) != 100_000 {
		t.Fatalf("%d of 100,000 authors without posts kept", len(c.authors))
	}
	long := make([]timeline.Entry, 100)
	for i := range long {
		long[i] = timeline.Entry{PostID: fmt.Sprint("p", 1000-i), At: time.UnixMilli(int64(1000 - i))}
	}
	for i := range 10_000 { // 1,010,000 references: past the bound
		author := fmt.Sprint("busy", i)
		c.put(author, recentEntry{entries: long, complete: true, at: now}, c.stamp(author))
		if i%7 == 0 {
			c.add(timeline.Entry{PostID: "new", AuthorID: author, At: time.UnixMilli(5000)})
		}
		if i%11 == 0 {
			c.forget(author)
		}
		c.put(author, recentEntry{entries: long[:50], at: now}, c.stamp(author)) // replaced
	}
	check()
}
