package app

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// recentPosts caches, per author, the references to their newest posts (an author timeline), for
// the read path's merge of celebrities and its pull: a feed that merges 50 authors reads 50 cached
// slices instead of running 50 queries. An author's entry lives recentTTL at most; a post this
// process creates or fans out is added to it, and the entry is dropped at once when this process
// deletes one of their posts (a post deleted elsewhere is hidden anyway by the read path's batch
// read of the posts). So a cached slice lags the truth by at most recentTTL, and only by missing the
// newest posts of another API process's writes; a process that is its table's only writer
// (Deps.SoleWriter) keeps entries recentSoleTTL, since it sees each of their writes.
//
// A query that raced an add or a forget must not fill the cache: it may have read the index before
// the post that caused it was committed. Each add and forget stamps the author with a new value of a
// counter; a query notes the author's stamp (and the epoch of the stamps) before it runs, and its
// result is kept only if neither changed.
type recentPosts struct {
	mu      sync.Mutex
	authors map[string]recentEntry
	refs    int               // the size of authors: each entry's references, and one for the entry
	stamps  map[string]uint64 // author -> counter value of their last forget
	counter uint64
	epoch   uint64        // bumped when stamps is cleared (it is bounded: recentStamps)
	ttl     time.Duration // 0: recentTTL
	changes *changes      // told of each add and forget (feedPages); nil: none
}

// recentStamp is what a query notes before it runs.
type recentStamp struct{ stamp, epoch uint64 }

type recentEntry struct {
	entries  []timeline.Entry // newest first
	complete bool             // the author has no posts older than these
	at       time.Time
}

const (
	recentTTL     = time.Second
	recentSoleTTL = time.Hour
	recentPerUser = 50 // references kept per author (more if a deeper first page was read)
	// recentRefs bounds the cache's size, an entry counting its references and one for itself:
	// past it arbitrary authors are dropped. A reference takes about 90 bytes, so at most ~45 MB;
	// the many authors who post little cost little, and a timeline's rebuild finds them cached.
	recentRefs   = 500_000
	recentStamps = 40_000 // authors stamped; past it the stamps are cleared and the epoch bumped
)

// size is what e counts towards recentRefs.
func (e recentEntry) size() int { return 1 + len(e.entries) }

// get returns author's entry if it was put less than the TTL before now.
func (c *recentPosts) get(author string, now time.Time) (recentEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.authors[author]
	if !ok || now.Sub(e.at) > cmp.Or(c.ttl, recentTTL) {
		return recentEntry{}, false
	}
	return e, true
}

// cachedPage is one author's page served from the cache.
type cachedPage struct {
	author   string
	entries  []timeline.Entry
	complete bool
}

// pages returns, with one lock, the pages (as authorPage's) of the authors whose entries cover
// them, and the authors whose do not.
func (c *recentPosts) pages(authors []string, before timeline.Entry, n int, now time.Time) (found []cachedPage, missed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ttl := cmp.Or(c.ttl, recentTTL)
	found = make([]cachedPage, 0, len(authors)) // most authors are found: grown from empty, it allocated again and again
	for _, author := range authors {
		e, ok := c.authors[author]
		if ok && now.Sub(e.at) <= ttl {
			if es, complete, ok := e.page(before, n); ok {
				found = append(found, cachedPage{author, es, complete})
				continue
			}
		}
		missed = append(missed, author)
	}
	return found, missed
}

// page returns up to n of the entry's references older than before and whether they are all the
// author has, if the entry covers that range (ok).
func (e recentEntry) page(before timeline.Entry, n int) (es []timeline.Entry, complete, ok bool) {
	i := 0
	if before.PostID != "" {
		for i < len(e.entries) && !e.entries[i].Older(before) {
			i++
		}
	}
	rest := e.entries[i:]
	if len(rest) >= n {
		return rest[:n], false, true
	}
	return rest, true, e.complete
}

// stamp returns author's stamp, to pass to put after the query.
func (c *recentPosts) stamp(author string) recentStamp {
	c.mu.Lock()
	defer c.mu.Unlock()
	return recentStamp{c.stamps[author], c.epoch}
}

// put caches e for author, unless author was forgotten since s was taken.
func (c *recentPosts) put(author string, e recentEntry, s recentStamp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s != (recentStamp{c.stamps[author], c.epoch}) {
		return
	}
	if c.authors == nil {
		c.authors = map[string]recentEntry{}
	}
	c.dropLocked(author)
	for k, old := range c.authors {
		if c.refs+e.size() <= recentRefs {
			break
		}
		delete(c.authors, k)
		c.refs -= old.size()
	}
	c.authors[author] = e
	c.refs += e.size()
}

// dropLocked removes author's entry, if any.
func (c *recentPosts) dropLocked(author string) {
	if old, ok := c.authors[author]; ok {
		delete(c.authors, author)
		c.refs -= old.size()
	}
}

// forget drops author's entry: one of their posts was deleted.
func (c *recentPosts) forget(author string) {
	defer c.changes.changed(keyUser, author) // once the entry is gone
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(author)
	c.restampLocked(author)
}

// add puts the committed post e into its author's entry, if the entry holds e's place (e is newer
// than its last reference, or the entry is complete), and stamps the author like forget: a query
// that began before e was committed may lack it. A celebrity posting several times a second keeps
// their cached entry instead of sending every follower's read to the index.
func (c *recentPosts) add(e timeline.Entry) {
	defer c.changes.changed(keyUser, e.AuthorID) // once e is in
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restampLocked(e.AuthorID)
	old, ok := c.authors[e.AuthorID]
	if !ok {
		return
	}
	i, found := slices.BinarySearchFunc(old.entries, e, timeline.NewestFirst)
	if found || i == len(old.entries) && !old.complete {
		return // there already, or below what the entry covers
	}
	// A new slice: readers hold the old one (authorPage returns subslices of it). It keeps as many
	// references as before (at least recentPerUser); one dropped off the end ends completeness.
	es, complete := slices.Insert(slices.Clone(old.entries), i, e), old.complete
	if limit := max(len(old.entries), recentPerUser); len(es) > limit {
		es, complete = es[:limit], false
	}
	c.authors[e.AuthorID] = recentEntry{entries: es, complete: complete, at: old.at}
	c.refs += len(es) - len(old.entries)
}

func (c *recentPosts) restampLocked(author string) {
	if c.stamps == nil || len(c.stamps) >= recentStamps {
		c.stamps, c.epoch = map[string]uint64{}, c.epoch+1
	}
	c.counter++
	c.stamps[author] = c.counter
}

// authorPage returns up to n of author's posts older than before (zero: from the newest), newest
// first, and whether they are all there are (fewer than n and nothing older). It serves from the
// cache when the cache covers the range, else queries the posts-by-author index (and fills the
// cache on a first page).
func (a *App) authorPage(ctx context.Context, author string, before timeline.Entry, n int) ([]timeline.Entry, bool, error) {
	if e, ok := a.recent.get(author, a.clock.Now()); ok {
		if es, complete, ok := e.page(before, n); ok {
			return es, complete, nil
		}
	}
	limit := n
	if before.PostID == "" {
		limit = max(n, recentPerUser)
	}
	stamp := a.recent.stamp(author)
	es, more, err := a.queryAuthorPosts(ctx, author, before, limit)
	if err != nil {
		return nil, false, err
	}
	if before.PostID == "" {
		a.recent.put(author, recentEntry{entries: es, complete: !more, at: a.clock.Now()}, stamp)
	}
	if len(es) > n {
		return es[:n], false, nil
	}
	return es, !more, nil
}

// authorPageFresh is authorPage without the cache.
func (a *App) authorPageFresh(ctx context.Context, author string, before timeline.Entry, n int) ([]timeline.Entry, bool, error) {
	es, more, err := a.queryAuthorPosts(ctx, author, before, n)
	return es, !more, err
}

// entryAttributes are what queryAuthorPosts reads of a post.
var entryAttributes = []string{"id", "created_at"}

// queryAuthorPosts reads up to limit of author's posts older than before (zero: from the newest),
// newest first, from the posts-by-author index; more reports that there may be older ones.
func (a *App) queryAuthorPosts(ctx context.Context, author string, before timeline.Entry, limit int) (es []timeline.Entry, more bool, err error) {
	// Only the two attributes an entry needs: a post item is ~1 KB, and decoding whole ones was
	// most of a cache miss.
	q := withLimit(postsByAuthorQuery(author), limit)
	q.Attributes = entryAttributes
	if before.PostID != "" {
		q.SK = table.SKCond{Op: table.SKLt, Value: postIndexSK(before.PostID, before.At)}
	}
	p, err := a.table.Query(ctx, q)
	if err != nil {
		return nil, false, err
	}
	es = make([]timeline.Entry, len(p.Items))
	for i, it := range p.Items {
		es[i] = timeline.Entry{PostID: it.String("id"), AuthorID: author, At: time.UnixMilli(it.Int("created_at")).UTC()}
	}
	return es, len(es) == limit, nil
}

// soleTTL is how long recentPosts keeps an entry: recentSoleTTL for a process that is its table's
// only writer, else recentTTL (0).
func soleTTL(sole bool) time.Duration {
	if sole {
		return recentSoleTTL
	}
	return 0
}
