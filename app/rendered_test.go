package app

import (
	"testing"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// TestRenderedPosts: a post is rendered again when its item's rev rises (an edit, a count), kept
// otherwise; an older item read late does not replace a newer rendering; items without a rev are
// rendered each time; the bound empties the copies rather than growing past it. A rendering carries
// its author's id (the read path's rules read it) and nothing else of the author.
func TestRenderedPosts(t *testing.T) {
	r := newRenderedPosts(2)
	item := func(id, text string, rev, likes int64) table.Item {
		return table.Item{"id": id, "author_id": "a", "text": text, "visibility": "public", "created_at": int64(1000), "like_count": likes, "rev": rev}
	}
	check := func(it table.Item, text string, likes int64) {
		t.Helper()
		if p := r.post(it); p.Text != text || p.LikeCount != likes || p.ID != it.String("id") ||
			p.Author != (rookery.Author{ID: it.String("author_id")}) || p.Visibility != it.String("visibility") {
			t.Fatalf("rendered %+v; want %q with %d likes by %s", p, text, likes, it.String("author_id"))
		}
	}
	check(item("p1", "one", 1, 0), "one", 0)
	check(item("p1", "one", 2, 1), "one", 1)       // liked: rev 2
	check(item("p1", "edited", 3, 1), "edited", 1) // edited: rev 3
	check(item("p1", "one", 2, 1), "one", 1)       // an older item read late renders as it is...
	check(item("p1", "edited", 3, 1), "edited", 1) // ...and the newer rendering stays
	check(item("p2", "no rev", 0, 5), "no rev", 5) // no rev: not kept
	check(item("p2", "no rev again", 0, 6), "no rev again", 6)
	check(item("p3", "three", 1, 0), "three", 0)
	check(item("p4", "four", 1, 0), "four", 0) // past the bound: emptied
	if len(r.posts) > 2 {
		t.Fatalf("%d posts kept; the bound is 2", len(r.posts))
	}
	check(item("p1", "edited", 3, 1), "edited", 1)
}
