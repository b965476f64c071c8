package app

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/cache"
	"github.com/rookery/rookery/table"
)

// copies keeps copies of one kind of item (posts, or their authors' profiles) for the reads that
// render posts, on a store whose reads are billed (DynamoDB: a feed page of 20 posts by 20
// authors read strongly is 40 read units for them alone; seed 004 budgets 10 for the page).
// Copies live in the engagement cache (cache.Cache: in process, or Redis shared by every process
// of a deployment), versioned by an attribute of the item that every write of what is copied
// raises (a post's rev, a user's version), so an older copy never replaces a newer one.
//
// Invariant: a copy at version v is the item as it was at version v, or a tombstone (the item was
// deleted; version MaxInt64, which nothing replaces). Every writer sets the new copy after its
// write commits (the item it wrote, or read back strongly after its commit), or a tombstone; a
// writer whose write failed sets a tombstone, since a write that timed out may commit after any
// read back. The sets run on after the writer's request ends. A
// reader that misses, or finds a tombstone, reads the table strongly and keeps what it read, which
// the version keeps from replacing a newer copy. So a copy lags the table only when a writer
// stopped (or the cache failed) between its commit and its set, and then for the copy's TTL at
// most, or until the client retries: a retried deletion that finds the item gone sets its
// tombstone again (DeletePost, DeleteUser). A tombstone costs a table read, so an item re-created
// under a deleted one's key is read right.
type copies struct {
	kind    string   // "post" or "author": the keys' prefix and the metric's label
	version string   // the versioning attribute
	attrs   []string // the attributes copied
	store   copyStore
	keepNew bool // created sets the copies of new items
	ttl     time.Duration
	onRead  func(kind string, hits, misses int)
	changes *changes // told of each set (feedPages): a copy may lag its item's write; nil: none
}

// copyStore is where copies live: the engagement cache (cacheCopies, encoded: shared by the
// processes of a deployment), or this process's memory (localCopies, decoded), for a process that
// is its table's only writer.
type copyStore interface {
	// getMany returns the copies of keys, with a nil item for a miss or a tombstone.
	getMany(ctx context.Context, keys []string) ([]copied, error)
	// setMany sets copies, each unless a newer version is kept.
	setMany(ctx context.Context, cs []cache.Versioned[table.Item], ttl time.Duration) error
}

// copied is a copy as its store returns it: the item's copied attributes, and for a post kept
// decoded in process its rendering (renderPost), made once when the copy was set; so a page of
// kept posts is not rendered again, nor its items' maps touched, on every read.
type copied struct {
	item table.Item
	post *rookery.Post // nil: not rendered
}

// tombstone is the version of a deleted item's copy (whose Val is nil).
const tombstone = math.MaxInt64

// setTimeout bounds a write of copies; it runs on after its request ends (a writer whose client
// went away must still set what its commit made stale).
const setTimeout = 10 * time.Second

// DefaultPostCacheTTL is how long a copy lives with Deps.PostCacheTTL unset on a store that bills
// reads, or in process.
const DefaultPostCacheTTL = 5 * time.Minute

// DefaultPostCacheSize bounds each kind of copy kept in process (Deps.PostCacheSize unset): the
// posts pages render most, and their authors. Each copy's memory counts several times over in the
// process's peak (--gc-percent lets the heap grow to a multiple of what is live), so the default
// is sized for a posts-heavy server's memory; a read-heavy one whose pages show more distinct
// posts than this gains from more (docs/performance.md).
const DefaultPostCacheSize = 2_000

// postCacheSize is d's bound of copies kept in process.
func postCacheSize(d Deps) int {
	if d.PostCacheSize > 0 {
		return d.PostCacheSize
	}
	return DefaultPostCacheSize
}

// newCopies returns the copies of posts and of authors in store (nil, nil for ttl 0: none kept). A
// shared store keeps new posts at once (sparing their first reader a read); in process, where they
// would count against the process's memory whether read or not, the first read keeps them.
func newCopies(store func(render func(table.Item) rookery.Post) copyStore, shared bool, ttl time.Duration, onRead func(kind string, hits, misses int)) (posts, authors *copies) {
	if ttl <= 0 {
		return nil, nil
	}
	if onRead == nil {
		onRead = func(string, int, int) {}
	}
	return &copies{kind: "post", version: "rev", attrs: postCopyAttrs, store: store(renderPost), keepNew: shared, ttl: ttl, onRead: onRead},
		// A post shows its author's name; counts and the rest change without a new version.
		&copies{kind: "author", version: "version", attrs: []string{"id", "username", "display_name", "version"}, store: store(nil), keepNew: true, ttl: ttl, onRead: onRead}
}

// postCopyAttrs are what rendering a post reads of its item (postFromItem, view.maySee), and its
// version: not its index keys, half of the item.
var postCopyAttrs = []string{"id", "author_id", "text", "tags", "mentions", "media", "visibility", "created_at", "edited_at", "like_count", "comment_count", "rev"}

func (p *copies) key(id string) string { return p.kind + ":" + id }

// get returns the copies of the items ids, in ids' order: those not cached (a nil item) are to be
// read.
func (p *copies) get(ctx context.Context, ids []string) []copied {
	if p == nil || len(ids) == 0 {
		return make([]copied, len(ids))
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = p.key(id)
	}
	cs, err := p.store.getMany(ctx, keys)
	if err != nil { // a cache that fails costs table reads, nothing else
		p.onRead(p.kind, 0, len(ids))
		return make([]copied, len(ids))
	}
	hits := 0
	for _, c := range cs {
		if c.item != nil {
			hits++
		}
	}
	p.onRead(p.kind, hits, len(ids)-hits)
	return cs
}

// keep sets the copies of items written; a failure only costs later reads.
func (p *copies) keep(ctx context.Context, items ...table.Item) { p.keepItems(ctx, true, items) }

// fill sets the copies of items read from the table. Unlike a writer's copy, such a copy shows
// nothing that a read of the table would not (a newer copy is kept), so it is no change to pages
// kept (feedPages).
func (p *copies) fill(ctx context.Context, items ...table.Item) { p.keepItems(ctx, false, items) }

func (p *copies) keepItems(ctx context.Context, change bool, items []table.Item) {
	if p == nil || len(items) == 0 {
		return
	}
	cs := make([]cache.Versioned[table.Item], 0, len(items))
	for _, it := range items {
		c := make(table.Item, len(p.attrs)) // readers share the copy; the caller keeps it
		for _, a := range p.attrs {
			if v, ok := it[a]; ok {
				c[a] = v
			}
		}
		cs = append(cs, cache.Versioned[table.Item]{Key: p.key(it.String("id")), Version: it.Int(p.version), Val: c})
	}
	p.set(ctx, cs, change)
}

// created sets the copy of an item just created, if new items are kept.
func (p *copies) created(ctx context.Context, it table.Item) {
	if p != nil && p.keepNew {
		p.keep(ctx, it)
	}
}

// forget sets item id's tombstone.
func (p *copies) forget(ctx context.Context, id string) {
	if p == nil {
		return
	}
	p.set(ctx, []cache.Versioned[table.Item]{{Key: p.key(id), Version: tombstone}}, true)
}

// set sets cs; change says that they are a writer's (noted once set: feedPages).
func (p *copies) set(ctx context.Context, cs []cache.Versioned[table.Item], change bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setTimeout)
	defer cancel()
	_ = p.store.setMany(ctx, cs, p.ttl)
	if change && p.changes != nil {
		kind := byte(keyPost)
		if p.kind == "author" {
			kind = keyUser
		}
		for _, c := range cs {
			p.changes.changed(kind, strings.TrimPrefix(c.Key, p.kind+":"))
		}
	}
}

// cacheCopies keeps copies encoded in a cache.Cache; a tombstone is an empty value.
type cacheCopies struct{ c cache.Cache }

func (s cacheCopies) getMany(ctx context.Context, keys []string) ([]copied, error) {
	vals, err := s.c.GetMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]copied, len(keys))
	for i, v := range vals {
		if len(v) > 0 {
			out[i].item, _ = table.DecodeItem(v) // one that does not decode is a miss
		}
	}
	return out, nil
}

func (s cacheCopies) setMany(ctx context.Context, cs []cache.Versioned[table.Item], ttl time.Duration) error {
	entries := make([]cache.Entry, len(cs))
	for i, c := range cs {
		entries[i] = cache.Entry{Key: c.Key, Version: c.Version, Val: []byte{}}
		if c.Val != nil {
			entries[i].Val = table.AppendItem(nil, c.Val)
		}
	}
	return s.c.SetMany(ctx, entries, ttl)
}

// localCopies keeps copies decoded in this process (whose readers share them), rendered if render
// is set.
type localCopies struct {
	v      *cache.Versions[copied]
	render func(table.Item) rookery.Post
}

func newLocalCopies(clock rookery.Clock, render func(table.Item) rookery.Post, max int) localCopies {
	return localCopies{v: cache.NewVersions[copied](clock, max), render: render}
}

func (s localCopies) getMany(_ context.Context, keys []string) ([]copied, error) {
	cs, _ := s.v.GetMany(keys)
	return cs, nil
}

func (s localCopies) setMany(_ context.Context, cs []cache.Versioned[table.Item], ttl time.Duration) error {
	vs := make([]cache.Versioned[copied], len(cs))
	for i, c := range cs {
		vs[i] = cache.Versioned[copied]{Key: c.Key, Version: c.Version}
		if c.Val == nil { // a tombstone
			continue
		}
		// Its own copy, encoded and decoded again: the strings of an item decoded whole are slices
		// of one string, the whole stored item, which a copy of a few attributes would keep alive.
		it := c.Val
		if d, err := table.DecodeItem(table.AppendItem(nil, c.Val)); err == nil {
			it = d
		}
		vs[i].Val.item = it
		if s.render != nil {
			p := s.render(it)
			vs[i].Val.post = &p
		}
	}
	s.v.SetMany(vs, ttl)
	return nil
}

// settle sets the copy of item id (key k) after a write of it ended with err: the item read back
// after a commit, or a tombstone after an error, since a write that timed out may commit after any
// read back (gone: nothing to keep, its deletion set the tombstone).
func (p *copies) settle(ctx context.Context, t table.Table, id string, k table.Key, err error) {
	if p == nil {
		return
	}
	if err != nil {
		p.forget(ctx, id)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setTimeout)
	defer cancel()
	if it, err := t.Get(ctx, k); err == nil {
		p.keep(ctx, it)
	} else if !rookery.IsKind(err, rookery.NotFound) {
		p.forget(ctx, id)
	}
}
