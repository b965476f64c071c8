package app

import (
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
