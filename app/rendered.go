package app

import (
	"sync"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
)

// renderedPosts keeps posts as rendered from their items (renderPost), by id and rev: every write
// of a post item raises its rev, so a post rendered from the item at one rev is that item's
// rendering for as long as it has that rev. A page's posts are rendered once each, not on every
// read, and the read path's rules read the rendered post's fields, not the item's map; the copies
// are shared, so their slices are only read.
type renderedPosts struct {
	max int

	mu    sync.Mutex
	posts map[string]renderedPost
}

type renderedPost struct {
	rev  int64
	post rookery.Post
}

func newRenderedPosts(max int) *renderedPosts {
	return &renderedPosts{max: max, posts: map[string]renderedPost{}}
}

// post returns the post of item it, with its author's id alone; from the copy rendered at its rev
// if kept.
func (r *renderedPosts) post(it table.Item) rookery.Post {
	rev := it.Int("rev")
	if r == nil || rev == 0 { // an item without a rev has no version to key a copy by
		return renderPost(it)
	}
	id := it.String("id")
	r.mu.Lock()
	c, ok := r.posts[id]
	r.mu.Unlock()
	if ok && c.rev == rev {
		return c.post
	}
	p := renderPost(it)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.posts[id]; ok && c.rev > rev {
		return p // a newer rendering is kept
	}
	if len(r.posts) >= r.max {
		clear(r.posts) // as the marker cache: simple, and refilled by the next pages
	}
	r.posts[id] = renderedPost{rev: rev, post: p}
	return p
}

// renderPost is post item it rendered with its author's id alone: the author's profile changes on
// its own, and each view adds it (view.show).
func renderPost(it table.Item) rookery.Post {
	return postFromItem(it, rookery.Author{ID: it.String("author_id")})
}
