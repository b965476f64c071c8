package pebblestore

import (
	"bytes"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rookery/rookery/timeline"
)

// DefaultHeadCache is how many timelines' newest entries a Store keeps in memory by default: a few
// megabytes (headEntries entries each).
const DefaultHeadCache = 4096

// headEntries is how many of a timeline's newest entries its head keeps: a first page of up to 50,
// or two of 20, without the engine.
const headEntries = 50

// A head is what a read of a timeline's newest entries saw in the engine: its marker and
// its newest entries, newest first. all says the entries are every entry a read may ever show
// (the rest are below the floor or past their TTL).
type head struct {
	marked  bool // the marker exists
	mark    mark
	entries []headEntry
	all     bool
}

type headEntry struct {
	key []byte // the engine key: the floor's test (mark.below) needs it
	e   timeline.Entry
}

// headCache keeps the heads of recently read timelines, so that reading a feed's first page needs
// no iterator over the engine's levels. It is coherent with the engine because this Store writes
// every marker and entry of its engine (one Store per engine) and tells the cache of each batch
// after it commits: a push's entries join the heads they belong to (pushed), any other write drops
// the heads of the timelines it wrote (drop). A reader that missed adds the head it read only if no
// write touched the user's shard since it looked (the shard's epoch): otherwise what it read may
// be older than that write.
//
// A push adds its entry to a head only if no other write dropped a head in the shard between the
// push's start (before its commit) and its end: such a write, committed after the push, may have
// removed the entry (a removal of its post or author, a trim, a reset), and a head read since
// shows that. Pushes commute (a head holds the newest entries, whatever order they came in), so
// they need no such care among themselves. Pushed entries wait beside their head (pending) and
// are merged into a new head by the next read: most timelines receive more pushes than reads.
//
// A head holds raw marker and entries, so each read applies the clock (the marker's liveness, the
// TTL) as a read from the engine does.
type headCache struct {
	seed   maphash.Seed
	max    int // heads per shard; 0: the cache is off
	shards [headShards]headShard
}

const headShards = 64

// maxPending is how many pushed entries wait beside a head before it is dropped instead (a
// timeline pushed to far more often than it is read).
const maxPending = headEntries

type headShard struct {
	mu     sync.Mutex
	epoch  uint64        // grows with every write to a timeline of the shard
	others atomic.Uint64 // grows with every write other than a push (drop); read without mu
	m      map[string]*cachedHead
}

// cachedHead is a head and the entries pushed since it was read, in push order (under the shard's
// mutex; the head itself is never modified).
type cachedHead struct {
	h       *head
	pending []headEntry
}

func newHeadCache(max int) *headCache {
	c := &headCache{seed: maphash.MakeSeed()}
	if max > 0 {
		c.max = max/headShards + 1
	}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*cachedHead)
	}
	return c
}

func (c *headCache) shard(user string) *headShard {
	return &c.shards[maphash.String(c.seed, user)%headShards]
}

// get returns user's head, or nil and the epoch to pass to add. A head is never modified.
func (c *headCache) get(user string) (*head, uint64) {
	if c.max == 0 {
		return nil, 0
	}
	s := c.shard(user)
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.m[user]
	if ch == nil {
		return nil, s.epoch
	}
	if len(ch.pending) > 0 {
		ch.h, ch.pending = ch.h.with(user, ch.pending), nil
	}
	return ch.h, s.epoch
}

// add keeps h as user's head, read from the engine after get returned epoch, unless a write has
// touched the shard since.
func (c *headCache) add(user string, h *head, epoch uint64) {
	if c.max == 0 {
		return
	}
	s := c.shard(user)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.epoch != epoch {
		return
	}
	for u := range s.m { // room, evicting in the map's random order
		if len(s.m) < c.max {
			break
		}
		delete(s.m, u)
	}
	s.m[user] = &cachedHead{h: h}
}

// drop forgets the heads of users, whose timelines a committed batch wrote (other than a push's
// entries).
func (c *headCache) drop(users ...string) {
	if c.max == 0 {
		return
	}
	for _, u := range users {
		s := c.shard(u)
		s.mu.Lock()
		s.epoch++
		s.others.Add(1)
		delete(s.m, u)
		s.mu.Unlock()
	}
}

// pushStart returns what pushed needs to know of the shards of users before their push commits.
func (c *headCache) pushStart(users []string) []uint64 {
	if c.max == 0 {
		return nil
	}
	others := make([]uint64, len(users))
	for i, u := range users {
		others[i] = c.shard(u).others.Load()
	}
	return others
}

// pushed adds the committed entry e to the heads of users, given pushStart's answer from before
// the commit; a head whose shard another write touched since then is dropped instead.
func (c *headCache) pushed(users []string, others []uint64, e timeline.Entry) {
	if c.max == 0 {
		return
	}
	at := ms(e.At)
	for i, u := range users {
		s := c.shard(u)
		s.mu.Lock()
		s.epoch++
		if ch := s.m[u]; ch != nil {
			if s.others.Load() != others[i] || !ch.h.marked || ch.h.mark.build != "" || len(ch.pending) == maxPending {
				delete(s.m, u)
			} else {
				ch.pending = append(ch.pending, headEntry{key: entryKey(u, at, e.PostID), e: e})
			}
		}
		s.mu.Unlock()
	}
}

// with returns h with the pushed entries of user added: those above its floor and, unless h holds
// all of the timeline, newer than its oldest entry (older ones are past what h knows), at most
// as many entries in all as h or a head read (headEntries).
func (h *head) with(user string, pushed []headEntry) *head {
	var add []headEntry
	for _, pe := range pushed {
		if h.mark.below(user, pe.key) || !h.all && (len(h.entries) == 0 || bytes.Compare(pe.key, h.entries[len(h.entries)-1].key) < 0) {
			continue
		}
		add = append(add, pe)
	}
	newestFirst := func(a, b headEntry) int { return bytes.Compare(b.key, a.key) }
	slices.SortFunc(add, newestFirst) // a few, mostly in order already
	// A merge of the two, newest first, each key once (a push delivered again, or read with h).
	most := max(len(h.entries), headEntries)
	n := &head{marked: h.marked, mark: h.mark, all: h.all, entries: make([]headEntry, 0, min(most, len(h.entries)+len(add)))}
	old := h.entries
	for len(n.entries) < most && len(old)+len(add) > 0 {
		var next headEntry
		if len(add) == 0 || len(old) > 0 && newestFirst(old[0], add[0]) <= 0 {
			next, old = old[0], old[1:]
		} else {
			next, add = add[0], add[1:]
		}
		if len(n.entries) > 0 && bytes.Equal(n.entries[len(n.entries)-1].key, next.key) {
			continue // in both, or pushed twice
		}
		n.entries = append(n.entries, next)
	}
	if len(old)+len(add) > 0 {
		n.all = false // the oldest are left out
	}
	return n
}
