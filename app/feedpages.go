package app

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rookery/rookery"
	"github.com/rookery/rookery/table"
	"github.com/rookery/rookery/timeline"
)

// Kept feed pages. A reader reads their first page again and again while nothing in it changes; in
// a process that is its store's only writer (Deps.SoleWriter) every change a page can show passes
// through this process, so a page made once is served again until something it was made from
// changes. What it was made from is named by keys (a user, a post, the celebrity registry), and
// the process notes each change of one (changes) after the change is visible to reads: the table's
// writes (changeTable), the timelines' (changeTimelines), and the in-process copies that may lag
// the table for a moment (the post and author copies' sets, the authors' newest posts). The values
// kept by user (keptByUser: readers' edges, likes, deleted users) need no note of their own: one is
// never served while its change is under way, so a read sees the table's writes, which are noted.
//
// Invariant: a kept page was made by a read that began at stamp s, and is served only while no key
// it depends on changed after s. A change noted after s may have been missed by that read; one
// noted at or before s was visible to it (the note follows the change).

// changeSlots is how many slots the changes' keys hash into; keys sharing a slot only make pages
// be made again.
const changeSlots = 1 << 16

// changes numbers the changes a process makes, and keeps per slot of keys the number of the last.
type changes struct {
	seq   atomic.Uint64
	slots [changeSlots]atomic.Uint64
}

// Kinds of key a page depends on.
const (
	keyUser    = 'u' // a user: their profile, edges, likes, timeline and which posts they wrote
	keyProfile = 'n' // a user's profile alone (whether they are deleted): for the users posts mention
	keyPost    = 'p' // a post: its item, likes and comments
	keyCelebs  = 'c' // the celebrity registry
)

var changeSeed = maphash.MakeSeed()

func changeSlot(kind byte, id string) uint32 {
	h := maphash.String(changeSeed, id) ^ uint64(kind)*0x9e3779b97f4a7c15
	return uint32(h % changeSlots)
}

// stamp is the number a read that may keep its page begins at: before it reads anything.
func (c *changes) stamp() uint64 { return c.seq.Load() }

// changed notes a change of the key kind/id, which must be visible to reads already.
func (c *changes) changed(kind byte, id string) {
	if c != nil {
		c.raise(changeSlot(kind, id), c.seq.Add(1))
	}
}

// changedUsers notes one change of the users ids (a push to their timelines), which must be
// visible to reads already: one number for them all, since every one of them precedes it.
func (c *changes) changedUsers(ids []string) {
	if c == nil || len(ids) == 0 {
		return
	}
	n := c.seq.Add(1)
	for _, id := range ids {
		c.raise(changeSlot(keyUser, id), n)
	}
}

// raise makes slot hold at least n: notes of one slot may end out of order.
func (c *changes) raise(slot uint32, n uint64) {
	s := &c.slots[slot]
	for {
		old := s.Load()
		if old >= n || s.CompareAndSwap(old, n) {
			return
		}
	}
}

// unchangedSince reports whether no key of slots changed after stamp.
func (c *changes) unchangedSince(stamp uint64, slots []uint32) bool {
	for _, s := range slots {
		if c.slots[s].Load() > stamp {
			return false
		}
	}
	return true
}

// changedItem notes what a write of the table item at k (with item its new value, if a put)
// changes of what pages show.
func (c *changes) changedItem(k table.Key, item table.Item) {
	switch kind, id, _ := strings.Cut(k.PK, "#"); kind {
	case "USER": // a profile
		c.changed(keyUser, id)
		c.changed(keyProfile, id)
	case "FOLLOW", "MUTE": // whom a reader follows or mutes
		c.changed(keyUser, id)
	case "BLOCK": // either way hides
		c.changed(keyUser, id)
		c.changed(keyUser, k.SK)
	case "POST":
		c.changed(keyPost, id)
		if author, ok := item["author_id"].(string); ok && k.SK == skMeta { // a new post of author
			c.changed(keyUser, author)
		}
	default:
		if k.PK == celebritiesPK {
			c.changed(keyCelebs, "")
		}
	}
}

// changeTable is a table whose writes are noted as changes once they return (failed ones too: a
// write that timed out may have committed).
type changeTable struct {
	table.Table
	c *changes
}

func (t changeTable) Put(ctx context.Context, item table.Item, conds ...table.Cond) error {
	defer t.c.changedItem(table.Key{PK: item.String(table.PK), SK: item.String(table.SK)}, item)
	return t.Table.Put(ctx, item, conds...)
}

func (t changeTable) Update(ctx context.Context, k table.Key, u table.Update, conds ...table.Cond) (table.Item, error) {
	defer t.c.changedItem(k, nil)
	return t.Table.Update(ctx, k, u, conds...)
}

func (t changeTable) Delete(ctx context.Context, k table.Key, conds ...table.Cond) error {
	defer t.c.changedItem(k, nil)
	return t.Table.Delete(ctx, k, conds...)
}

func (t changeTable) TransactWrite(ctx context.Context, writes []table.Write) error {
	defer t.changedWrites(writes)
	return t.Table.TransactWrite(ctx, writes)
}

func (t changeTable) BatchWrite(ctx context.Context, writes []table.Write) error {
	defer t.changedWrites(writes)
	return t.Table.BatchWrite(ctx, writes)
}

func (t changeTable) changedWrites(writes []table.Write) {
	for _, w := range writes {
		switch w.Kind {
		case table.WritePut:
			t.c.changedItem(table.Key{PK: w.Item.String(table.PK), SK: w.Item.String(table.SK)}, w.Item)
		case table.WriteCheck:
		default:
			k := w.Key
			if k.PK == "" && w.Item != nil { // an immutable delete names its item
				k = table.Key{PK: w.Item.String(table.PK), SK: w.Item.String(table.SK)}
			}
			t.c.changedItem(k, nil)
		}
	}
}

// changeTimelines is a timeline store whose writes are noted as changes of their users once they
// return.
type changeTimelines struct {
	timeline.Store
	c *changes
}

func (s changeTimelines) users(users ...string) { s.c.changedUsers(users) }

func (s changeTimelines) Push(ctx context.Context, users []string, e timeline.Entry) error {
	defer s.users(users...)
	return s.Store.Push(ctx, users, e)
}

func (s changeTimelines) Begin(ctx context.Context, user string) (string, error) {
	defer s.users(user)
	return s.Store.Begin(ctx, user)
}

func (s changeTimelines) Complete(ctx context.Context, user, build string, entries []timeline.Entry, floor timeline.Entry) (bool, error) {
	defer s.users(user)
	return s.Store.Complete(ctx, user, build, entries, floor)
}

func (s changeTimelines) Create(ctx context.Context, user string, entries []timeline.Entry) error {
	defer s.users(user)
	return s.Store.Create(ctx, user, entries)
}

func (s changeTimelines) Merge(ctx context.Context, user string, entries []timeline.Entry) error {
	defer s.users(user)
	return s.Store.Merge(ctx, user, entries)
}

func (s changeTimelines) DropOlder(ctx context.Context, user string, e timeline.Entry) error {
	defer s.users(user)
	return s.Store.DropOlder(ctx, user, e)
}

func (s changeTimelines) Remove(ctx context.Context, user, postID string) error {
	defer s.users(user)
	return s.Store.Remove(ctx, user, postID)
}

func (s changeTimelines) RemoveAuthor(ctx context.Context, user, author string) error {
	defer s.users(user)
	return s.Store.RemoveAuthor(ctx, user, author)
}

func (s changeTimelines) RemovePost(ctx context.Context, postID string) error {
	defer s.c.changed(keyPost, postID)
	return s.Store.RemovePost(ctx, postID)
}

func (s changeTimelines) Delete(ctx context.Context, user string) error {
	defer s.users(user)
	return s.Store.Delete(ctx, user)
}

// feedPages keeps the pages readers read, each with the slots of the keys it depends on.
type feedPages struct {
	changes *changes
	max     int
	clock   rookery.Clock
	onRead  func(hit bool)

	mu    sync.Mutex
	pages map[feedPageKey]*feedPage
}

type feedPageKey struct {
	reader, cursor string
	limit          int
}

type feedPage struct {
	stamp uint64
	at    time.Time
	deps  []uint32
	page  Page[rookery.Post] // shared by the reads it is served to, which must not change it
}

// feedPageTTL bounds how long a page is served: a timeline read keeps it active (timeline.Store),
// and a copy left behind by a writer that stopped between its commit and its set is kept no
// longer than a read's.
const feedPageTTL = 30 * time.Second

// DefaultFeedPages is how many feed pages rookery serve keeps by default (--feed-pages).
const DefaultFeedPages = 4096

func newFeedPages(c *changes, max int, clock rookery.Clock, onRead func(bool)) *feedPages {
	if onRead == nil {
		onRead = func(bool) {}
	}
	return &feedPages{changes: c, max: max, clock: clock, onRead: onRead, pages: map[feedPageKey]*feedPage{}}
}

// get returns the page kept for k if nothing it depends on changed since it was made.
func (f *feedPages) get(k feedPageKey) (Page[rookery.Post], bool) {
	f.mu.Lock()
	p := f.pages[k]
	f.mu.Unlock()
	if p != nil && f.clock.Now().Sub(p.at) < feedPageTTL && f.changes.unchangedSince(p.stamp, p.deps) {
		f.onRead(true)
		return p.page, true
	}
	f.onRead(false)
	return Page[rookery.Post]{}, false
}

// maxPageDeps bounds the keys a page kept depends on: a page that pulled from more followees is
// made again on every read, as without pages (its keys would cost memory and their checks time).
const maxPageDeps = 2048

// put keeps page for k, made by a read that began at stamp and read r.
func (f *feedPages) put(k feedPageKey, stamp uint64, at time.Time, r *feedRead, page Page[rookery.Post]) {
	mentions := 0
	for _, p := range page.Items {
		mentions += len(p.Mentions)
	}
	n := 2 + len(r.following) + len(r.celebs) + 2*len(r.seen) + mentions
	if n > maxPageDeps {
		return
	}
	deps := make([]uint32, 0, n)
	deps = append(deps, changeSlot(keyUser, r.reader), changeSlot(keyCelebs, ""))
	for _, u := range r.following {
		deps = append(deps, changeSlot(keyUser, u))
	}
	for _, u := range r.celebs {
		deps = append(deps, changeSlot(keyUser, u))
	}
	for _, e := range r.seen {
		deps = append(deps, changeSlot(keyPost, e.PostID), changeSlot(keyUser, e.AuthorID))
	}
	for _, p := range page.Items { // a mention of a user deleted since is shown no more
		for _, m := range p.Mentions {
			deps = append(deps, changeSlot(keyProfile, m))
		}
	}
	page.Memo = &Memo{}
	p := &feedPage{stamp: stamp, at: at, deps: deps, page: page}
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.pages[k]; ok && old.stamp > stamp {
		return // a later read's
	}
	for other := range f.pages { // in no particular order
		if len(f.pages) < f.max {
			break
		}
		delete(f.pages, other)
	}
	f.pages[k] = p
}
