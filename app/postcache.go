package app

import (
	"context"
	"math"
	"time"

	"github.com/rookery/rookery/cache"
	"github.com/rookery/rookery/table"
)

// postCache keeps copies of post items for the home feed, on a store whose reads are billed
// (DynamoDB: a feed page of 20 posts read strongly is 20 read units; seed 004 budgets 10 for the
// page). Copies live in the engagement cache (cache.Cache: in process, or Redis shared by every
// process of a deployment), versioned by the post item's rev, a number every write of the item
// adds one to, so an older copy never replaces a newer one.
//
// Invariant: a copy at version r is the item as it was at rev r, or a tombstone (the post was
// deleted; version MaxInt64, which nothing replaces). Every writer of a post item sets the new copy
// after its write commits: CreatePost the item it put, EditPost and the counters the item they read
// back (strongly) after their commit, removePost a tombstone. A reader that misses, or finds a
// tombstone, reads the table strongly and sets what it read, which the version keeps from
// replacing a newer copy. So a copy lags the table only when a writer stopped (or the cache
// failed) between its commit and its set, and then for the copy's TTL at most; a tombstone costs
// a table read, so a post re-created under a deleted one's id is read right.
type postCache struct {
	c      cache.Cache
	ttl    time.Duration
	onRead func(hits, misses int)
}

// tombstone is the version of a deleted post's copy.
const tombstone = math.MaxInt64

// DefaultPostCacheTTL is how long a post's copy lives with Deps.PostCacheTTL unset on a store
// that bills reads.
const DefaultPostCacheTTL = 5 * time.Minute

func postCacheKey(id string) string { return "post:" + id }

// get returns the copies of the posts ids that are cached, by id; the others are to be read.
func (p *postCache) get(ctx context.Context, ids []string) map[string]table.Item {
	if p == nil || len(ids) == 0 {
		return nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = postCacheKey(id)
	}
	vals, err := p.c.GetMany(ctx, keys)
	if err != nil { // a cache that fails costs table reads, nothing else
		p.onRead(0, len(ids))
		return nil
	}
	out := make(map[string]table.Item, len(ids))
	for i, v := range vals {
		if len(v) == 0 { // a miss, or a tombstone
			continue
		}
		if it, err := table.DecodeItem(v); err == nil {
			out[ids[i]] = it
		}
	}
	p.onRead(len(out), len(ids)-len(out))
	return out
}

// keep sets the copies of post items read or written; a failure only costs later reads.
func (p *postCache) keep(ctx context.Context, items ...table.Item) {
	if p == nil || len(items) == 0 {
		return
	}
	entries := make([]cache.Entry, 0, len(items))
	for _, it := range items {
		entries = append(entries, cache.Entry{Key: postCacheKey(it.String("id")), Version: it.Int("rev"), Val: table.AppendItem(nil, it)})
	}
	_ = p.c.SetMany(ctx, entries, p.ttl)
}

// forget sets post id's tombstone.
func (p *postCache) forget(ctx context.Context, id string) {
	if p != nil {
		_ = p.c.Set(ctx, postCacheKey(id), tombstone, []byte{}, p.ttl)
	}
}

// reread reads post item k back after a write committed and keeps it (gone: nothing to keep, its
// deletion set the tombstone).
func (p *postCache) reread(ctx context.Context, t table.Table, k table.Key) {
	if p == nil {
		return
	}
	if it, err := t.Get(ctx, k); err == nil {
		p.keep(ctx, it)
	}
}
